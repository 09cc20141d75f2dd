// The caching device allocator: segments from cuMemAlloc, split into blocks, best fit from two
// size-ordered free pools, merge on free. See allocator.h for the policy.
#include "runtime/cuda/allocator.h"

#include <map>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "ir/error.h"
#include "ir/log.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/driver_api.h"

namespace kiln::runtime::cuda {
namespace {

using detail::api;

constexpr size_t kRound = 512;
constexpr size_t kSmallMax = size_t{1} << 20;      // requests up to this are small
constexpr size_t kSmallSegment = size_t{2} << 20;  // small blocks are carved out of these
constexpr size_t kLargeRound = size_t{2} << 20;    // large segments are a multiple of this

size_t round_up(size_t n, size_t m) { return (n + m - 1) / m * m; }

std::string mib(int64_t bytes) {
  if (bytes < (1 << 20)) return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
  return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1 << 20));
}

// A piece of a segment; the blocks of a segment are a doubly linked list in address order.
struct Block {
  CUdeviceptr ptr = 0;
  size_t size = 0;
  bool free = true;
  bool small = false;  // from the small pool's segments
  Block* prev = nullptr;
  Block* next = nullptr;
};

struct BySize {
  bool operator()(const Block* a, const Block* b) const {
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};

struct DeviceCache {
  std::set<Block*, BySize> small_free, large_free;
  std::unordered_map<CUdeviceptr, Block*> in_use;
  MemoryStats stats;

  std::set<Block*, BySize>& pool(const Block* b) { return b->small ? small_free : large_free; }
};

std::mutex mutex;
std::vector<DeviceCache>* caches = new std::vector<DeviceCache>;  // leaked: used by static destructors

DeviceCache& cache(int device) {
  if (device < 0) kiln::fail("cuda:{}: no such device", device);
  if (static_cast<size_t>(device) >= caches->size()) caches->resize(device + 1);
  return (*caches)[device];
}

void bump_peaks(MemoryStats& s) {
  s.peak_allocated_bytes = std::max(s.peak_allocated_bytes, s.allocated_bytes);
  s.peak_reserved_bytes = std::max(s.peak_reserved_bytes, s.reserved_bytes);
}

// Frees the whole free segments of one device (caller holds the mutex and the context).
void release_free_segments(DeviceCache& c, int device) {
  for (auto* pool : {&c.small_free, &c.large_free}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev || b->next) {
        ++it;
        continue;
      }
      api().cuMemFree(b->ptr);
      c.stats.reserved_bytes -= static_cast<int64_t>(b->size);
      if (log_enabled("memory")) log_line("memory", fmt::format("cuMemFree {} on cuda:{}", mib(b->size), device));
      it = pool->erase(it);
      delete b;
    }
  }
}

// A new segment holding one free block; nullptr when the device is out of memory.
Block* new_segment(DeviceCache& c, size_t size, bool small, int device, size_t request) {
  CUdeviceptr ptr = 0;
  CUresult r = api().cuMemAlloc(&ptr, size);
  if (r == CUDA_ERROR_OUT_OF_MEMORY) {
    release_free_segments(c, device);
    r = api().cuMemAlloc(&ptr, size);
  }
  if (r == CUDA_ERROR_OUT_OF_MEMORY) return nullptr;
  check(r, fmt::format("cuMemAlloc({} bytes) on cuda:{}", size, device));
  c.stats.reserved_bytes += static_cast<int64_t>(size);
  c.stats.num_device_mallocs += 1;
  bump_peaks(c.stats);
  if (log_enabled("memory"))
    log_line("memory", fmt::format("cuMemAlloc {} on cuda:{} for a {}-byte request (reserved now {})", mib(size),
                                   device, request, mib(c.stats.reserved_bytes)));
  auto* b = new Block;
  b->ptr = ptr;
  b->size = size;
  b->small = small;
  return b;
}

void* allocate(size_t bytes, int device) {
  size_t size = round_up(bytes, kRound);
  bool small = size <= kSmallMax;
  ScopedContext ctx(device);
  std::lock_guard<std::mutex> lock(mutex);
  DeviceCache& c = cache(device);
  auto& pool = small ? c.small_free : c.large_free;
  Block key;
  key.size = size;
  Block* b = nullptr;
  if (auto it = pool.lower_bound(&key); it != pool.end()) {
    b = *it;
    pool.erase(it);
    c.stats.num_cache_hits += 1;
  } else {
    size_t segment = small ? kSmallSegment : round_up(size, kLargeRound);
    b = new_segment(c, segment, small, device, bytes);
    if (!b) {
      size_t free_bytes = 0, total = 0;
      api().cuMemGetInfo(&free_bytes, &total);
      kiln::fail("cuda:{} is out of memory allocating {} ({} bytes): {} in use by kiln, {} reserved; the device has {} "
                 "free of {}",
                 device, mib(bytes), bytes, mib(c.stats.allocated_bytes), mib(c.stats.reserved_bytes),
                 mib(free_bytes), mib(total));
    }
  }
  // Split off the tail when it is worth keeping: any 512-byte rest of a small block, over 1 MB of
  // a large one (a smaller rest would only ever serve small requests, which have their own pool).
  size_t rest = b->size - size;
  if ((small && rest >= kRound) || (!small && rest > kSmallMax)) {
    auto* tail = new Block;
    tail->ptr = b->ptr + size;
    tail->size = rest;
    tail->small = small;
    tail->prev = b;
    tail->next = b->next;
    if (b->next) b->next->prev = tail;
    b->next = tail;
    b->size = size;
    pool.insert(tail);
  }
  b->free = false;
  c.in_use.emplace(b->ptr, b);
  c.stats.allocated_bytes += static_cast<int64_t>(b->size);
  c.stats.num_allocs += 1;
  bump_peaks(c.stats);
  return reinterpret_cast<void*>(b->ptr);
}

void release(void* ptr, int device) {
  std::lock_guard<std::mutex> lock(mutex);
  DeviceCache& c = cache(device);
  auto it = c.in_use.find(reinterpret_cast<CUdeviceptr>(ptr));
  KILN_INTERNAL_ASSERT(it != c.in_use.end(), "a freed device pointer was allocated by the caching allocator");
  Block* b = it->second;
  c.in_use.erase(it);
  c.stats.allocated_bytes -= static_cast<int64_t>(b->size);
  c.stats.num_frees += 1;
  b->free = true;
  auto& pool = c.pool(b);
  // Merge with free neighbours of the same segment.
  if (Block* n = b->next; n && n->free) {
    pool.erase(n);
    b->size += n->size;
    b->next = n->next;
    if (n->next) n->next->prev = b;
    delete n;
  }
  if (Block* p = b->prev; p && p->free) {
    pool.erase(p);
    p->size += b->size;
    p->next = b->next;
    if (b->next) b->next->prev = p;
    delete b;
    b = p;
  }
  pool.insert(b);
}

// KILN_LOGS=memory: a summary per device at exit (no driver call: the driver may be gone).
struct ExitSummary {
  ~ExitSummary() {
    if (!log_enabled("memory")) return;
    std::lock_guard<std::mutex> lock(mutex);
    for (size_t d = 0; d < caches->size(); ++d) {
      const MemoryStats& s = (*caches)[d].stats;
      if (s.num_allocs == 0) continue;
      log_line("memory", fmt::format("summary cuda:{}: {} allocations, {} frees, {} cuMemAlloc calls, {} cache hits; "
                                     "peak allocated {}, peak reserved {}",
                                     d, s.num_allocs, s.num_frees, s.num_device_mallocs, s.num_cache_hits,
                                     mib(s.peak_allocated_bytes), mib(s.peak_reserved_bytes)));
    }
  }
} exit_summary;

}  // namespace

DeviceAllocation::~DeviceAllocation() {
  if (ptr_) release(ptr_, device_);
}

DeviceBuffer device_alloc(size_t bytes, int device) {
  if (bytes == 0) return std::make_shared<DeviceAllocation>(nullptr, 0, device);
  return std::make_shared<DeviceAllocation>(allocate(bytes, device), bytes, device);
}

MemoryStats memory_stats(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  return cache(device).stats;
}

void reset_peak_stats() {
  std::lock_guard<std::mutex> lock(mutex);
  for (DeviceCache& c : *caches) {
    c.stats.peak_allocated_bytes = c.stats.allocated_bytes;
    c.stats.peak_reserved_bytes = c.stats.reserved_bytes;
  }
}

void empty_cache() {
  std::lock_guard<std::mutex> lock(mutex);
  for (size_t d = 0; d < caches->size(); ++d) {
    if ((*caches)[d].stats.reserved_bytes == 0) continue;
    ScopedContext ctx(static_cast<int>(d));
    release_free_segments((*caches)[d], static_cast<int>(d));
  }
}

DeviceMemory device_memory(int device) {
  ScopedContext ctx(device);
  size_t free_bytes = 0, total = 0;
  check(api().cuMemGetInfo(&free_bytes, &total), fmt::format("cuMemGetInfo on cuda:{}", device));
  std::lock_guard<std::mutex> lock(mutex);
  const MemoryStats& s = cache(device).stats;
  return {static_cast<int64_t>(free_bytes) + (s.reserved_bytes - s.allocated_bytes), static_cast<int64_t>(total)};
}

std::string memory_summary(int device) {
  MemoryStats s = memory_stats(device);
  return fmt::format("cuda:{}: allocated {} (peak {}), reserved {} (peak {}), {} allocations, {} frees, {} cuMemAlloc "
                     "calls, {} cache hits",
                     device, mib(s.allocated_bytes), mib(s.peak_allocated_bytes), mib(s.reserved_bytes),
                     mib(s.peak_reserved_bytes), s.num_allocs, s.num_frees, s.num_device_mallocs, s.num_cache_hits);
}

}  // namespace kiln::runtime::cuda
