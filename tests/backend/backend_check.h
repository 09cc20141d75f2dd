#pragma once
// Shared by the backend tests: compile a graph for the device under test, run it on random
// non-zero inputs and compare every output with the reference interpreter.
//
// Every backend test takes the device as a parameter (TEST_P on a DeviceTest suite, then
// KILN_DEVICE_TESTS(Suite)): it runs on the CPU and, where the CUDA backend is built, on
// cuda:0. With no GPU, CUDA graphs are still compiled (NVRTC) and the runs skip, naming why.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/compile.h"
#if KILN_HAVE_CUDA
#include "backend/cuda_backend.h"
#endif
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

namespace kiln::testing {

// The device the running backend test compiles for (set by DeviceTest::SetUp).
inline Device& test_device() {
  static Device d;
  return d;
}
inline bool on_cuda() { return test_device().kind == Device::Kind::CUDA; }

// The devices backend tests run on: the CPU, and cuda:0 where the CUDA backend is built.
inline std::vector<Device> test_devices() {
  std::vector<Device> d{Device::cpu()};
#if KILN_HAVE_CUDA
  d.push_back(Device::cuda(0));
#endif
  return d;
}
inline std::string device_param_name(const ::testing::TestParamInfo<Device>& info) {
  return info.param.kind == Device::Kind::CPU ? "cpu" : "cuda";
}

class DeviceTest : public ::testing::TestWithParam<Device> {
 protected:
  void SetUp() override { test_device() = GetParam(); }
  void TearDown() override { test_device() = Device::cpu(); }
};
#define KILN_DEVICE_TESTS(Suite) \
  INSTANTIATE_TEST_SUITE_P(Devices, Suite, ::testing::ValuesIn(::kiln::testing::test_devices()), ::kiln::testing::device_param_name)

// Whether compiled graphs can run on the test device; when not, `why` says why.
inline bool device_can_run(std::string* why) {
  if (!on_cuda()) {
    if (!::kiln::runtime::cpu::jit_available()) {
      *why = "no JIT in this build";
      return false;
    }
    return true;
  }
#if KILN_HAVE_CUDA
  std::string w;
  if (backend::cuda_device_present(&w)) return true;
  *why = "no CUDA device (" + w + "): kernels compiled with NVRTC, not run";
#else
  *why = "no CUDA backend in this build";
#endif
  return false;
}

// Skips the test where the CPU JIT is not built in (the CPU device only: CUDA compiles
// with NVRTC and skips at its first run).
#define KILN_REQUIRE_JIT()                                                                              \
  do {                                                                                                  \
    if (!::kiln::testing::on_cuda() && !::kiln::runtime::cpu::jit_available()) GTEST_SKIP() << "no JIT in this build"; \
  } while (0)
// Skips the rest of the test where compiled graphs cannot run on the test device.
#define KILN_REQUIRE_RUN()                             \
  do {                                                 \
    std::string why_;                                  \
    if (!::kiln::testing::device_can_run(&why_)) GTEST_SKIP() << why_; \
  } while (0)

// compile() for the test device.
inline backend::CompiledGraph compile_for_test(const Graph& g, backend::CompileOptions options = {}) {
  options.device = test_device();
  return backend::compile(g, options);
}

// inputs_for: random inputs for `g` (seeded), integer inputs in [0, int_bound).
// expect_matches_reference: compiles `g`, runs it and EXPECTs every output to match
// interpret(g) within the dtype's tolerance (f32 1e-5 abs+rel times `slack`, f64 1e-9,
// f16/bf16 1e-2/2e-2, integers and bools exactly).


inline std::vector<HostTensor> inputs_for(const Graph& g, uint64_t seed, int64_t int_bound = 4) {
  std::vector<HostTensor> in;
  for (size_t i = 0; i < g.inputs().size(); ++i)
    in.push_back(random_tensor(g.inputs()[i]->meta(), seed + i * 7919, int_bound));
  return in;
}

inline void expect_matches_reference(const Graph& g, const std::vector<HostTensor>& inputs, double slack = 1,
                              const backend::CpuCompileOptions& options = {}) {
  backend::CompiledGraph cg = compile_for_test(g, options);
  std::string why;
  if (!device_can_run(&why)) {
    GTEST_SKIP() << why;
    return;
  }
  std::vector<HostTensor> want = interpret(g, inputs);
  std::vector<HostTensor> got = cg.run(inputs);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    DType dt = want[i].dtype();
    double atol = 0, rtol = 0;
    switch (dt) {
      case DType::F32: atol = rtol = 1e-5 * slack; break;
      case DType::F64: atol = rtol = 1e-9 * slack; break;
      case DType::F16: atol = rtol = 1e-2 * slack; break;
      case DType::BF16: atol = rtol = 2e-2 * slack; break;
      default: break;
    }
    EXPECT_EQ(got[i].dtype(), dt) << "output " << i;
    EXPECT_EQ(got[i].shape(), want[i].shape()) << "output " << i;
    EXPECT_TRUE(tensors_close(got[i], want[i], atol, rtol))
        << "output " << i << " on " << test_device().str() << " of\n" << print_graph(g) << "\nkernels:\n"
        << cg.executable.source().substr(std::min(cg.executable.source().size(), cg.executable.source().find("end of prelude")));
  }
}

inline void expect_matches_reference(const Graph& g, uint64_t seed = 1, double slack = 1) {
  expect_matches_reference(g, inputs_for(g, seed), slack);
}

}  // namespace kiln::testing
