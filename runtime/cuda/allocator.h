#pragma once
// The caching device allocator (PyTorch's CUDACachingAllocator, simplified). cuMemAlloc and
// cuMemFree are slow and synchronize the device, so freed memory is kept and handed out again.
//
// Sizes are rounded up to 512 bytes. Requests up to 1 MB ("small") are carved out of 2 MB
// segments; larger ones get a segment of their own, rounded up to 2 MB. Free blocks sit in two
// pools (small, large) ordered by size: an allocation takes the smallest free block that fits
// (best fit) and splits off the rest (any rest of a small block; over 1 MB of a large one, else
// the whole block is handed out and counted as allocated); a free merges the block with the free
// neighbours of its segment. After a warm-up, a training or inference loop that allocates the
// same sizes again makes no cuMemAlloc call.
// When cuMemAlloc runs out of memory, the cached free segments are released (empty_cache) and
// the allocation is tried once more before a kiln::Error that gives the numbers.
//
// Stream order: kiln runs all work of a device on one stream. A freed block is returned to the
// cache at once and its next user queues work on the same stream, after the work of the previous
// user: no event is needed. Code that uses a buffer on another stream must synchronize that
// stream before the buffer is freed.
//
// KILN_LOGS=memory logs each cuMemAlloc / cuMemFree and, at exit, a summary per device.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace kiln::runtime::cuda {

// Memory of one allocation, returned to the cache when the last owner lets go; not copyable or
// movable: it is held through DeviceBuffer (shared ownership, as views share storage).
class DeviceAllocation {
 public:
  DeviceAllocation(void* ptr, size_t size, int device) : ptr_(ptr), size_(size), device_(device) {}
  ~DeviceAllocation();
  DeviceAllocation(const DeviceAllocation&) = delete;
  DeviceAllocation& operator=(const DeviceAllocation&) = delete;

  void* data() const { return ptr_; }
  size_t size() const { return size_; }  // as requested (the block may be larger)
  int device() const { return device_; }

 private:
  void* ptr_;
  size_t size_;
  int device_;
};

using DeviceBuffer = std::shared_ptr<DeviceAllocation>;

// `bytes` of device memory on `device` (uninitialized; at least 512-byte aligned). Zero bytes
// give a buffer with a null pointer.
DeviceBuffer device_alloc(size_t bytes, int device = 0);

struct MemoryStats {
  int64_t allocated_bytes = 0;  // in blocks handed out (rounded sizes)
  int64_t reserved_bytes = 0;   // in segments obtained with cuMemAlloc
  int64_t peak_allocated_bytes = 0;
  int64_t peak_reserved_bytes = 0;
  int64_t num_allocs = 0;
  int64_t num_frees = 0;
  int64_t num_device_mallocs = 0;  // cuMemAlloc calls
  int64_t num_cache_hits = 0;      // allocations served without cuMemAlloc
};

MemoryStats memory_stats(int device = 0);
// Sets the peaks of every device to the current values.
void reset_peak_stats();
// Returns the free whole segments of every device to the driver (cuMemFree).
void empty_cache();
// The memory kiln may still obtain on `device`: what the driver reports free (cuMemGetInfo)
// plus what this cache reserved and holds free (empty_cache would return it); and the device's
// total. For refusing work that cannot fit before allocating any of it.
struct DeviceMemory {
  int64_t available_bytes = 0;
  int64_t total_bytes = 0;
};
DeviceMemory device_memory(int device = 0);
// One line: "cuda:0: allocated 1.5 MiB (peak 4.0 MiB), reserved 6.0 MiB (peak 6.0 MiB), ...".
std::string memory_summary(int device = 0);

}  // namespace kiln::runtime::cuda
