#pragma once
// Streams, events, copies and memset: the ordering primitives of the CUDA runtime. Device
// memory is passed as void* (a CUdeviceptr's value); sizes in bytes.
#include <cuda.h>

#include <cstddef>
#include <string>

namespace kiln::runtime::cuda {

// An owned, non-blocking stream (CU_STREAM_NON_BLOCKING: no implicit ordering with the legacy
// default stream, which kiln never uses) on `device`. Move-only.
class Stream {
 public:
  explicit Stream(int device = 0);
  ~Stream();
  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream raw() const { return stream_; }
  int device() const { return device_; }
  // Waits for all work queued so far; kiln::Error naming the first failure (see
  // synchronize_and_check for naming the work that failed).
  void synchronize();
  // Whether all work queued so far is done, without waiting; kiln::Error as synchronize's.
  bool query();

 private:
  CUstream stream_ = nullptr;
  int device_ = 0;
};

// Waits for `stream` and raises kiln::Error "<what> failed on cuda:N: CUDA_ERROR_... (...)"
// when the stream reports an error (an illegal address in a kernel, a failed launch). Errors
// of a kernel are sticky: after one, the context of the device is unusable until the process
// ends, and the message says so.
void synchronize_and_check(Stream& stream, const std::string& what);

// An owned event for timing (CU_EVENT_DEFAULT records timestamps). Move-only.
class Event {
 public:
  explicit Event(int device = 0);
  ~Event();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(Stream& stream);
  void synchronize();
  // Work queued on `stream` from now on waits until this event's recorded work is done (another
  // stream's, for one to wait for the other without the host).
  void make_wait(Stream& stream);
  CUevent raw() const { return event_; }

 private:
  CUevent event_ = nullptr;
  int device_ = 0;
};

// Milliseconds between two recorded events; waits for `end` first.
float elapsed_ms(Event& start, Event& end);

// Copies. The synchronous ones return when the copy is done: the bytes are in place for work on
// any stream (the driver's own cuMemcpyHtoD from pageable memory returns once the bytes are
// staged, before the DMA lands, and a DtoD copy returns at once; kiln's streams do not wait for
// the legacy stream those run on, so each is followed by a sync of it). The async ones are queued on the
// stream (from pageable host memory the driver stages the copy, and the host buffer may be
// reused when the call returns; for device-to-host, the host buffer is written only when the
// stream reaches the copy: synchronize before reading it).
void copy_host_to_device(void* dst, const void* src, size_t bytes, int device = 0);
void copy_device_to_host(void* dst, const void* src, size_t bytes, int device = 0);
void copy_device_to_device(void* dst, const void* src, size_t bytes, int device = 0);
void copy_host_to_device_async(void* dst, const void* src, size_t bytes, Stream& stream);
void copy_device_to_host_async(void* dst, const void* src, size_t bytes, Stream& stream);
void copy_device_to_device_async(void* dst, const void* src, size_t bytes, Stream& stream);

// Bytes and copies between host and device since the process started (every device, sync and
// async): how a test or a user sees that a loop keeps its tensors on the device.
struct TransferStats {
  int64_t host_to_device_bytes = 0;
  int64_t host_to_device_copies = 0;
  int64_t device_to_host_bytes = 0;
  int64_t device_to_host_copies = 0;
};
TransferStats transfer_stats();

// Sets `bytes` bytes at `dst` to `value`, queued on the stream.
void memset_async(void* dst, unsigned char value, size_t bytes, Stream& stream);

inline CUdeviceptr device_ptr(const void* p) { return reinterpret_cast<CUdeviceptr>(p); }

}  // namespace kiln::runtime::cuda
