#include "codegen/collective_schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <queue>

#include "ir/error.h"

namespace kiln::codegen {

std::vector<int> step_buffers(const Step& s) {
  switch (s.kind) {
    case Step::Kind::Kernel: return s.args;
    case Step::Kind::Matmul: {
      std::vector<int> b{s.matmul.a, s.matmul.b, s.matmul.out};
      if (s.matmul.bias >= 0) b.push_back(s.matmul.bias);
      return b;
    }
    case Step::Kind::Opaque:
    case Step::Kind::Collective: {
      std::vector<int> b = s.opaque.inputs;
      b.insert(b.end(), s.opaque.outputs.begin(), s.opaque.outputs.end());
      return b;
    }
  }
  return {};
}

namespace {

std::string step_name(const LoweredGraph& lg, int i) {
  if (i >= static_cast<int>(lg.steps.size())) return "the end of the run";
  const Step& s = lg.steps[static_cast<size_t>(i)];
  switch (s.kind) {
    case Step::Kind::Kernel: return fmt::format("step {} ({})", i, lg.kernels[static_cast<size_t>(s.kernel)].name);
    case Step::Kind::Matmul: return fmt::format("step {} (matmul {})", i, s.matmul.label);
    default: return fmt::format("step {} ({})", i, s.opaque.label);
  }
}

}  // namespace

std::vector<CollectiveWindow> schedule_collectives_early(LoweredGraph& lg) {
  const int n = static_cast<int>(lg.steps.size());
  bool any = false;
  for (const Step& s : lg.steps) any |= s.kind == Step::Kind::Collective;
  if (!any) return {};

  // Step j depends on every earlier step that touches a buffer it touches (read or write: a
  // buffer may have more than one writer, a scatter's zeros and its adds); graph inputs are
  // only read and order nothing.
  std::vector<std::vector<int>> deps(static_cast<size_t>(n)), users(static_cast<size_t>(n));
  std::vector<std::vector<int>> touched_by(lg.buffers.size());
  for (int j = 0; j < n; ++j) {
    std::vector<int> mine;
    for (int b : step_buffers(lg.steps[static_cast<size_t>(j)])) {
      if (lg.buffers[static_cast<size_t>(b)].kind == GraphBuffer::Kind::Input) continue;
      for (int i : touched_by[static_cast<size_t>(b)]) mine.push_back(i);
      touched_by[static_cast<size_t>(b)].push_back(j);
    }
    std::sort(mine.begin(), mine.end());
    mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
    mine.erase(std::remove(mine.begin(), mine.end(), j), mine.end());
    for (int i : mine) users[static_cast<size_t>(i)].push_back(j);
    deps[static_cast<size_t>(j)] = std::move(mine);
  }
  // Priority: the first reducing collective (in lowered order) a step leads to; the rest last.
  // Only collectives that reduce what the steps computed (a DDP bucket's all_reduce, FSDP's
  // reduce_scatter of a gradient) are pulled early: a gather (FSDP's parameters) or a broadcast
  // makes a value larger than what it reads, so it stays where the graph asks for it, just
  // before its first reader, and what it makes is freed soon after (pulled early, every
  // parameter's gather would run at the start and live through the forward).
  constexpr int kRest = std::numeric_limits<int>::max();
  auto reduces = [&](int i) {
    const Step& s = lg.steps[static_cast<size_t>(i)];
    return s.kind == Step::Kind::Collective && s.opaque.op != Op::AllGather && s.opaque.op != Op::Broadcast;
  };
  auto gathers = [&](int i) { return lg.steps[static_cast<size_t>(i)].kind == Step::Kind::Collective && !reduces(i); };
  std::vector<int> prio(static_cast<size_t>(n), kRest);
  int rank = 0;
  for (int c = 0; c < n; ++c) {
    if (!reduces(c)) continue;
    const int p = rank++;
    std::vector<int> stack{c};
    while (!stack.empty()) {
      int s = stack.back();
      stack.pop_back();
      if (prio[static_cast<size_t>(s)] <= p || gathers(s)) continue;
      prio[static_cast<size_t>(s)] = p;
      for (int d : deps[static_cast<size_t>(s)]) stack.push_back(d);
    }
  }
  using Item = std::pair<int, int>;  // (priority, lowered index), smallest first
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> ready;
  std::vector<int> waiting(static_cast<size_t>(n));
  for (int j = 0; j < n; ++j) {
    waiting[static_cast<size_t>(j)] = static_cast<int>(deps[static_cast<size_t>(j)].size());
    if (waiting[static_cast<size_t>(j)] == 0) ready.push({prio[static_cast<size_t>(j)], j});
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int j = ready.top().second;
    ready.pop();
    order.push_back(j);
    for (int u : users[static_cast<size_t>(j)])
      if (--waiting[static_cast<size_t>(u)] == 0) ready.push({prio[static_cast<size_t>(u)], u});
  }
  KILN_INTERNAL_ASSERT(static_cast<int>(order.size()) == n, "the steps' dependencies are acyclic");
  std::vector<Step> sorted;
  for (int j : order) sorted.push_back(std::move(lg.steps[static_cast<size_t>(j)]));
  lg.steps = std::move(sorted);

  // Lifetimes in the new order; graph outputs live to the end, as the lowering has them.
  std::vector<bool> seen(lg.buffers.size(), false);
  for (int i = 0; i < n; ++i)
    for (int b : step_buffers(lg.steps[static_cast<size_t>(i)])) {
      GraphBuffer& gb = lg.buffers[static_cast<size_t>(b)];
      if (!seen[static_cast<size_t>(b)]) gb.first_step = gb.last_step = i;
      seen[static_cast<size_t>(b)] = true;
      gb.last_step = std::max(gb.last_step, i);
    }
  for (int o : lg.outputs) lg.buffers[static_cast<size_t>(o)].last_step = n;
  // A collective's windows: its inputs are read (and its output written) until it is waited for.
  std::vector<CollectiveWindow> windows;
  for (int i = 0; i < n; ++i) {
    const Step& s = lg.steps[static_cast<size_t>(i)];
    if (s.kind != Step::Kind::Collective) continue;
    CollectiveWindow w{i, n};
    for (int j = i + 1; j < n && w.wait == n; ++j) {
      const std::vector<int> bs = step_buffers(lg.steps[static_cast<size_t>(j)]);
      for (int o : s.opaque.outputs)
        if (std::find(bs.begin(), bs.end(), o) != bs.end()) w.wait = j;
    }
    for (int b : s.opaque.inputs) lg.buffers[static_cast<size_t>(b)].last_step = std::max(lg.buffers[static_cast<size_t>(b)].last_step, w.wait);
    windows.push_back(w);
  }
  return windows;
}

std::string describe_window(const LoweredGraph& lg, const CollectiveWindow& w) {
  const Step& s = lg.steps.at(static_cast<size_t>(w.launch));
  return fmt::format("{}: launched after {}, first read by {}: {} step{} run while it travels", s.opaque.label,
                     w.launch == 0 ? "the start" : step_name(lg, w.launch - 1), step_name(lg, w.wait), w.wait - w.launch - 1,
                     w.wait - w.launch - 1 == 1 ? "" : "s");
}

}  // namespace kiln::codegen
