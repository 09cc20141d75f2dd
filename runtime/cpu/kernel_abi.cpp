// The runtime's side of the kernel C ABI (runtime/cpu/kernel_abi.h).
#include "runtime/cpu/kernel_abi.h"

#include <fmt/format.h>

#include <atomic>
#include <mutex>

#include "runtime/cpu/thread_pool.h"

namespace kiln::runtime::cpu {
namespace {

std::mutex error_mutex;
std::optional<KernelIndexError> first_error;
// Lets kernels that report in a loop skip the lock once an error is already recorded.
std::atomic<bool> has_error{false};

}  // namespace

std::string KernelIndexError::str() const { return fmt::format("index {} is out of range for a dimension of size {}", index, size); }

std::optional<KernelIndexError> take_kernel_index_error() {
  std::lock_guard<std::mutex> lock(error_mutex);
  std::optional<KernelIndexError> error = first_error;
  first_error.reset();
  has_error.store(false);
  return error;
}

std::optional<std::string> take_kernel_error() {
  std::optional<KernelIndexError> e = take_kernel_index_error();
  return e ? std::optional<std::string>(e->str()) : std::nullopt;
}

}  // namespace kiln::runtime::cpu

extern "C" {

void kiln_parallel_for(int64_t n, int64_t grain, kiln_loop_body body, void* ctx) {
  // Kernels do not throw, so no exception crosses this C boundary.
  kiln::runtime::cpu::parallel_for(n, grain, [body, ctx](int64_t begin, int64_t end) { body(ctx, begin, end); });
}

void kiln_report_index_error_at(int64_t index, int64_t size, int64_t site) {
  using namespace kiln::runtime::cpu;
  if (has_error.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(error_mutex);
  if (first_error) return;
  first_error = KernelIndexError{index, size, site};
  has_error.store(true);
}

void kiln_report_index_error(int64_t index, int64_t size) { kiln_report_index_error_at(index, size, -1); }

}  // extern "C"
