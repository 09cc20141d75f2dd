#include "passes/cse.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <functional>
#include <unordered_map>

#include "ir/meta/meta.h"
#include "passes/constants.h"

namespace kiln {

namespace {

void hash_combine(size_t& seed, size_t v) { seed ^= v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2); }

size_t hash_double(double d) {
  if (std::isnan(d)) return 0x7ff8;  // every nan is equal to every other (attr_equal)
  return std::hash<uint64_t>{}(std::bit_cast<uint64_t>(d));
}

size_t hash_attr(const AttrValue& v) {
  size_t h = v.index();
  std::visit(
      [&h](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, double>) {
          hash_combine(h, hash_double(x));
        } else if constexpr (std::is_same_v<T, FloatList>) {
          for (double d : x) hash_combine(h, hash_double(d));
        } else if constexpr (std::is_same_v<T, IntList>) {
          for (int64_t i : x) hash_combine(h, std::hash<int64_t>{}(i));
        } else if constexpr (std::is_same_v<T, DType>) {
          hash_combine(h, static_cast<size_t>(x));
        } else {
          hash_combine(h, std::hash<T>{}(x));
        }
      },
      v);
  return h;
}

struct NodeKey {
  const Node* node;
  bool operator==(const NodeKey& o) const {
    const Node& a = *node;
    const Node& b = *o.node;
    return a.op() == b.op() && a.inputs() == b.inputs() && a.attrs() == b.attrs();  // nan == nan, -0.0 != 0.0
  }
};

struct NodeKeyHash {
  size_t operator()(const NodeKey& k) const {
    size_t h = static_cast<size_t>(k.node->op());
    for (const Value& v : k.node->inputs()) {
      hash_combine(h, std::hash<const Node*>{}(v.node));
      hash_combine(h, static_cast<size_t>(v.index));
    }
    for (auto& [name, value] : k.node->attrs().all()) {
      hash_combine(h, std::hash<std::string>{}(name));
      hash_combine(h, hash_attr(value));
    }
    return h;
  }
};

// Reshapes of one value whose layout they cannot view (a transposed tensor merged to rows) are
// copies, one kernel each; a later one reads the first's result instead, which is contiguous and
// so a view. Attention's backward merged dQ's heads twice, [B,T,H*D] for the input's gradient and
// [B*T,H*D] for the weight's (and dK's, dV's): two copies of the same data per layer. The first
// may be the forward's and the later the backward's: then the merged copy is what stays alive
// between them (the same bytes as the value it was made from).
bool share_reshape_copies(Graph& g) {
  std::unordered_map<const Node*, std::vector<std::pair<int, Node*>>> copies;  // by source node: (result, first copy)
  bool changed = false;
  for (Node* n : g.nodes()) {
    if (n->op() != Op::Reshape) continue;
    const Value x = n->input(0);
    const TensorMeta& in = x.meta();
    if (meta::view_strides(in.shape, in.strides, n->meta().shape)) continue;  // a view, no copy
    auto& firsts = copies[x.node];
    auto it = std::find_if(firsts.begin(), firsts.end(), [&](auto& f) { return f.first == x.index; });
    if (it == firsts.end()) {
      firsts.emplace_back(x.index, n);
      continue;
    }
    n->set_input(0, it->second->result(0));
    changed = true;
  }
  return changed;
}

}  // namespace

bool run_cse(Graph& g) {
  // Nodes are visited in order, and a merged node's users are rewired to the survivor
  // before they are visited, so their inputs already name the survivors when hashed.
  std::unordered_map<NodeKey, Node*, NodeKeyHash> seen;
  bool changed = false;
  for (Node* n : g.nodes()) {
    // A collective is a transfer between processes, not a value to share: FSDP gathers a
    // parameter a second time for the backward so that the forward's copy can be freed.
    if (n->category() == OpCategory::Collective) continue;
    auto [it, inserted] = seen.try_emplace(NodeKey{n}, n);
    if (inserted) continue;
    Node* first = it->second;
    for (int i = 0; i < n->num_results(); ++i) g.replace_all_uses(n->result(i), first->result(i));
    g.erase(n);
    changed = true;
  }
  return share_reshape_copies(g) || changed;
}

}  // namespace kiln
