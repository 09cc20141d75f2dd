#include "passes/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <set>

#include "ir/error.h"

namespace kiln {

namespace {

int64_t align_up(int64_t bytes, int64_t alignment) {
  if (bytes > std::numeric_limits<int64_t>::max() - alignment) fail("a buffer of {} bytes is too large to align", bytes);
  return (bytes + alignment - 1) / alignment * alignment;
}

bool live_together(const BufferInterval& a, const BufferInterval& b) { return a.first <= b.last && b.first <= a.last; }

}  // namespace

namespace {

struct Layout {
  std::vector<int64_t> offsets;
  int64_t peak = 0;
};

// The buffers placed so far that are live together with buffer i, by offset.
std::vector<size_t> rivals_of(size_t i, const std::vector<size_t>& placed, std::span<const BufferInterval> iv,
                              const std::vector<int64_t>& offsets) {
  std::vector<size_t> rivals;
  for (size_t p : placed)
    if (live_together(iv[i], iv[p])) rivals.push_back(p);
  std::sort(rivals.begin(), rivals.end(), [&](size_t a, size_t b) { return offsets[a] < offsets[b]; });
  return rivals;
}

// Greedy by size (TFLite's GreedyBySize): largest first, each into the smallest gap between
// the buffers live with it that holds it, else above them all.
Layout greedy_by_size(std::span<const BufferInterval> iv, const std::vector<int64_t>& sizes) {
  std::vector<size_t> order(iv.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    return iv[a].first < iv[b].first;
  });
  Layout out{std::vector<int64_t>(iv.size(), 0), 0};
  std::vector<size_t> placed;
  for (size_t i : order) {
    int64_t end = 0, best = -1, best_gap = std::numeric_limits<int64_t>::max();
    for (size_t r : rivals_of(i, placed, iv, out.offsets)) {
      int64_t gap = out.offsets[r] - end;
      if (gap >= sizes[i] && gap < best_gap) {
        best = end;
        best_gap = gap;
      }
      end = std::max(end, out.offsets[r] + sizes[r]);
    }
    out.offsets[i] = best >= 0 ? best : end;
    out.peak = std::max(out.peak, out.offsets[i] + sizes[i]);
    placed.push_back(i);
  }
  return out;
}

// In program order, inside the lower bound (the most bytes ever live at once): each buffer
// goes to the lowest or the highest free place under the bound, whichever is farther from
// the buffer placed last among those live with it. On a chain (each buffer live only with
// its neighbours) this alternates ends and reaches the bound, where greedy by size may not.
Layout ends_in_program_order(std::span<const BufferInterval> iv, const std::vector<int64_t>& sizes, int64_t bound) {
  std::vector<size_t> order(iv.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (iv[a].first != iv[b].first) return iv[a].first < iv[b].first;
    return sizes[a] > sizes[b];
  });
  Layout out{std::vector<int64_t>(iv.size(), 0), 0};
  std::vector<size_t> placed;
  for (size_t i : order) {
    std::vector<size_t> rivals = rivals_of(i, placed, iv, out.offsets);
    // Free gaps [begin, end) between rivals, the last one open up to the bound.
    std::vector<std::pair<int64_t, int64_t>> gaps;
    int64_t end = 0;
    for (size_t r : rivals) {
      if (out.offsets[r] > end) gaps.push_back({end, out.offsets[r]});
      end = std::max(end, out.offsets[r] + sizes[r]);
    }
    gaps.push_back({end, std::max(end, bound)});
    int64_t low = -1, high = -1;
    for (auto [b, e] : gaps)
      if (e - b >= sizes[i]) {
        if (low < 0) low = b;
        high = e - sizes[i];
      }
    int64_t chosen = end;  // nothing fits under the bound: above every rival
    if (low >= 0) {
      chosen = low;
      if (!rivals.empty()) {
        size_t last = *std::max_element(rivals.begin(), rivals.end(), [&](size_t a, size_t b) {
          return std::pair(iv[a].first, a) < std::pair(iv[b].first, b);
        });
        int64_t center = out.offsets[last] + sizes[last] / 2;
        auto distance = [&](int64_t o) { return std::abs(o + sizes[i] / 2 - center); };
        if (distance(high) > distance(low)) chosen = high;
      }
    }
    out.offsets[i] = chosen;
    out.peak = std::max(out.peak, chosen + sizes[i]);
    placed.push_back(i);
  }
  return out;
}

// The most bytes live at one time: no layout can do better.
int64_t live_bound(std::span<const BufferInterval> iv, const std::vector<int64_t>& sizes) {
  int64_t bound = 0;
  for (const BufferInterval& at : iv) {
    int64_t live = 0;
    for (size_t j = 0; j < iv.size(); ++j)
      if (iv[j].first <= at.first && at.first <= iv[j].last) live += sizes[j];
    bound = std::max(bound, live);
  }
  return bound;
}

}  // namespace

MemoryPlan plan_memory(std::span<const BufferInterval> intervals, int64_t alignment) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    fail("memory plan: alignment must be a power of two, got {}", alignment);
  MemoryPlan plan;
  std::vector<int64_t> sizes;
  for (size_t i = 0; i < intervals.size(); ++i) {
    const BufferInterval& b = intervals[i];
    if (b.bytes < 0) fail("memory plan: buffer {} has a negative size ({} bytes)", i, b.bytes);
    if (b.last < b.first) fail("memory plan: buffer {} dies (group {}) before it is written (group {})", i, b.last, b.first);
    sizes.push_back(align_up(b.bytes, alignment));
    // Every layout below places a buffer below the sum of the sizes: checked here once, no
    // offset can overflow after.
    if (__builtin_add_overflow(plan.naive_bytes, sizes.back(), &plan.naive_bytes))
      fail("memory plan: the buffers need more than 2^63 bytes together");
  }
  // Two heuristics, the smaller arena wins; both are exact on the shapes they suit.
  Layout a = greedy_by_size(intervals, sizes);
  Layout b = ends_in_program_order(intervals, sizes, live_bound(intervals, sizes));
  Layout& best = b.peak < a.peak ? b : a;
  plan.offsets = std::move(best.offsets);
  plan.peak_bytes = best.peak;
  return plan;
}

}  // namespace kiln
