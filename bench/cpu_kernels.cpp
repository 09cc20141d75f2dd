// Single CPU kernels against the copy bandwidth of the same run (all of kiln's threads): a
// broadcast add, a row softmax, a layer norm, a row sum, an f16 multiply and a transposing copy,
// each f32[1024,4096] (f16 for the multiply), the best of 20 runs of the compiled graph. Prints a
// table last. (Was a disabled test that asserted nothing.) The operands are 16 MB: where the
// last-level cache holds them, repeated runs read them from it, past the copy bandwidth.
//
// Usage: kiln_bench_cpu_kernels
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "bench/harness.h"
#include "bench/host_timing.h"
#include "ir/builder.h"
#include "ir/host_tensor.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/thread_pool.h"

namespace {

using namespace kiln;

struct Row {
  std::string what;
  double ms = 0;
  int64_t bytes = 0;  // read + written
};

Row measure(const std::string& what, const Graph& g, int64_t bytes) {
  backend::CompiledGraph cg = backend::compile_cpu(g);
  std::vector<HostTensor> in;
  for (size_t i = 0; i < g.inputs().size(); ++i) in.push_back(random_tensor(g.inputs()[i]->meta(), i + 1));
  double best = 1e30;
  cg.run(in);
  for (int i = 0; i < 20; ++i) {
    auto t0 = bench::Clock::now();
    cg.run(in);
    best = std::min(best, bench::ms_since(t0));
  }
  fmt::print("{}: {:.3f} ms\n", what, best);
  std::fflush(stdout);
  return {what, best, bytes};
}

}  // namespace

int main() {
  if (!runtime::cpu::jit_available()) {
    fmt::print("kiln was built without the LLVM CPU path: nothing to benchmark\n");
    return 0;
  }
  const int64_t R = 1024, C = 4096, N = R * C * 4;
  const TensorMeta x32(DType::F32, {R, C}), x16(DType::F16, {R, C}), row(DType::F32, {C});
  const double copy = bench::host_copy_gbps(10, true);
  std::vector<Row> rows;
  {
    Graph g("add");
    Builder b(g);
    g.set_outputs({b.add(b.wrap(g.add_input("x", x32)), b.wrap(g.add_input("y", row)))});
    rows.push_back(measure("add f32[1024,4096] + [4096]", g, 2 * N));
  }
  {
    Graph g("softmax");
    Builder b(g);
    g.set_outputs({b.op(Op::Softmax, {b.wrap(g.add_input("x", x32))}, {{"dim", int64_t(-1)}})});
    rows.push_back(measure("softmax f32[1024,4096]", g, 2 * N));
  }
  {
    Graph g("layer_norm");
    Builder b(g);
    g.set_outputs({b.op(Op::LayerNorm, {b.wrap(g.add_input("x", x32)), b.wrap(g.add_input("w", row)), b.wrap(g.add_input("b", row))},
                        {{"normalized_shape", IntList{C}}})});
    rows.push_back(measure("layer_norm f32[1024,4096]", g, 2 * N));
  }
  {
    Graph g("sum");
    Builder b(g);
    g.set_outputs({b.sum(b.wrap(g.add_input("x", x32)), {1})});
    rows.push_back(measure("sum of rows f32[1024,4096]", g, N));
  }
  {
    Graph g("f16");
    Builder b(g);
    g.set_outputs({b.mul(b.wrap(g.add_input("x", x16)), b.wrap(g.add_input("y", x16)))});
    rows.push_back(measure("mul f16[1024,4096]", g, 3 * N / 2));
  }
  {
    Graph g("transpose");
    Builder b(g);
    g.set_outputs({b.contiguous(b.transpose(b.wrap(g.add_input("x", x32)), 0, 1))});
    rows.push_back(measure("transposing copy f32[1024,4096]", g, 2 * N));
  }
  fmt::print("\n{}; {} threads; copy {:.1f} GB/s (read + write, all threads); best of 20 runs\n\n", bench::cpu_model(),
             runtime::cpu::num_threads(), copy);
  fmt::print("| kernel | ms | GB/s | % of copy |\n| --- | --- | --- | --- |\n");
  for (const Row& r : rows) {
    const double gbps = static_cast<double>(r.bytes) / (r.ms * 1e6);
    fmt::print("| {} | {:.3f} | {:.1f} | {:.0f}% |\n", r.what, r.ms, gbps, 100 * gbps / copy);
  }
  return 0;
}
