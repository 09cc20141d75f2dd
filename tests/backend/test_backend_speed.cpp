// Throughput figures of compiled kernels (not assertions: machines differ). Disabled by
// default; run with --gtest_also_run_disabled_tests --gtest_filter='*Speed*'.
#include <chrono>

#include "ir/builder.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

double best_ms(const backend::CompiledGraph& cg, const std::vector<HostTensor>& in, int reps = 20) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    cg.run(in);
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

void report(const char* what, const Graph& g, int64_t bytes) {
  backend::CompiledGraph cg = backend::compile_cpu(g);
  std::vector<HostTensor> in = inputs_for(g, 1);
  double ms = best_ms(cg, in);
  std::printf("%-28s %8.3f ms  %6.2f GB/s (read+write)\n", what, ms, static_cast<double>(bytes) / ms / 1e6);
}

TEST(DISABLED_BackendSpeed, Figures) {
  KILN_REQUIRE_JIT();
  const int64_t R = 1024, C = 4096, N = R * C * 4;
  {
    Graph g("add");
    Builder b(g);
    g.set_outputs({b.add(b.wrap(g.add_input("x", F({R, C}))), b.wrap(g.add_input("y", F({C}))))});
    report("add f32[1024,4096]+[4096]", g, 2 * N);
  }
  {
    Graph g("softmax");
    Builder b(g);
    g.set_outputs({b.op(Op::Softmax, {b.wrap(g.add_input("x", F({R, C})))}, {{"dim", int64_t(-1)}})});
    report("softmax f32[1024,4096]", g, 2 * N);
  }
  {
    Graph g("layer_norm");
    Builder b(g);
    g.set_outputs({b.op(Op::LayerNorm, {b.wrap(g.add_input("x", F({R, C}))), b.wrap(g.add_input("w", F({C}))), b.wrap(g.add_input("b", F({C})))},
                        {{"normalized_shape", IntList{C}}})});
    report("layer_norm f32[1024,4096]", g, 2 * N);
  }
  {
    Graph g("sum");
    Builder b(g);
    g.set_outputs({b.sum(b.wrap(g.add_input("x", F({R, C}))), {1})});
    report("sum rows f32[1024,4096]", g, N);
  }
  {
    Graph g("f16");
    Builder b(g);
    g.set_outputs({b.mul(b.wrap(g.add_input("x", T(DType::F16, {R, C}))), b.wrap(g.add_input("y", T(DType::F16, {R, C}))))});
    report("mul f16[1024,4096]", g, 3 * N / 2);
  }
  {
    Graph g("transpose");
    Builder b(g);
    g.set_outputs({b.contiguous(b.transpose(b.wrap(g.add_input("x", F({R, C}))), 0, 1))});
    report("transpose copy f32", g, 2 * N);
  }
}

}  // namespace
}  // namespace kiln::testing
