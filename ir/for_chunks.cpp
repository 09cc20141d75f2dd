#include "ir/for_chunks.h"

#include <algorithm>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kiln {

void for_chunks(int64_t n, const std::function<void(int64_t begin, int64_t end)>& body) {
  constexpr int64_t kSerialBelow = int64_t{1} << 20;  // a thread costs ~20 us: not worth it below ~1M elements
  const int64_t threads = std::min<int64_t>(std::max(1u, std::thread::hardware_concurrency()), n / kSerialBelow + 1);
  if (threads <= 1) {
    if (n > 0) body(0, n);
    return;
  }
  std::vector<std::thread> pool;
  std::exception_ptr failed;
  std::mutex m;
  const int64_t step = (n + threads - 1) / threads;
  for (int64_t t = 0; t < threads; ++t) {
    const int64_t begin = t * step, end = std::min(n, begin + step);
    if (begin >= end) break;
    pool.emplace_back([&, begin, end] {
      try {
        body(begin, end);
      } catch (...) {
        std::lock_guard<std::mutex> lock(m);
        if (!failed) failed = std::current_exception();
      }
    });
  }
  for (std::thread& th : pool) th.join();
  if (failed) std::rethrow_exception(failed);
}

}  // namespace kiln
