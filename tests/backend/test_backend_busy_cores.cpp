// The CPU backend beside other work: busy processes hold every core, and a small compiled graph's
// parallel loop still finishes in far less than a scheduler time slice per loop (a pool that
// waits for a descheduled worker pays one per loop: 200 loops, about a second).
#include <gtest/gtest.h>

#include <chrono>
#include <thread>
#include <vector>

#include "backend/compile.h"
#include "bench/busy_processes.h"
#include "ir/parser.h"
#include "runtime/cpu/jit.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln {
namespace {

TEST(BackendBusyCores, SmallParallelLoopsFinishWhileOtherProcessesHoldTheCores) {
  if (!runtime::cpu::jit_available()) GTEST_SKIP() << "kiln was built without the LLVM CPU path";
  if (runtime::cpu::num_threads() < 2) GTEST_SKIP() << "one thread: no parallel loops";
  // 256K floats: the CPU schedule's grain (32K element-iterations) gives 8 chunks, one parallel loop.
  Graph g = parse_graph(R"(
graph small(%x: f32[262144], %y: f32[262144]) {
  %a = mul(%x, %y) : f32[262144]
  %t = tanh(%a) : f32[262144]
  %o = add(%t, %x) : f32[262144]
  return (%o)
})");
  backend::CompiledGraph c = backend::compile_cpu(g);
  ASSERT_EQ(c.report.kernels, 1);
  ASSERT_NE(c.executable.source().find("kiln_parallel_for"), std::string::npos) << "the loop should be parallel";
  std::vector<HostTensor> inputs{random_tensor(g.inputs()[0]->meta(), 1), random_tensor(g.inputs()[1]->meta(), 2)};
  c.run(inputs);

  bench::BusyProcesses busy(runtime::cpu::num_threads());
  ASSERT_EQ(static_cast<int>(busy.size()), runtime::cpu::num_threads()) << "fork failed";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 200; ++i) c.run(inputs);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  // Quiet, 200 runs take about 40 ms on 2 cores; with a fair share of the cores, a few times that.
  EXPECT_LT(ms, 1000) << "200 runs of a one-loop graph took " << ms << " ms beside " << busy.size()
                      << " busy processes";
}

}  // namespace
}  // namespace kiln
