#pragma once
// Draft groups while fusion runs: a union-find over groups of nodes, with the questions the
// fusion rules ask of them (what a merge would output, whether it would close a cycle).
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ir/graph.h"

namespace kiln::fusion {

// A reference to a draft inside a decision's text, written with its final id ("k3") once
// groups are numbered: drafts merge and are renumbered after the text is written. A final
// id below 0 stands for a draft that was left empty.
std::string ref(int draft);
std::string resolve_refs(const std::string& text, const std::function<int(int)>& final_id);

// How the decision log names a node ("%y = exp") and a group's ops ("[ne, where]", cut short).
std::string node_str(const Node* n);
std::string op_list(const std::vector<Node*>& nodes);

// One decision of the log, about draft `draft` (a reference inside `text` names others). A
// decision about `subject` (when given) follows it if its group is later split.
struct Note {
  int draft;
  std::string text;
  const Node* subject;
};

class Drafts {
 public:
  explicit Drafts(const Graph& g);

  void set_position(const Node* n, int pos) { pos_[n] = pos; }
  // n's place in program order (producers first); -1 for a node no draft holds (an input).
  int position(const Node* n) const {
    auto it = pos_.find(n);
    return it == pos_.end() ? -1 : it->second;
  }
  int create(Node* n);                           // a new draft holding n
  void add_to(int d, Node* n);                   // n joins draft d
  void add_copy(int d, Node* copy, const Node* original);  // a copy ordered as its original
  void merge(int into, int from);                // `from` joins `into`
  // Moves `part` (some of d's nodes) into a new draft, which it returns; merge(d, new) undoes it.
  int split(int d, const std::vector<Node*>& part);
  void remove(Node* n);                          // n leaves its draft (about to be erased)
  int find(int d) const;                         // the draft d was merged into
  int group(const Node* n) const;                // n's draft, -1 while n is not placed

  const std::vector<Node*>& nodes(int d) const { return drafts_[d].nodes; }
  std::vector<Node*> nodes_in_order(int d) const;
  bool is_alias(int d) const;                    // only alias views (no kernel)
  bool all_alias_views(int d) const { return is_alias(d); }
  bool has_extern(int d) const;
  std::vector<const Node*> reductions(int d) const;
  // The space S and reduced dims R of the draft's first reduction.
  std::pair<Shape, std::vector<int64_t>> row_space(int d) const;
  std::vector<int> alive_reduction_drafts() const;  // latest first

  bool is_graph_output(Value v) const { return is_graph_output(v.node, v.index); }
  bool is_graph_output(const Node* n, int result) const { return returned_.count({n, result}) != 0; }
  // Whether every reader of the draft's results is in draft `reader` (none is returned).
  bool only_read_by(int d, int reader) const;
  // The values of a and b read outside both (or returned), as one group would output them.
  std::vector<Value> outputs_if_merged(int a, int b) const;
  // A draft other than a and b on a path from a to b, if one exists (merging a and b would
  // then close a cycle in the group graph).
  std::optional<int> path_through_other(int a, int b) const;
  // The drafts that read d's results, directly or through others.
  std::vector<int> downstream(int d) const;
  // The live drafts in an order they can run in (producers first; ties by program order).
  std::vector<int> execution_order() const;

 private:
  struct Draft {
    std::vector<Node*> nodes;
    bool alive = true;
  };
  std::vector<int> consumers(int d) const;  // drafts reading d's results (placed nodes only)
  int first_position(int d) const;

  std::vector<Draft> drafts_;
  mutable std::vector<int> parent_;
  std::unordered_map<const Node*, int> draft_of_;
  std::unordered_map<const Node*, int> pos_;
  std::set<std::pair<const Node*, int>> returned_;
};

}  // namespace kiln::fusion
