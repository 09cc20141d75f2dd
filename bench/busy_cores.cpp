// kiln's CPU backend beside other work: each row is timed on a quiet machine and again with 1
// and 2 busy processes beside it (each a child process spinning on one core, as a build or a data
// loader would), so that the table shows what a user running kiln beside other work sees.
//
// Rows:
//   - the MiniGPT training step of `kiln demo` (32 sequences x 32 tokens, AdamW): about 130
//     parallel loops and 40 matmuls per step;
//   - 200 runs of a small compiled graph (a pointwise chain on 64K floats: one parallel loop each),
//     the cost of a parallel loop's start and end;
//   - one GEMM [512,768] x [768,3072] (OpenBLAS under kiln's pool).
// With a fair share of the cores, two busy processes on two cores cost about 2x; a pool that
// waits for descheduled workers costs a scheduler time slice per loop.
//
// Usage: kiln_bench_busy_cores [--quick] [--busy 0,1,2]
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "backend/compile.h"
#include "bench/busy_processes.h"
#include "bench/harness.h"
#include "bench/workloads.h"
#include "ir/error.h"
#include "ir/host_tensor.h"
#include "runtime/cpu/blas.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/thread_pool.h"

namespace {

using namespace kiln;
using bench::Clock;
using bench::ms_since;

// Median ms of calls of `fn` after one warm-up call: at least `min_reps` calls, then more while
// under `budget_ms` in all, at most `max_reps`.
double median_ms(const std::function<void()>& fn, int min_reps, int max_reps, double budget_ms) {
  fn();
  std::vector<double> t;
  auto start = Clock::now();
  while (static_cast<int>(t.size()) < min_reps || (static_cast<int>(t.size()) < max_reps && ms_since(start) < budget_ms)) {
    auto t0 = Clock::now();
    fn();
    t.push_back(ms_since(t0));
  }
  return bench::median(t);
}

struct Row {
  std::string name;
  std::vector<double> ms;  // per busy count
};

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::vector<int> busy_counts{0, 1, 2};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--quick") quick = true;
    else if (a == "--busy" && i + 1 < argc) {
      busy_counts.clear();
      for (const std::string& s : bench::split_commas(argv[++i])) busy_counts.push_back(std::stoi(s));
    } else {
      fmt::print(stderr, "usage: kiln_bench_busy_cores [--quick] [--busy 0,1,2]\n");
      return 2;
    }
  }
  if (!runtime::cpu::jit_available()) {
    fmt::print("kiln was built without the LLVM CPU path: nothing to benchmark\n");
    return 0;
  }
  const double budget = quick ? 1500 : 5000;
  const int min_reps = quick ? 5 : 15;

  // The programs, compiled once (the kernel cache makes later processes' compiles warm).
  bench::TrainStepWorkload minigpt = bench::minigpt_train_step(32);
  backend::CompiledGraph step = backend::compile_cpu(minigpt.step.graph);
  std::vector<HostTensor> step_inputs = bench::train_step_inputs(minigpt, 600);

  Graph small = bench::pointwise_chain(64 * 1024);
  backend::CompiledGraph small_exe = backend::compile_cpu(small);
  std::vector<HostTensor> small_inputs = bench::inputs_for(small);

  const int64_t m = 512, k = 768, n = 3072;
  HostTensor a = random_tensor(TensorMeta(DType::F32, {m, k}), 1), b = random_tensor(TensorMeta(DType::F32, {k, n}), 2);
  HostTensor c = HostTensor::empty(TensorMeta(DType::F32, {m, n}));

  std::vector<Row> rows{{"MiniGPT train step, batch 32 (demo)", {}},
                        {"200 small compiled graphs (pointwise, 64K floats)", {}},
                        {"GEMM [512,768] x [768,3072]", {}}};
  const int threads = runtime::cpu::num_threads();
  fmt::print("{} threads (KILN_NUM_THREADS), {} hardware threads\n", threads, std::thread::hardware_concurrency());
  std::fflush(stdout);
  for (int busy : busy_counts) {
    bench::BusyProcesses spinning(busy);
    if (static_cast<int>(spinning.size()) != busy) fail("fork failed: {} of {} busy processes", spinning.size(), busy);
    // Let the scheduler see them as long-running before the timing starts.
    std::this_thread::sleep_for(std::chrono::milliseconds(busy ? 200 : 0));
    rows[0].ms.push_back(median_ms([&] { step.run(step_inputs); }, min_reps, 400, budget));
    rows[1].ms.push_back(median_ms(
        [&] {
          for (int i = 0; i < 200; ++i) small_exe.run(small_inputs);
        },
        std::max(3, min_reps / 3), 100, budget));
    rows[2].ms.push_back(median_ms(
        [&] {
          runtime::cpu::gemm(DType::F32, false, false, m, n, k, 1.0, a.data(), k, b.data(), n, 0.0, c.data(), n);
        },
        min_reps, 400, budget));
    fmt::print("{} busy: {:.2f} ms, {:.2f} ms, {:.2f} ms\n", busy, rows[0].ms.back(), rows[1].ms.back(),
               rows[2].ms.back());
    std::fflush(stdout);
  }

  fmt::print("\n{} threads; median ms with N busy processes beside (each spinning on one core)\n\n", threads);
  std::string header = "| workload |";
  std::string rule = "| --- |";
  for (int busy : busy_counts) {
    header += fmt::format(" {} busy ms |", busy);
    rule += " --- |";
  }
  header += " worst / quiet |";
  rule += " --- |";
  fmt::print("{}\n{}\n", header, rule);
  for (const Row& r : rows) {
    std::string line = fmt::format("| {} |", r.name);
    double worst = 0;
    for (double ms : r.ms) {
      line += fmt::format(" {:.2f} |", ms);
      worst = std::max(worst, ms);
    }
    line += r.ms.empty() || r.ms[0] <= 0 ? " - |" : fmt::format(" {:.1f}x |", worst / r.ms[0]);
    fmt::print("{}\n", line);
  }
  return 0;
}
