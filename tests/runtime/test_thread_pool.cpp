#include <gtest/gtest.h>
#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <vector>

#include "runtime/cpu/kernel_abi.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime::cpu {
namespace {

TEST(ThreadPool, EveryIndexOnce) {
  EXPECT_GE(num_threads(), 1);
  for (int64_t n : {0, 1, 7, 1000, 10007}) {
    for (int64_t grain : {1, 7, 64, 100000}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int64_t> chunks{0};
      parallel_for(n, grain, [&](int64_t begin, int64_t end) {
        ASSERT_LT(begin, end);
        if (end - begin < grain) {
          EXPECT_EQ(end, n) << "only the last chunk may be short of the grain";
        }
        ++chunks;
        for (int64_t i = begin; i < end; ++i) ++hits[i];
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "n=" << n << " grain=" << grain << " i=" << i;
      if (n > 0 && n <= grain) {
        EXPECT_EQ(chunks.load(), 1);
      }
    }
  }
}

TEST(ThreadPool, NestedLoopsRunInline) {
  std::atomic<int64_t> sum{0};
  parallel_for(64, 1, [&](int64_t begin, int64_t end) {
    EXPECT_TRUE(in_parallel_region());
    for (int64_t i = begin; i < end; ++i) {
      std::thread::id outer = std::this_thread::get_id();
      parallel_for(100, 1, [&](int64_t b, int64_t e) {
        EXPECT_EQ(std::this_thread::get_id(), outer);
        for (int64_t j = b; j < e; ++j) sum += i * 100 + j;
      });
    }
  });
  EXPECT_FALSE(in_parallel_region());
  int64_t n = 64 * 100;
  EXPECT_EQ(sum.load(), n * (n - 1) / 2);
}

TEST(ThreadPool, ExceptionReachesTheCaller) {
  EXPECT_THROW(parallel_for(1000, 1,
                            [](int64_t begin, int64_t end) {
                              if (begin <= 500 && 500 < end) throw std::runtime_error("chunk failed");
                            }),
               std::runtime_error);
  // The pool still works afterwards.
  std::atomic<int64_t> count{0};
  parallel_for(1000, 1, [&](int64_t begin, int64_t end) { count += end - begin; });
  EXPECT_EQ(count.load(), 1000);
}

TEST(ThreadPool, LoopsFromSeveralThreads) {
  std::vector<std::thread> callers;
  std::atomic<int64_t> total{0};
  for (int t = 0; t < 3; ++t) {
    callers.emplace_back([&] {
      for (int rep = 0; rep < 20; ++rep)
        parallel_for(5000, 16, [&](int64_t begin, int64_t end) { total += end - begin; });
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 3 * 20 * 5000);
}

// A worker the scheduler does not run: held inside a signal handler until released.
std::atomic<bool> g_hold_workers{false};
std::atomic<int> g_held{0};
void hold_this_thread(int) {
  ++g_held;
  while (g_hold_workers.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  --g_held;
}

// The pool's workers (every thread but this one that runs a chunk), found by running slow chunks.
std::set<pthread_t> worker_threads() {
  std::set<pthread_t> workers;
  std::mutex mu;
  const pthread_t caller = pthread_self();
  for (int attempt = 0; attempt < 50 && static_cast<int>(workers.size()) < num_threads() - 1; ++attempt) {
    parallel_for(8 * num_threads(), 1, [&](int64_t, int64_t) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      std::lock_guard lock(mu);
      if (!pthread_equal(pthread_self(), caller)) workers.insert(pthread_self());
    });
  }
  return workers;
}

// A parallel loop is over when its chunks are: the caller does not wait for a worker that claimed
// none. Every worker is held (as the scheduler holds one when other processes have the cores), and
// 200 loops still finish on the calling thread. A pool that waits for every worker to check out of
// a loop never finishes the first one; the test then releases the workers and fails.
TEST(ThreadPool, ALoopDoesNotWaitForAWorkerThatIsNotRunning) {
  if (num_threads() < 2) GTEST_SKIP() << "one thread: no workers to hold";
  std::set<pthread_t> workers = worker_threads();
  ASSERT_EQ(static_cast<int>(workers.size()), num_threads() - 1) << "could not see every worker run a chunk";
  struct sigaction action {}, previous{};
  action.sa_handler = hold_this_thread;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGUSR2, &action, &previous), 0);
  g_hold_workers = true;
  for (pthread_t t : workers) ASSERT_EQ(pthread_kill(t, SIGUSR2), 0);
  while (g_held.load() < static_cast<int>(workers.size())) std::this_thread::sleep_for(std::chrono::milliseconds(1));

  std::atomic<int64_t> total{0};
  auto loops = std::async(std::launch::async, [&] {
    for (int rep = 0; rep < 200; ++rep)
      parallel_for(64, 1, [&](int64_t begin, int64_t end) { total += end - begin; });
  });
  const bool finished = loops.wait_for(std::chrono::seconds(5)) == std::future_status::ready;
  g_hold_workers = false;
  loops.wait();
  while (g_held.load() > 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  sigaction(SIGUSR2, &previous, nullptr);
  EXPECT_TRUE(finished) << "200 loops did not finish in 5 s while the workers were held";
  EXPECT_EQ(total.load(), 200 * 64);
  // The workers, released, wake late for loops that are over and do nothing; the pool still works.
  std::atomic<int64_t> after{0};
  parallel_for(10000, 16, [&](int64_t begin, int64_t end) { after += end - begin; });
  EXPECT_EQ(after.load(), 10000);
}

void add_squares(void* ctx, int64_t begin, int64_t end) {
  auto* out = static_cast<std::atomic<int64_t>*>(ctx);
  int64_t local = 0;
  for (int64_t i = begin; i < end; ++i) local += i * i;
  *out += local;
}

TEST(KernelAbi, ParallelForThroughTheCAbi) {
  std::atomic<int64_t> sum{0};
  kiln_parallel_for(3001, 10, add_squares, &sum);
  int64_t n = 3000;
  EXPECT_EQ(sum.load(), n * (n + 1) * (2 * n + 1) / 6);
}

TEST(KernelAbi, FirstIndexErrorWins) {
  ASSERT_FALSE(take_kernel_error().has_value());
  kiln_parallel_for(1000, 1, [](void*, int64_t begin, int64_t) { kiln_report_index_error(-1 - begin, 10); }, nullptr);
  std::optional<std::string> error = take_kernel_error();
  ASSERT_TRUE(error.has_value());
  EXPECT_NE(error->find("out of range for a dimension of size 10"), std::string::npos) << *error;
  EXPECT_FALSE(take_kernel_error().has_value());
  kiln_report_index_error(12, 3);
  kiln_report_index_error(13, 3);
  EXPECT_EQ(take_kernel_error(), "index 12 is out of range for a dimension of size 3");
}

}  // namespace
}  // namespace kiln::runtime::cpu
