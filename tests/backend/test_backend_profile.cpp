// The profiler (backend/profile.h) on every device: one time per step, the table sorted by
// time with what each step computes, the Chrome trace well-formed.
#include <nlohmann/json.hpp>

#include "backend/profile.h"
#include "ir/parser.h"
#include "tests/backend/backend_check.h"
#include "tests/support/support.h"

namespace kiln::testing {
namespace {

class BackendProfile : public DeviceTest {};
KILN_DEVICE_TESTS(BackendProfile);

const char* kGraph = R"(
graph mlp(%x: f32[64,128], %w: f32[128,256], %b: f32[256]) {
  %m = matmul(%x, %w) : f32[64,256]
  %h = add(%m, %b) : f32[64,256]
  %t = tanh(%h) : f32[64,256]
  %s = softmax(%t, dim=-1) : f32[64,256]
  return (%s)
})";

TEST_P(BackendProfile, EveryStepIsTimedAndNamed) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(kGraph);
  backend::CompileOptions o;
  o.device = test_device();
  backend::CompiledGraph c = backend::compile(g, o);
  KILN_REQUIRE_RUN();
  std::vector<HostTensor> inputs = inputs_for(g, 3);
  backend::Profile p = backend::profile(c.executable, inputs, 3);
  ASSERT_EQ(p.steps.size(), static_cast<size_t>(c.report.kernels + c.report.blas_calls));
  EXPECT_EQ(p.runs, 3);
  int matmuls = 0;
  double last_start = -1;
  for (const backend::StepProfile& s : p.steps) {
    EXPECT_GE(s.ms, 0);
    EXPECT_GE(s.start_ms, last_start) << "steps start in schedule order";
    last_start = s.start_ms;
    EXPECT_GT(s.bytes, 0);
    EXPECT_FALSE(s.computes.empty());
    matmuls += s.kind != "kernel";
  }
  EXPECT_EQ(matmuls, c.report.blas_calls);
  EXPECT_GT(p.steps_ms(), 0);
  EXPECT_GE(p.run_ms, 0);
  std::string table = p.table();
  EXPECT_TRUE(has(table, "matmul 64x256x128")) << table;
  EXPECT_TRUE(has(table, "%s")) << table;
  // The totals by kind: each kind's steps counted once.
  std::string totals = p.totals_by_kind();
  EXPECT_TRUE(has(totals, fmt::format("kernel {} x", c.report.kernels))) << totals;
  EXPECT_TRUE(has(totals, fmt::format("{} {} x", test_device().kind == Device::Kind::CUDA ? "cuBLASLt" : "BLAS",
                                      c.report.blas_calls)))
      << totals;
  EXPECT_TRUE(has(table, totals)) << table;
  nlohmann::json trace = nlohmann::json::parse(p.chrome_trace());
  int events = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") {
      ++events;
      EXPECT_GE(e["dur"].get<double>(), 0);
      EXPECT_TRUE(e["args"].contains("computes"));
    }
  EXPECT_EQ(events, static_cast<int>(p.steps.size()));
}

TEST_P(BackendProfile, ZeroRunsIsAnError) {
  KILN_REQUIRE_JIT();
  Graph g = parse_graph(kGraph);
  backend::CompileOptions o;
  o.device = test_device();
  backend::CompiledGraph c = backend::compile(g, o);
  std::string msg = error_of([&] { backend::profile(c.executable, inputs_for(g, 1), 0); });
  EXPECT_TRUE(has(msg, "at least 1")) << msg;
}

}  // namespace
}  // namespace kiln::testing
