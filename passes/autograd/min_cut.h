#pragma once
// A minimum s-t cut of a directed flow network, for the min-cut rematerialization partitioner
// (partition.cpp): vertices are the two ends of each value, capacities are bytes, and the cut
// edges are the values saved for the backward.
//
// Max flow by Dinic's algorithm (BFS levels + blocking flows on DFS), then the source side of
// the cut is every vertex still reachable from the source in the residual graph.
#include <cstdint>
#include <limits>
#include <vector>

namespace kiln::autograd {

class FlowNetwork {
 public:
  // Large enough never to be cut, small enough that sums of a few of them do not overflow.
  static constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 8;

  explicit FlowNetwork(int num_vertices = 0);
  int add_vertex();
  int num_vertices() const { return static_cast<int>(adjacency_.size()); }
  // A directed edge; capacity >= 0 (kInfinite for one that must never be cut).
  void add_edge(int from, int to, int64_t capacity);

  struct Cut {
    int64_t value = 0;              // the max flow = the total capacity of the cut edges
    std::vector<bool> source_side;  // per vertex: reachable from the source in the residual graph
    bool infinite() const { return value >= kInfinite; }
  };
  // Computes a maximum flow from `source` to `sink` (consuming the capacities: call once).
  Cut min_cut(int source, int sink);

 private:
  struct Edge {
    int to;
    int64_t capacity;  // residual
  };
  bool build_levels(int source, int sink);
  int64_t push(int v, int sink, int64_t limit);

  std::vector<Edge> edges_;                  // edge e and its reverse e^1 are paired
  std::vector<std::vector<int>> adjacency_;  // per vertex: indices into edges_
  std::vector<int> level_, next_edge_;
};

}  // namespace kiln::autograd
