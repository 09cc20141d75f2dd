// A third backend, written in this file alone: the CPU's kernels on host memory, under a device
// kind of its own ("twin") with storage of its own. Registering it is all it takes to compile
// graphs for it, move tensors and modules to it, run eager ops, compiled graphs, compiled
// functions and compiled training steps on it: the proof that adding a device touches nothing
// upstream of its backend (docs/adding-a-backend.md). Its results must equal the CPU's bit for
// bit, since the kernels are the same.
#include <gtest/gtest.h>

#include "backend/compile.h"
#include "backend/executable_state.h"
#include "backend/registry.h"
#include "frontend/device.h"
#include "frontend/kiln.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "runtime/cpu/jit.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::error_of;
using kiln::testing::has;

namespace {

const Device::Kind kTwin = register_device_kind("twin");

// The twin device's memory: host memory, held behind the storage interface as a GPU's is.
class TwinStorage final : public backend::DeviceStorage {
 public:
  TwinStorage(const HostTensor& t, int index) : t_(t.contiguous()), meta_(t_.meta().on(Device{kTwin, index})) {}
  const TensorMeta& meta() const override { return meta_; }
  HostTensor to_host() const override { return t_.clone(); }
  const HostTensor& host() const { return t_; }

 private:
  HostTensor t_;
  TensorMeta meta_;
};

const HostTensor& twin_host(const backend::DeviceStorage& s) {
  const auto* t = dynamic_cast<const TwinStorage*>(&s);
  if (!t) fail("a tensor on {} is not in the twin device's memory", s.meta().device.str());
  return t->host();
}

// Runs the CPU backend's program on the twin's storage.
class TwinProgram final : public backend::Program {
 public:
  explicit TwinProgram(std::shared_ptr<const backend::Program> cpu) : cpu_(std::move(cpu)) {}
  std::vector<HostTensor> run(const backend::ExecutableState& s, std::span<const HostTensor> inputs) const override {
    ++runs;
    return cpu_->run(s, inputs);
  }
  std::vector<backend::StoragePtr> run_on_device(const backend::ExecutableState& s, std::span<const backend::StoragePtr> inputs) const override {
    ++runs;
    std::vector<HostTensor> host;
    for (const backend::StoragePtr& t : inputs) host.push_back(twin_host(*t));
    std::vector<backend::StoragePtr> out;
    for (HostTensor& r : cpu_->run(s, host)) out.push_back(std::make_shared<const TwinStorage>(r, s.device.index));
    return out;
  }
  static inline std::atomic<int> runs{0};

 private:
  std::shared_ptr<const backend::Program> cpu_;
};

class TwinBackend final : public backend::Backend {
 public:
  std::string_view name() const override { return "twin"; }
  codegen::Target target(const backend::CompileOptions& options) const override {
    codegen::Target t = cpu().target(options);
    t.name = "twin (the CPU's kernels)";
    return t;
  }
  std::string_view prelude() const override { return cpu().prelude(); }
  std::string emit_kernel(const codegen::Kernel& kernel) const override { return cpu().emit_kernel(kernel); }
  std::string source_file_name() const override { return cpu().source_file_name(); }
  std::shared_ptr<const backend::Program> compile(const backend::ExecutableState& state, const backend::CompileOptions& options,
                                                  backend::CompileReport& report) const override {
    return std::make_shared<TwinProgram>(cpu().compile(state, options, report));
  }
  bool device_present(const Device& device, std::string* why) const override {
    if (device.index < 2) return true;
    if (why) *why = "the twin backend has devices twin:0 and twin:1";
    return false;
  }
  backend::StoragePtr copy_from_host(const HostTensor& host, const Device& device) const override {
    return std::make_shared<const TwinStorage>(host, device.index);
  }

 private:
  static const backend::Backend& cpu() { return backend::cpu_backend(); }
};

const TwinBackend& twin_backend() {
  static const TwinBackend b;
  backend::register_backend(kTwin, b);
  return b;
}

const Device kTwin0{kTwin, 0};

#define KILN_REQUIRE_TWIN()                                                                  \
  do {                                                                                       \
    twin_backend();                                                                          \
    if (!runtime::cpu::jit_available()) GTEST_SKIP() << "the twin runs the CPU's JIT, absent in this build"; \
  } while (0)

void expect_equal(const HostTensor& got, const HostTensor& want) {
  EXPECT_EQ(got.meta().dtype, want.meta().dtype);
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_EQ(got.to_doubles(), want.to_doubles());
}

// Eager CPU ops run the reference kernels, a device's eager ops compiled kernels: close, not
// bit-equal.
void expect_close(const HostTensor& got, const HostTensor& want) {
  EXPECT_EQ(got.shape(), want.shape());
  EXPECT_LE(kiln::testing::max_rel_diff(got, want), 1e-5);
}

const char* kGraph = R"(
graph mlp_softmax(%x: f32[5,7], %w: f32[7,3], %b: f32[3]) {
  %h = matmul(%x, %w) : f32[5,3]
  %hb = add(%h, %b) : f32[5,3]
  %r = relu(%hb) : f32[5,3]
  %s = softmax(%r, dim=1) : f32[5,3]
  %t = sum(%s, dim=[0]) : f32[3]
  return (%s, %t, %s)
}
)";

}  // namespace

TEST(ThirdBackend, ANewDeviceKindIsNamedParsedAndPrinted) {
  EXPECT_EQ(kTwin0.str(), "twin:0");
  EXPECT_EQ(register_device_kind("twin"), kTwin) << "registering a name again gives the same kind";
  ASSERT_TRUE(parse_device("twin:1").has_value());
  EXPECT_EQ(*parse_device("twin:1"), (Device{kTwin, 1}));
  EXPECT_FALSE(parse_device("twin:x").has_value());
  EXPECT_FALSE(parse_device("tpu").has_value());
  EXPECT_TRUE(has(device_kind_names(), "twin[:N]")) << device_kind_names();
  Graph g = parse_graph("graph g(%a: f32[2]@twin:1) {\n  return (%a)\n}\n");
  EXPECT_EQ(g.inputs()[0]->meta().device, (Device{kTwin, 1}));
  EXPECT_TRUE(has(print_graph(g), "f32[2]@twin:1")) << print_graph(g);
  EXPECT_TRUE(has(error_of([] { register_device_kind("Bad Name"); }), "not a device name"));
}

TEST(ThirdBackend, AKindWithNoBackendSaysSo) {
  Device none{register_device_kind("nobackend"), 0};
  std::string msg = error_of([&] { backend::backend_for(none); });
  EXPECT_TRUE(has(msg, "no backend is registered for 'nobackend' devices")) << msg;
  msg = error_of([&] { (void)randn({2}, 1).to(none); });
  EXPECT_TRUE(has(msg, "to(nobackend:0): no nobackend device is present")) << msg;
  EXPECT_TRUE(has(error_of([] { backend::register_backend(Device::Kind::CPU, twin_backend()); }), "built in")) << "the CPU's backend stays";
}

TEST(ThirdBackend, CompiledGraphRunsOnItsStorageAndMatchesTheCpu) {
  KILN_REQUIRE_TWIN();
  Graph g = parse_graph(kGraph);
  backend::CompileOptions options;
  options.device = kTwin0;
  backend::CompiledGraph twin = backend::compile(g, options);
  backend::CompiledGraph cpu = backend::compile_cpu(g);
  EXPECT_EQ(twin.report.device, "twin (the CPU's kernels)");
  EXPECT_EQ(twin.executable.source(), cpu.executable.source()) << "the same kernels";
  std::vector<HostTensor> in = {randn({5, 7}, 1).data(), randn({7, 3}, 2).data(), randn({3}, 3).data()};
  std::vector<HostTensor> want = cpu.run(in);
  std::vector<HostTensor> host = twin.run(in);  // host tensors in and out, on every device
  ASSERT_EQ(host.size(), 3u);
  for (size_t i = 0; i < host.size(); ++i) expect_equal(host[i], want[i]);

  // Tensors on the device in, tensors on the device out (the duplicate output its own tensor).
  std::vector<Tensor> args;
  for (const HostTensor& t : in) args.push_back(Tensor(t).to(kTwin0));
  for (const Tensor& a : args) EXPECT_TRUE(has(error_of([&] { (void)a.data(); }), "is on twin:0")) << "its memory is not the host's";
  const int runs = TwinProgram::runs;
  std::vector<Tensor> out = run(twin.executable, args);
  EXPECT_EQ(TwinProgram::runs, runs + 1);
  ASSERT_EQ(out.size(), 3u);
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_EQ(out[i].device(), kTwin0);
    expect_equal(out[i].cpu().data(), want[i]);
  }
  EXPECT_NE(out[0].impl()->device_data, out[2].impl()->device_data) << "an output returned twice is two tensors";

  // Wrong inputs are named, as on any device.
  std::string msg = error_of([&] { run(twin.executable, {args[0], args[1], Tensor(in[2])}); });
  EXPECT_TRUE(has(msg, "input 2") && has(msg, "is on cpu, the graph was compiled for twin:0")) << msg;
  msg = error_of([&] { run(twin.executable, {args[0], args[1]}); });
  EXPECT_TRUE(has(msg, "takes 3 inputs")) << msg;
  msg = error_of([&] { (void)backend::run_on_device(cpu.executable, {}); });
  EXPECT_TRUE(has(msg, "compiled for the CPU")) << msg;
}

TEST(ThirdBackend, EagerOpsRunOnTheDeviceThroughTheDeviceKey) {
  KILN_REQUIRE_TWIN();
  Tensor a = randn({4, 6}, 4), b = randn({6}, 5);
  Tensor want = ((a * b + 1.0).relu() - a.t().t()).sum({1});
  Tensor ta = a.to(kTwin0), tb = b.to(kTwin0);
  EXPECT_EQ(ta.key_set(), DispatchKeySet(DispatchKey::Device));
  const int runs = TwinProgram::runs;
  Tensor got = ((ta * tb + 1.0).relu() - ta.t().t()).sum({1});
  EXPECT_GE(TwinProgram::runs, runs + 6) << "each op ran on the twin's program";
  EXPECT_EQ(got.device(), kTwin0);
  expect_close(got.cpu().data(), want.data());
  // A 0-d CPU tensor is copied over; any other CPU tensor is an error naming both devices.
  expect_close((ta * tensor({2.0}, {})).cpu().data(), (a * 2.0).data());
  std::string msg = error_of([&] { (void)(ta + a); });
  EXPECT_TRUE(has(msg, "every tensor of an op must be on one device") && has(msg, "on twin:0")) << msg;
  msg = error_of([&] { (void)a.to(Device{kTwin, 5}); });
  EXPECT_TRUE(has(msg, "no twin device is present (the twin backend has devices twin:0 and twin:1)")) << msg;
  // Between two devices of the kind: through the host.
  Tensor other = ta.to(Device{kTwin, 1});
  EXPECT_EQ(other.device(), (Device{kTwin, 1}));
  expect_equal(other.cpu().data(), a.data());
}

TEST(ThirdBackend, ModulesCompiledFunctionsAndTrainingStepsRunOnIt) {
  KILN_REQUIRE_TWIN();
  nn::Linear host_lin(8, 4, true, 7), twin_lin(8, 4, true, 7);
  twin_lin.to(kTwin0);
  EXPECT_EQ(twin_lin.weight.device(), kTwin0);
  Tensor x = randn({3, 8}, 8);

  // kiln::compile: the device comes from the inputs.
  auto f_host = kiln::compile([&](const Tensor& t) { return host_lin(t).relu().softmax(1); });
  auto f_twin = kiln::compile([&](const Tensor& t) { return twin_lin(t).relu().softmax(1); });
  Tensor want = f_host(x);
  int runs = TwinProgram::runs;
  Tensor got = f_twin(x.to(kTwin0));
  EXPECT_EQ(TwinProgram::runs, runs + 1) << "one compiled graph, run on the twin";
  EXPECT_EQ(got.device(), kTwin0);
  expect_equal(got.cpu().data(), want.data());

  // A compiled training step keeps the parameters and the optimizer's state on the device.
  Tensor y = randn({3, 4}, 9);
  auto loss = [](nn::Module& m, const std::vector<Tensor>& b) {
    Tensor d = static_cast<nn::Linear&>(m)(b[0]) - b[1];
    return (d * d).mean();
  };
  auto step_host = kiln::compile(host_lin, [&](const std::vector<Tensor>& b) { return loss(host_lin, b); }, AdamWConfig{.lr = 1e-2});
  auto step_twin = kiln::compile(twin_lin, [&](const std::vector<Tensor>& b) { return loss(twin_lin, b); }, AdamWConfig{.lr = 1e-2});
  runs = TwinProgram::runs;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step_twin({x.to(kTwin0), y.to(kTwin0)}), step_host({x, y})) << "step " << i;
  EXPECT_EQ(TwinProgram::runs, runs + 3);
  EXPECT_EQ(twin_lin.weight.device(), kTwin0);
  expect_equal(twin_lin.weight.cpu().data(), host_lin.weight.data());
  TrainState st = step_twin.state();
  ASSERT_EQ(st.state.size(), step_host.state().state.size());
  for (size_t i = 0; i < st.state.size(); ++i) expect_equal(st.state[i], step_host.state().state[i]);
}
