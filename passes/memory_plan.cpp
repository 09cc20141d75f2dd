#include "passes/memory_plan.h"

#include <fmt/format.h>

#include <algorithm>
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
    plan.naive_bytes += sizes.back();
  }
  // Largest first: big buffers claim space early and small ones fill the gaps between them.
  std::vector<size_t> order(intervals.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (sizes[a] != sizes[b]) return sizes[a] > sizes[b];
    return intervals[a].first < intervals[b].first;
  });
  plan.offsets.assign(intervals.size(), 0);
  std::vector<size_t> placed;
  for (size_t i : order) {
    // The buffers already placed that are live at the same time, by offset.
    std::vector<size_t> rivals;
    for (size_t p : placed)
      if (live_together(intervals[i], intervals[p])) rivals.push_back(p);
    std::sort(rivals.begin(), rivals.end(), [&](size_t a, size_t b) { return plan.offsets[a] < plan.offsets[b]; });
    // Best fit: the smallest gap between rivals that holds the buffer, else above them all.
    int64_t end = 0, best = -1, best_gap = std::numeric_limits<int64_t>::max();
    for (size_t r : rivals) {
      int64_t gap = plan.offsets[r] - end;
      if (gap >= sizes[i] && gap < best_gap) {
        best = end;
        best_gap = gap;
      }
      end = std::max(end, plan.offsets[r] + sizes[r]);
    }
    plan.offsets[i] = best >= 0 ? best : end;
    plan.peak_bytes = std::max(plan.peak_bytes, plan.offsets[i] + sizes[i]);
    placed.push_back(i);
  }
  return plan;
}

namespace {

using fusion::FusionPlan;
using fusion::KernelKind;

// Where a value is read from, following alias groups to the groups that index through
// them: the last reading group, and whether it (or an alias of it) is returned.
struct Reach {
  int last = -1;
  bool returned = false;
};

Reach reach_of(const Graph& g, const FusionPlan& plan, Value v, const std::set<std::pair<const Node*, int>>& outs) {
  Reach r;
  r.returned = outs.count({v.node, v.index}) != 0;
  auto producer = plan.group_of.find(v.node);
  int own = producer == plan.group_of.end() ? -1 : producer->second;
  for (const Use& u : v.node->result_info(v.index).uses) {
    int reader = plan.group_of.at(u.user);
    if (reader == own) continue;
    r.last = std::max(r.last, reader);
    const fusion::FusionGroup& grp = plan.groups.at(reader);
    if (grp.kind != KernelKind::Alias) continue;
    for (const Value& view : grp.outputs) {
      Reach through = reach_of(g, plan, view, outs);
      r.last = std::max(r.last, through.last);
      r.returned |= through.returned;
    }
  }
  return r;
}

}  // namespace

BufferPlan plan_buffers(const Graph& g, const FusionPlan& plan, int64_t alignment) {
  std::set<std::pair<const Node*, int>> outs;
  for (const Value& v : g.outputs()) outs.insert({v.node, v.index});
  BufferPlan result;
  std::vector<BufferInterval> intervals;
  for (const fusion::FusionGroup& grp : plan.groups) {
    if (grp.kind == KernelKind::Alias) continue;
    for (const Value& v : grp.outputs) {
      Reach r = reach_of(g, plan, v, outs);
      if (r.returned) continue;  // the caller's memory
      PlannedBuffer b;
      b.value = v;
      b.bytes = v.meta().nbytes();
      b.first = grp.id;
      b.last = std::max(grp.id, r.last);
      result.buffers.push_back(b);
      intervals.push_back(BufferInterval{b.bytes, b.first, b.last});
    }
  }
  MemoryPlan mp = plan_memory(intervals, alignment);
  for (size_t i = 0; i < result.buffers.size(); ++i) result.buffers[i].offset = mp.offsets[i];
  result.arena_bytes = mp.peak_bytes;
  result.naive_bytes = mp.naive_bytes;
  return result;
}

std::string format_bytes(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{} B", bytes);
  const char* units[] = {"KB", "MB", "GB", "TB"};
  double v = static_cast<double>(bytes) / 1024;
  int u = 0;
  while (v >= 1024 && u < 3) {
    v /= 1024;
    ++u;
  }
  return fmt::format("{:.1f} {}", v, units[u]);
}

std::string BufferPlan::report() const {
  return fmt::format("memory: {} buffer{}, {} unplanned -> {} planned peak", buffers.size(),
                     buffers.size() == 1 ? "" : "s", format_bytes(naive_bytes), format_bytes(arena_bytes));
}

}  // namespace kiln
