#pragma once
// Random graphs for differential fuzzing (`kiln fuzz`, tools/fuzz/differential.h): valid by
// construction, because every node is added through Graph::add_node, whose shape-and-dtype
// rule rejects a bad call; the generator then draws again. So a graph holds only calls the op
// table accepts, and the generator can draw attributes loosely (any dim, any slice step) and
// let the rules say no: what reaches the compiler is what a user could write.
//
// A graph draws on: every dtype; shapes of rank 0-4 with odd sizes, 1 and (rarely) 0;
// broadcasting; views (transpose, permute, slice with steps, expand, reshape of non-contiguous
// values, squeeze, split, cat); reductions over any dims; matmuls; composite ops (linear,
// softmax, layer_norm, cross_entropy, embedding, ...); gather and scatter_add.
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::fuzz {

struct GenOptions {
  int max_nodes = 25;           // nodes drawn (before dead code goes)
  int64_t max_numel = 4096;     // elements per value: keeps a graph fast to run on the interpreter
  double empty_dim_chance = 0.03;
};

// A graph and how to make its inputs: integer inputs that index something (gather, embedding,
// cross_entropy targets) must stay below a bound.
struct FuzzCase {
  Graph graph{"fuzz"};
  std::vector<int64_t> int_bounds;     // per graph input: integers drawn in [0, bound)
  std::vector<uint64_t> input_seeds;   // per graph input: the seed of its values
  uint64_t seed = 0;

  // Random inputs (never all zeros): floats normal, integers below their bound, bools half
  // true. Each input's values depend on its own seed only, so a case merged into a batch
  // (merge_cases) sees the same values as alone.
  std::vector<HostTensor> inputs() const;
  FuzzCase clone() const;  // graphs are not copied implicitly
};

// Deterministic per seed.
FuzzCase random_graph(uint64_t seed, const GenOptions& options = {});

}  // namespace kiln::fuzz
