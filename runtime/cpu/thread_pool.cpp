#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace kiln::runtime::cpu {
namespace {

thread_local bool tls_in_region = false;

struct RegionGuard {
  bool previous = tls_in_region;
  RegionGuard() { tls_in_region = true; }
  ~RegionGuard() { tls_in_region = previous; }
};

int threads_from_environment() {
  if (const char* env = std::getenv("KILN_NUM_THREADS"); env && *env) {
    char* end = nullptr;
    long n = std::strtol(env, &end, 10);
    if (end && *end == '\0' && n >= 1) return static_cast<int>(std::min(n, 1024L));
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// One parallel loop: `chunks` chunks of `chunk` iterations, claimed one at a time from `next`.
// It is over when `finished` reaches `chunks`, whoever ran them: the caller never waits for a
// thread that claimed nothing. A worker that wakes after the loop is over finds no chunk to claim
// and leaves; it holds the loop through a shared_ptr, so a late wake-up never touches freed memory,
// and it never calls `fn` (only a claimed chunk does, and the caller waits for every claimed one).
struct Loop {
  const std::function<void(int64_t, int64_t)>* fn = nullptr;
  int64_t n = 0, chunk = 1, chunks = 0;
  std::atomic<int64_t> next{0};
  std::atomic<int32_t> finished{0};  // 32 bits: a futex word, for wait()
  std::mutex error_mutex;
  std::exception_ptr error;

  // Runs chunks until none is left to claim.
  void take_chunks() {
    RegionGuard region;
    for (;;) {
      const int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= chunks) return;
      const int64_t begin = c * chunk;
      try {
        (*fn)(begin, std::min(n, begin + chunk));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
      }
      // Release: the chunk's writes are visible to the caller that sees the count.
      if (finished.fetch_add(1, std::memory_order_acq_rel) + 1 == chunks) finished.notify_one();
    }
  }
};

// Workers sleep on a generation counter. A loop is published, as many workers are woken as it
// has chunks beyond the caller's first, and the caller takes chunks alongside them (claiming one
// at a time balances uneven chunks and a worker the scheduler runs late).
class Pool {
 public:
  explicit Pool(int threads) : threads_(threads) {
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
  }

  int threads() const { return threads_; }

  void run(int64_t n, int64_t chunk, const std::function<void(int64_t, int64_t)>& fn) {
    std::lock_guard<std::mutex> one_loop_at_a_time(run_mutex_);
    auto loop = std::make_shared<Loop>();
    loop->fn = &fn;
    loop->n = n;
    loop->chunk = chunk;
    loop->chunks = (n + chunk - 1) / chunk;
    const int64_t helpers = std::min<int64_t>(loop->chunks - 1, static_cast<int64_t>(workers_.size()));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      current_ = loop;
      ++generation_;
    }
    if (helpers >= static_cast<int64_t>(workers_.size())) {
      wake_.notify_all();
    } else {
      for (int64_t i = 0; i < helpers; ++i) wake_.notify_one();
    }
    loop->take_chunks();
    wait_until_finished(*loop);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (current_ == loop) current_.reset();
    }
    if (loop->error) std::rethrow_exception(loop->error);
  }

 private:
  // Every chunk is claimed by now; those still running belong to workers that are running them.
  // A short spin covers the usual case (a chunk finishing within microseconds); then sleep.
  static void wait_until_finished(Loop& loop) {
    for (int spin = 0; spin < 1000; ++spin) {
      if (loop.finished.load(std::memory_order_acquire) == loop.chunks) return;
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
    }
    for (;;) {
      const int32_t seen = loop.finished.load(std::memory_order_acquire);
      if (seen == loop.chunks) return;
      loop.finished.wait(seen, std::memory_order_acquire);
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      std::shared_ptr<Loop> loop;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
        loop = current_;
      }
      if (loop) loop->take_chunks();
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_;
  uint64_t generation_ = 0;
  std::shared_ptr<Loop> current_;
  bool stopping_ = false;
};

Pool& pool() {
  // Never destroyed: kernels may run from other static destructors' threads at exit.
  static Pool* instance = new Pool(threads_from_environment());
  return *instance;
}

}  // namespace

int num_threads() { return pool().threads(); }

bool in_parallel_region() { return tls_in_region; }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(grain, 1);
  Pool& p = pool();
  if (n <= grain || p.threads() == 1 || tls_in_region) {
    fn(0, n);
    return;
  }
  // A few chunks per thread, none under `grain` (n / chunks >= grain): balance without tiny chunks.
  int64_t chunks = std::min<int64_t>(n / grain, 4 * static_cast<int64_t>(p.threads()));
  p.run(n, (n + chunks - 1) / chunks, fn);
}

}  // namespace kiln::runtime::cpu
