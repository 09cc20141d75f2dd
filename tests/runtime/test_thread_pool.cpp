#include <gtest/gtest.h>

#include <atomic>
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
