#include "runtime/cpu/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <exception>
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

// Workers sleep on a generation counter; a loop publishes a job, bumps the generation, takes
// chunks itself alongside the workers (an atomic next-chunk counter balances uneven chunks)
// and waits until every worker has checked out of this generation.
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
    job_fn_ = &fn;
    job_n_ = n;
    job_chunk_ = chunk;
    next_.store(0);
    error_ = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      checked_out_ = 0;
      ++generation_;
    }
    wake_.notify_all();
    take_chunks();
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return checked_out_ == static_cast<int>(workers_.size()); });
    job_fn_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void take_chunks() {
    RegionGuard region;
    for (;;) {
      int64_t begin = next_.fetch_add(job_chunk_);
      if (begin >= job_n_) return;
      try {
        (*job_fn_)(begin, std::min(job_n_, begin + job_chunk_));
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex_);
        if (!error_) error_ = std::current_exception();
      }
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
        if (stopping_) return;
        seen = generation_;
      }
      take_chunks();
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++checked_out_;
      }
      done_.notify_one();
    }
  }

  const int threads_;
  std::vector<std::thread> workers_;
  std::mutex run_mutex_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;
  int checked_out_ = 0;
  bool stopping_ = false;

  const std::function<void(int64_t, int64_t)>* job_fn_ = nullptr;
  int64_t job_n_ = 0, job_chunk_ = 1;
  std::atomic<int64_t> next_{0};
  std::mutex error_mutex_;
  std::exception_ptr error_;
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
