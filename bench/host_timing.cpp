#include "bench/host_timing.h"

#include <cstring>
#include <fstream>
#include <memory>
#include <vector>

#include "bench/harness.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::bench {

double median_ms(const std::function<void()>& fn, int reps) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    auto t0 = Clock::now();
    fn();
    t.push_back(ms_since(t0));
  }
  return median(t);
}

double host_copy_gbps(int reps, bool all_threads) {
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

}  // namespace kiln::bench
