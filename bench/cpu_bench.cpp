// kiln's CPU benchmark: the workloads of the CPU backend issue, each compiled by the CPU
// backend (decompose -> fuse -> C++ -> clang+ORC) and timed, with
//   - kernels per workload (the fusion result),
//   - GB/s from the minimum memory traffic (every input read once, every output written
//     once) and that as a fraction of a memcpy measured on the same machine (read + write),
//   - cold compile time (empty kernel cache: clang runs) and warm compile time (the kernel
//     cache on disk holds the objects; this process's in-memory cache cleared first).
// Prints a table last. Usage: kiln_bench_cpu [--quick]  (KILN_NUM_THREADS sets the threads)
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "bench/workloads.h"
#include "runtime/cpu/jit.h"

namespace {

using namespace kiln;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// Median of `reps` timed calls after one warm-up call.
double median_ms(const std::function<void()>& fn, int reps) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(ms_since(t0));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// memcpy GB/s counting bytes read plus bytes written, on a buffer far larger than the caches.
double memcpy_gbps(int reps) {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double ms = median_ms([&] { std::memcpy(b.data(), a.data(), bytes); }, reps);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}

struct Workload {
  std::string name;
  Graph graph;
  bool bandwidth = true;  // false: report ms and GFLOP/s-free (matmul-bound training step)
};

struct Row {
  std::string name;
  int kernels = 0, blas = 0;
  double run_ms = 0, gbps = 0, frac = 0, cold_ms = 0, warm_ms = 0;
  bool bandwidth = true;
};

using bench::traffic_bytes;
using bench::inputs_for;

std::vector<Workload> workloads(bool quick) {
  const int64_t rows = quick ? 1024 : 8192, cols = 1024, n = quick ? (1 << 22) : (1 << 24);
  std::vector<Workload> w;
  w.push_back({"pointwise chain (8 ops)", bench::pointwise_chain(n)});
  w.push_back({"row softmax", bench::row_softmax(rows, cols)});
  Graph ln = bench::layer_norm_forward(rows, cols);
  w.push_back({"layer-norm backward", bench::backward_of(ln)});
  w.insert(w.end() - 1, Workload{"layer-norm forward", std::move(ln)});
  w.push_back({"cross-entropy fwd+bwd", bench::joint_of(bench::cross_entropy_loss(rows, cols), {"logits"})});

  // The MLP training step: forward, backward and an AdamW update in one graph.
  bench::TrainStepWorkload step = bench::gelu_mlp_train_step(256, 1024, quick ? 64 : 512);
  w.push_back({"MLP training step (AdamW)", std::move(step.step.graph), false});
  return w;
}

Row measure(Workload& w, const std::string& cache_dir, double memcpy, int reps) {
  Row r{w.name};
  r.bandwidth = w.bandwidth;
  backend::CpuCompileOptions opts;
  setenv("KILN_CACHE_DIR", cache_dir.c_str(), 1);
  runtime::cpu::clear_in_memory_cache();
  auto t0 = Clock::now();
  backend::CompiledGraph cold = backend::compile_cpu(w.graph, opts);
  r.cold_ms = ms_since(t0);
  runtime::cpu::clear_in_memory_cache();
  t0 = Clock::now();
  backend::CompiledGraph warm = backend::compile_cpu(w.graph, opts);
  r.warm_ms = ms_since(t0);
  r.kernels = warm.report.kernels;
  r.blas = warm.report.blas_calls;
  std::vector<HostTensor> ins = inputs_for(w.graph);
  r.run_ms = median_ms([&] { warm.run(ins); }, reps);
  r.gbps = static_cast<double>(traffic_bytes(w.graph)) / (r.run_ms * 1e6);
  r.frac = r.gbps / memcpy;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  if (!runtime::cpu::jit_available()) {
    fmt::print("kiln was built without the LLVM CPU path: nothing to benchmark\n");
    return 0;
  }
  int reps = quick ? 5 : 20;
  std::string cache = (std::filesystem::temp_directory_path() / fmt::format("kiln-bench-cache-{}", ::getpid())).string();
  std::filesystem::remove_all(cache);
  try {
    double memcpy = memcpy_gbps(reps);
    fmt::print("memcpy: {:.1f} GB/s (read + write, 256 MiB)\n", memcpy);
    std::vector<Row> rows;
    for (Workload& w : workloads(quick)) {
      rows.push_back(measure(w, cache, memcpy, reps));
      const Row& r = rows.back();
      fmt::print("{}: {:.3f} ms\n", r.name, r.run_ms);
    }
    std::filesystem::remove_all(cache);
    fmt::print("\n{:<28} {:>7} {:>4} {:>10} {:>8} {:>8} {:>10} {:>10}\n", "workload", "kernels", "blas", "run ms",
               "GB/s", "memcpy", "cold ms", "warm ms");
    for (const Row& r : rows) {
      std::string gb = r.bandwidth ? fmt::format("{:.1f}", r.gbps) : "-";
      std::string fr = r.bandwidth ? fmt::format("{:.0f}%", 100 * r.frac) : "-";
      fmt::print("{:<28} {:>7} {:>4} {:>10.3f} {:>8} {:>8} {:>10.1f} {:>10.1f}\n", r.name, r.kernels, r.blas, r.run_ms, gb,
                 fr, r.cold_ms, r.warm_ms);
    }
  } catch (const std::exception& e) {
    std::filesystem::remove_all(cache);
    fmt::print(stderr, "kiln_bench_cpu: {}\n", e.what());
    return 1;
  }
  return 0;
}
