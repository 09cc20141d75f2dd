#pragma once
// Fusion's legality: whether two draft groups may become one kernel, and if not, why (Inductor's
// WhyNoFuse; the reason goes into the fusion log as a near miss). Pure questions about the drafts:
// nothing here changes the graph or the drafts. The merge policy (passes/fusion/fusion.cpp) asks
// them before every merge, and the graph surgery (passes/fusion/surgery.h) before a recompute.
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "ir/graph.h"
#include "passes/fusion/draft.h"
#include "passes/fusion/fusion.h"

namespace kiln::fusion {

class Legality {
 public:
  Legality(const Drafts& drafts, const FusionOptions& options) : drafts_(drafts), opt_(options) {}

  // Why drafts a and b may not become one group, or nullopt when they may: the node cap, the
  // rows of their reductions and everything they compute in them, one space without a
  // reduction, and no cycle through a third group.
  std::optional<std::string> refusal(int a, int b) const;
  // Whether these nodes could be a group by themselves: reductions over the same rows and
  // everything else in those rows, or, with no reduction, one space.
  bool valid_alone(const std::vector<Node*>& nodes) const;
  // Whether copies of `cone` (a recompute) fit the loops of draft d, which `reader` is in.
  bool copies_fit(int d, const Node* reader, const std::vector<Node*>& cone) const;

 private:
  bool read_outside(const Node* m, const std::unordered_set<const Node*>& nodes) const;

  const Drafts& drafts_;
  const FusionOptions& opt_;
};

}  // namespace kiln::fusion
