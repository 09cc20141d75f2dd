// The runtime's side of the kernel C ABI (runtime/cpu/kernel_abi.h).
#include "runtime/cpu/kernel_abi.h"

#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime::cpu {
namespace {

std::mutex error_mutex;
std::optional<std::string> first_error;
// Lets kernels that report in a loop skip the lock once an error is already recorded.
std::atomic<bool> has_error{false};

}  // namespace

std::optional<std::string> take_kernel_error() {
  std::lock_guard<std::mutex> lock(error_mutex);
  std::optional<std::string> error = std::move(first_error);
  first_error.reset();
  has_error.store(false);
  return error;
}

}  // namespace kiln::runtime::cpu

extern "C" {

void kiln_parallel_for(int64_t n, int64_t grain, kiln_loop_body body, void* ctx) {
  // Kernels do not throw, so no exception crosses this C boundary.
  kiln::runtime::cpu::parallel_for(n, grain, [body, ctx](int64_t begin, int64_t end) { body(ctx, begin, end); });
}

void kiln_report_index_error(int64_t index, int64_t size) {
  using namespace kiln::runtime::cpu;
  if (has_error.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(error_mutex);
  if (first_error) return;
  first_error = fmt::format("index {} is out of range for a dimension of size {}", index, size);
  has_error.store(true);
}

}  // extern "C"
