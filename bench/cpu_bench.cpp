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
#include "bench/workloads.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/thread_pool.h"

namespace {

using namespace kiln;
using bench::Clock;
using bench::ms_since;
using bench::Row;

struct Options : bench::CommonOptions {
  bool check = true;
};

// Median of `reps` timed calls after one warm-up call.
double median_ms(const std::function<void()>& fn, int reps) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(ms_since(t0));
  }
  return bench::median(t);
}

// Copy GB/s counting bytes read plus bytes written, 512 MiB each way (far larger than the
// caches), split over `threads` threads of kiln's pool in 1 MiB chunks (1: one memcpy).
double copy_gbps(int reps, bool all_threads) {
  const size_t bytes = size_t{512} << 20, chunk = size_t{1} << 20;
  std::unique_ptr<char[]> a(new char[bytes]), b(new char[bytes]);
  // Touch both with the pool (first touch decides where pages live).
  runtime::cpu::parallel_for(static_cast<int64_t>(bytes / chunk), 1, [&](int64_t lo, int64_t hi) {
    std::memset(a.get() + lo * chunk, 1, static_cast<size_t>(hi - lo) * chunk);
    std::memset(b.get() + lo * chunk, 2, static_cast<size_t>(hi - lo) * chunk);
  });
  double ms = median_ms(
      [&] {
        if (!all_threads) {
          std::memcpy(b.get(), a.get(), bytes);
          return;
        }
        runtime::cpu::parallel_for(static_cast<int64_t>(bytes / chunk), 1, [&](int64_t lo, int64_t hi) {
          std::memcpy(b.get() + lo * chunk, a.get() + lo * chunk, static_cast<size_t>(hi - lo) * chunk);
        });
      },
      reps);
  return 2.0 * static_cast<double>(bytes) / (ms * 1e6);
}

std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  for (std::string line; std::getline(f, line);)
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

Row measure(const bench::Workload& w, const Options& opt, const std::string& cache, double copy, int reps) {
  return bench::measure_row(w, [&](Row& r, const bench::Case& full) {
    backend::CompiledGraph warm = bench::compile_cold_warm(r, full.graph, {}, cache);
    {
      std::vector<HostTensor> ins = full.inputs();
      bench::set_run_figures(r, median_ms([&] { warm.run(ins); }, reps), copy);
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
    if (std::string(argv[i]) == "--no-check") opt.check = false;
    else {
      fmt::print(stderr, "usage: kiln_bench_cpu [--quick] [--json FILE] [--npy DIR] [--only ID,ID] [--no-block] [--no-check]\n");
      return 2;
    }
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
  const std::string machine = cpu_model();
  double copy = 0, copy1 = 0;
  try {
    copy = copy_gbps(opt.quick ? 3 : 10, true);
    copy1 = copy_gbps(opt.quick ? 3 : 10, false);
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
