#pragma once
// Fusion's graph surgery: the two places where fusion changes the graph, not only the groups.
// - A cheap value of the graph's inputs that a node reads from a group it did not join is
//   recomputed in the node's group (recompute_cheap_inputs).
// - A creation op (full, arange) goes into the group that reads it, and every further reading
//   group gets a copy of its own (place_creation).
// Each change is written to the decision log.
#include <functional>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/draft.h"
#include "passes/fusion/fusion.h"
#include "passes/fusion/legality.h"

namespace kiln::fusion {

class Surgery {
 public:
  Surgery(Graph& g, Drafts& drafts, const Legality& legality, const FusionOptions& options, std::vector<Note>& notes)
      : g_(g), drafts_(drafts), legality_(legality), opt_(options), notes_(notes) {}

  // A value computed from the graph's inputs alone by a few cheap ops (a mask, a cast, an
  // index), which n (in draft d) reads from a group it did not join, is recomputed in n's group.
  void recompute_cheap_inputs(Node* n, int d);
  // Places creation op `c` once every node reading it is placed.
  void place_creation(Node* c);

 private:
  void note(int draft, std::string text, const Node* subject = nullptr) { notes_.push_back({draft, std::move(text), subject}); }
  static bool cheap_input_cone(Node* root, std::vector<Node*>& cone, const std::function<bool(Value)>& readable_small);

  Graph& g_;
  Drafts& drafts_;
  const Legality& legality_;
  const FusionOptions& opt_;
  std::vector<Note>& notes_;
};

}  // namespace kiln::fusion
