// for_chunks: every element visited once whatever the split, errors rethrown; random_tensor,
// which fills large tensors through it, gives each element its counter-based value.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "ir/for_chunks.h"
#include "ir/host_tensor.h"
#include "ir/random.h"

namespace kiln {
namespace {

TEST(ForChunks, EveryElementOnceSmallAndLarge) {
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{1000}, (int64_t{1} << 22) + 7}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    std::atomic<int> calls{0};
    for_chunks(n, [&](int64_t begin, int64_t end) {
      ++calls;
      for (int64_t i = begin; i < end; ++i) ++seen[static_cast<size_t>(i)];
    });
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(seen[static_cast<size_t>(i)].load(), 1) << "n " << n << ", element " << i;
    if (n <= 1000) {
      EXPECT_EQ(calls.load(), n == 0 ? 0 : 1) << "small loops stay on this thread, in one call";
    }
  }
}

TEST(ForChunks, AnErrorOfAChunkIsRethrown) {
  EXPECT_THROW(for_chunks(int64_t{1} << 22,
                          [](int64_t begin, int64_t) {
                            if (begin == 0) throw std::runtime_error("chunk failed");
                          }),
               std::runtime_error);
}

TEST(ForChunks, RandomTensorIsTheSameOnAnyNumberOfCores) {
  HostTensor t = random_tensor(TensorMeta(DType::F32, {3, 1 << 20}), 42);
  for (int64_t i : {int64_t{0}, int64_t{12345}, (int64_t{3} << 20) - 1, int64_t{1} << 21})
    EXPECT_EQ(t.get(i), static_cast<double>(static_cast<float>(2.0 * random_uniform(42, static_cast<uint64_t>(i)) - 1.0))) << i;
  HostTensor ints = random_tensor(TensorMeta(DType::I64, {1 << 21}), 9, 5);
  EXPECT_EQ(ints.get_int((1 << 21) - 3), static_cast<int64_t>(random_bits(9, (1 << 21) - 3) % 5));
}

}  // namespace
}  // namespace kiln
