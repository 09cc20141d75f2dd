// Streams, events, copies, memset.
#include "runtime/cuda/stream.h"

#include <atomic>
#include <utility>

#include "ir/error.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::runtime::cuda {

using detail::api;

Stream::Stream(int device) : device_(device) {
  ScopedContext ctx(device);
  check(api().cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), fmt::format("cuStreamCreate(cuda:{})", device));
}

Stream::~Stream() {
  // Destroying a stream with queued work is allowed: the driver releases it when done.
  if (stream_) api().cuStreamDestroy(stream_);
}

Stream::Stream(Stream&& other) noexcept
    : stream_(std::exchange(other.stream_, nullptr)), device_(other.device_) {}

Stream& Stream::operator=(Stream&& other) noexcept {
  if (this != &other) {
    if (stream_) api().cuStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void Stream::synchronize() { synchronize_and_check(*this, "work on the stream"); }

bool Stream::query() {
  CUresult r = api().cuStreamQuery(stream_);
  if (r == CUDA_ERROR_NOT_READY) return false;
  if (r != CUDA_SUCCESS) synchronize();  // raises the error, named as synchronize names it
  return true;
}

void synchronize_and_check(Stream& stream, const std::string& what) {
  CUresult r = api().cuStreamSynchronize(stream.raw());
  if (r == CUDA_SUCCESS) return;
  bool sticky = r == CUDA_ERROR_ILLEGAL_ADDRESS || r == CUDA_ERROR_LAUNCH_FAILED ||
                r == CUDA_ERROR_MISALIGNED_ADDRESS || r == CUDA_ERROR_ILLEGAL_INSTRUCTION ||
                r == CUDA_ERROR_HARDWARE_STACK_ERROR || r == CUDA_ERROR_INVALID_PC ||
                r == CUDA_ERROR_ASSERT || r == CUDA_ERROR_INVALID_ADDRESS_SPACE;
  kiln::fail("{} failed on cuda:{}: {}{}", what, stream.device(), error_string(r),
             sticky ? "; the CUDA context of this device is now unusable: restart the process" : "");
}

Event::Event(int device) : device_(device) {
  ScopedContext ctx(device);
  check(api().cuEventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate");
}

Event::~Event() {
  if (event_) api().cuEventDestroy(event_);
}

Event::Event(Event&& other) noexcept : event_(std::exchange(other.event_, nullptr)), device_(other.device_) {}

Event& Event::operator=(Event&& other) noexcept {
  if (this != &other) {
    if (event_) api().cuEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
    device_ = other.device_;
  }
  return *this;
}

void Event::record(Stream& stream) { check(api().cuEventRecord(event_, stream.raw()), "cuEventRecord"); }

void Event::synchronize() { check(api().cuEventSynchronize(event_), "cuEventSynchronize"); }

void Event::make_wait(Stream& stream) { check(api().cuStreamWaitEvent(stream.raw(), event_, 0), "cuStreamWaitEvent"); }

float elapsed_ms(Event& start, Event& end) {
  end.synchronize();
  float ms = 0;
  check(api().cuEventElapsedTime(&ms, start.raw(), end.raw()), "cuEventElapsedTime");
  return ms;
}

namespace {
struct TransferCounters {
  std::atomic<int64_t> h2d_bytes{0}, h2d_copies{0}, d2h_bytes{0}, d2h_copies{0};
};
TransferCounters& counters() {
  static TransferCounters c;
  return c;
}
void count_h2d(size_t bytes) {
  counters().h2d_bytes += static_cast<int64_t>(bytes);
  ++counters().h2d_copies;
}
void count_d2h(size_t bytes) {
  counters().d2h_bytes += static_cast<int64_t>(bytes);
  ++counters().d2h_copies;
}
}  // namespace

TransferStats transfer_stats() {
  auto& c = counters();
  return {c.h2d_bytes.load(), c.h2d_copies.load(), c.d2h_bytes.load(), c.d2h_copies.load()};
}

void copy_host_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  count_h2d(bytes);
  ScopedContext ctx(device);
  check(api().cuMemcpyHtoD(device_ptr(dst), src, bytes), fmt::format("cuMemcpyHtoD ({} bytes)", bytes));
  // From pageable memory the call returns when the bytes are staged, not when they have landed;
  // a kernel on one of kiln's streams (CU_STREAM_NON_BLOCKING) could read them before (CUDA's
  // "API synchronization behavior"; not seen to fail, and not the cause of the fuzz finding it
  // was first suspected for, which was NVVM's read-only loads: codegen/cuda_emitter.h).
  check(api().cuStreamSynchronize(CU_STREAM_LEGACY), "cuStreamSynchronize(legacy stream) after cuMemcpyHtoD");
}

void copy_device_to_host(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  count_d2h(bytes);
  ScopedContext ctx(device);
  check(api().cuMemcpyDtoH(dst, device_ptr(src), bytes), fmt::format("cuMemcpyDtoH ({} bytes)", bytes));
}

void copy_device_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  ScopedContext ctx(device);
  check(api().cuMemcpyDtoD(device_ptr(dst), device_ptr(src), bytes), fmt::format("cuMemcpyDtoD ({} bytes)", bytes));
  // A device-to-device copy returns at once (no host-side synchronization at all).
  check(api().cuStreamSynchronize(CU_STREAM_LEGACY), "cuStreamSynchronize(legacy stream) after cuMemcpyDtoD");
}

void copy_host_to_device_async(void* dst, const void* src, size_t bytes, Stream& stream) {
  if (bytes == 0) return;
  count_h2d(bytes);
  ScopedContext ctx(stream.device());
  check(api().cuMemcpyHtoDAsync(device_ptr(dst), src, bytes, stream.raw()),
        fmt::format("cuMemcpyHtoDAsync ({} bytes)", bytes));
}

void copy_device_to_host_async(void* dst, const void* src, size_t bytes, Stream& stream) {
  if (bytes == 0) return;
  count_d2h(bytes);
  ScopedContext ctx(stream.device());
  check(api().cuMemcpyDtoHAsync(dst, device_ptr(src), bytes, stream.raw()),
        fmt::format("cuMemcpyDtoHAsync ({} bytes)", bytes));
}

void copy_device_to_device_async(void* dst, const void* src, size_t bytes, Stream& stream) {
  if (bytes == 0) return;
  ScopedContext ctx(stream.device());
  check(api().cuMemcpyDtoDAsync(device_ptr(dst), device_ptr(src), bytes, stream.raw()),
        fmt::format("cuMemcpyDtoDAsync ({} bytes)", bytes));
}

void memset_async(void* dst, unsigned char value, size_t bytes, Stream& stream) {
  if (bytes == 0) return;
  ScopedContext ctx(stream.device());
  check(api().cuMemsetD8Async(device_ptr(dst), value, bytes, stream.raw()), fmt::format("cuMemsetD8Async ({} bytes)", bytes));
}

}  // namespace kiln::runtime::cuda
