#include "passes/autograd/min_cut.h"

#include <algorithm>
#include <queue>

#include "ir/error.h"

namespace kiln::autograd {

FlowNetwork::FlowNetwork(int num_vertices) : adjacency_(static_cast<size_t>(num_vertices)) {}

int FlowNetwork::add_vertex() {
  adjacency_.emplace_back();
  return num_vertices() - 1;
}

void FlowNetwork::add_edge(int from, int to, int64_t capacity) {
  KILN_INTERNAL_ASSERT(from >= 0 && from < num_vertices() && to >= 0 && to < num_vertices(),
                       "flow edge ends are vertices of the network");
  KILN_INTERNAL_ASSERT(capacity >= 0, "flow capacities are non-negative");
  adjacency_[static_cast<size_t>(from)].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({to, std::min(capacity, kInfinite)});
  adjacency_[static_cast<size_t>(to)].push_back(static_cast<int>(edges_.size()));
  edges_.push_back({from, 0});
}

bool FlowNetwork::build_levels(int source, int sink) {
  level_.assign(adjacency_.size(), -1);
  std::queue<int> queue;
  level_[static_cast<size_t>(source)] = 0;
  queue.push(source);
  while (!queue.empty()) {
    int v = queue.front();
    queue.pop();
    for (int e : adjacency_[static_cast<size_t>(v)]) {
      const Edge& edge = edges_[static_cast<size_t>(e)];
      if (edge.capacity > 0 && level_[static_cast<size_t>(edge.to)] < 0) {
        level_[static_cast<size_t>(edge.to)] = level_[static_cast<size_t>(v)] + 1;
        queue.push(edge.to);
      }
    }
  }
  return level_[static_cast<size_t>(sink)] >= 0;
}

int64_t FlowNetwork::push(int v, int sink, int64_t limit) {
  if (v == sink) return limit;
  auto& adj = adjacency_[static_cast<size_t>(v)];
  for (int& i = next_edge_[static_cast<size_t>(v)]; i < static_cast<int>(adj.size()); ++i) {
    int e = adj[static_cast<size_t>(i)];
    Edge& edge = edges_[static_cast<size_t>(e)];
    if (edge.capacity <= 0 || level_[static_cast<size_t>(edge.to)] != level_[static_cast<size_t>(v)] + 1) continue;
    int64_t pushed = push(edge.to, sink, std::min(limit, edge.capacity));
    if (pushed > 0) {
      edge.capacity -= pushed;
      edges_[static_cast<size_t>(e ^ 1)].capacity += pushed;
      return pushed;
    }
  }
  return 0;
}

FlowNetwork::Cut FlowNetwork::min_cut(int source, int sink) {
  KILN_INTERNAL_ASSERT(source != sink, "the source of a flow is not its sink");
  Cut cut;
  while (cut.value < kInfinite && build_levels(source, sink)) {
    next_edge_.assign(adjacency_.size(), 0);
    while (int64_t f = push(source, sink, kInfinite)) {
      cut.value += f;
      if (cut.value >= kInfinite) break;  // an uncuttable path: no finite cut exists
    }
  }
  // After the last BFS failed to reach the sink, level_ >= 0 marks the residual source side.
  if (cut.value >= kInfinite) build_levels(source, sink);
  cut.source_side.resize(adjacency_.size());
  for (size_t v = 0; v < adjacency_.size(); ++v) cut.source_side[v] = level_[v] >= 0;
  return cut;
}

}  // namespace kiln::autograd
