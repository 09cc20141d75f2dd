// kiln's CPU benchmark: the workloads of the side-by-side comparison with PyTorch
// (bench/harness.h: the GPU rows with their first dimension divided by 8), each compiled by the
// CPU backend (decompose -> fuse -> C++ -> clang+ORC, matmuls through OpenBLAS) and timed, with
//   - kernels and BLAS calls per workload (the fusion result),
//   - GB/s from the minimum memory traffic (every input read once, every output written once)
//     and that as a fraction of a copy measured in the same run with all of kiln's threads
//     (read + write; the one-thread memcpy is printed beside it, not used),
//   - cold compile time (an empty kernel cache: clang runs) and warm compile time (objects from
//     the disk cache; this process's in-memory cache cleared first),
//   - a check against the reference interpreter on a smaller shape of the same workload.
// Each timed call is Executable::run on host tensors (outputs allocated per call, the arena
// reused), median of the calls after one warm-up call. Prints a table last.
//
// Usage: kiln_bench_cpu [--quick] [--json FILE] [--npy DIR] [--only ID,ID] [--no-block] [--no-check]
//   --npy DIR  per workload, DIR/ID: its inputs and kiln's outputs as .npy with a manifest, for
//              bench/torch_bench.py --check-npy
// KILN_NUM_THREADS sets the threads (bench/compare_torch.py runs it at 1, 2, 4, 8 and 16).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "bench/harness.h"
#include "bench/host_timing.h"
#include "bench/workloads.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/thread_pool.h"

namespace {

using namespace kiln;
using bench::Clock;
using bench::ms_since;
using bench::Row;

using Options = bench::CommonOptions;

Row measure(const bench::Workload& w, const Options& opt, const std::string& cache, double copy, int reps) {
  return bench::measure_row(w, [&](Row& r, const bench::Case& full) {
    backend::CompiledGraph warm = bench::compile_cold_warm(r, full.graph, {}, cache);
    {
      std::vector<HostTensor> ins = full.inputs();
      bench::set_run_figures(r, bench::median_ms([&] { warm.run(ins); }, reps), copy);
    }
    if (opt.check) bench::check_row(r, w, "the CPU backend", bench::run_on_cpu_backend);
    if (!opt.npy.empty()) bench::write_exchange(opt.npy + "/" + w.id, full, bench::run_on_cpu_backend);
  });
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    if (bench::parse_common_option(opt, i, argc, argv)) continue;
    fmt::print(stderr, "usage: kiln_bench_cpu [--quick] [--json FILE] [--npy DIR] [--only ID,ID] [--no-block] [--no-check]\n");
    return 2;
  }
  if (!runtime::cpu::jit_available()) {
    fmt::print("kiln was built without the LLVM CPU path: nothing to benchmark\n");
    return 0;
  }
  const int reps = opt.quick ? 5 : 20;
  std::string cache = (std::filesystem::temp_directory_path() / fmt::format("kiln-cpu-bench-cache-{}", ::getpid())).string();
  setenv("KILN_CACHE_DIR", cache.c_str(), 1);
  std::vector<Row> rows;
  int status = 0;
  const int threads = runtime::cpu::num_threads();
  const std::string machine = bench::cpu_model();
  double copy = 0, copy1 = 0;
  try {
    copy = bench::host_copy_gbps(opt.quick ? 3 : 10, true);
    copy1 = bench::host_copy_gbps(opt.quick ? 3 : 10, false);
    fmt::print("machine: {}; {} threads; copy {:.1f} GB/s with {} threads, {:.1f} GB/s with one (read + write, 512 MiB)\n",
               machine, threads, copy, threads, copy1);
    // The first compile of the process (clang's start) is kept out of the rows.
    {
      auto t0 = Clock::now();
      backend::compile_cpu(bench::row_softmax(1, 8));
      fmt::print("first compile of the process (a tiny graph, clang start): {:.1f} ms\n", ms_since(t0));
    }
    for (const bench::Workload& w : bench::comparison_workloads(8)) {
      if (!bench::selected(opt, w)) continue;
      rows.push_back(measure(w, opt, cache, copy, reps));
      if (rows.back().check == "error" || rows.back().check == "FAIL") status = 1;
    }
    if (!opt.json.empty())
      bench::write_json(opt.json,
                        {{"tool", "kiln_bench_cpu"},
                         {"device", machine},
                         {"threads", threads},
                         {"copy_gbps", copy},
                         {"memcpy_one_thread_gbps", copy1},
                         {"quick", opt.quick}},
                        rows);
  } catch (const std::exception& e) {
    std::filesystem::remove_all(cache);
    fmt::print(stderr, "kiln_bench_cpu: {}\n", e.what());
    return 1;
  }
  std::filesystem::remove_all(cache);
  fmt::print("\nmachine: {}; {} threads; copy {:.1f} GB/s with all of them (one thread: {:.1f}); {} timed runs, median\n",
             machine, threads, copy, copy1, reps);
  bench::print_table(rows);
  return status;
}
