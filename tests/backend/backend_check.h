#pragma once
// Shared by the backend tests: compile a graph for the CPU, run it on random non-zero inputs
// and compare every output with the reference interpreter.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "backend/compile.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "tests/support/support.h"

namespace kiln::testing {

// Skips the test where the JIT is not built in.
#define KILN_REQUIRE_JIT()                                                   \
  do {                                                                       \
    if (!::kiln::runtime::cpu::jit_available()) GTEST_SKIP() << "no JIT in this build"; \
  } while (0)

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
  std::vector<HostTensor> want = interpret(g, inputs);
  backend::CompiledGraph cg = backend::compile_cpu(g, options);
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
        << "output " << i << " of\n" << print_graph(g) << "\nkernels:\n" << cg.executable.source().substr(cg.executable.source().find("end of prelude"));
  }
}

inline void expect_matches_reference(const Graph& g, uint64_t seed = 1, double slack = 1) {
  expect_matches_reference(g, inputs_for(g, seed), slack);
}

}  // namespace kiln::testing
