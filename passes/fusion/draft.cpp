#include "passes/fusion/draft.h"

#include <fmt/format.h>

#include <algorithm>
#include <queue>

#include "ir/error.h"
#include "passes/fusion/space.h"

namespace kiln::fusion {

std::string ref(int draft) { return fmt::format("\x01{}\x02", draft); }

std::string node_str(const Node* n) { return fmt::format("%{} = {}", n->name(), n->info().name); }

std::string op_list(const std::vector<Node*>& nodes) {
  std::string out;
  for (size_t i = 0; i < nodes.size() && i < 6; ++i) out += (i ? ", " : "") + std::string(nodes[i]->info().name);
  return "[" + out + (nodes.size() > 6 ? ", ...]" : "]");
}

std::string resolve_refs(const std::string& text, const std::function<int(int)>& final_id) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\x01') {
      out += text[i];
      continue;
    }
    size_t end = text.find('\x02', i);
    KILN_INTERNAL_ASSERT(end != std::string::npos, "a draft reference is closed");
    int id = final_id(std::stoi(text.substr(i + 1, end - i - 1)));
    out += id < 0 ? std::string("(a group a recompute left empty)") : fmt::format("k{}", id);
    i = end;
  }
  return out;
}

Drafts::Drafts(const Graph& g) {
  for (const Value& v : g.outputs()) returned_.insert({v.node, v.index});
}

int Drafts::create(Node* n) {
  int d = static_cast<int>(drafts_.size());
  drafts_.push_back(Draft{{n}, true});
  parent_.push_back(d);
  draft_of_[n] = d;
  return d;
}

void Drafts::add_to(int d, Node* n) {
  d = find(d);
  drafts_[d].nodes.push_back(n);
  draft_of_[n] = d;
}

void Drafts::add_copy(int d, Node* copy, const Node* original) {
  pos_[copy] = pos_.at(original);
  add_to(d, copy);
}

void Drafts::merge(int into, int from) {
  into = find(into);
  from = find(from);
  KILN_INTERNAL_ASSERT(into != from, "only distinct drafts merge");
  auto& src = drafts_[from];
  auto& dst = drafts_[into];
  dst.nodes.insert(dst.nodes.end(), src.nodes.begin(), src.nodes.end());
  src.nodes.clear();
  src.alive = false;
  parent_[from] = into;
}

int Drafts::split(int d, const std::vector<Node*>& part) {
  d = find(d);
  int nd = static_cast<int>(drafts_.size());
  drafts_.push_back(Draft{part, true});
  parent_.push_back(nd);
  auto& rest = drafts_[d].nodes;
  for (Node* n : part) {
    auto it = std::find(rest.begin(), rest.end(), n);
    KILN_INTERNAL_ASSERT(it != rest.end(), "a split part holds only nodes of its draft");
    rest.erase(it);
    draft_of_[n] = nd;
  }
  KILN_INTERNAL_ASSERT(!rest.empty() && !part.empty(), "a split leaves two non-empty drafts");
  return nd;
}

void Drafts::remove(Node* n) {
  int d = group(n);
  KILN_INTERNAL_ASSERT(d >= 0, "a removed node is placed");
  auto& ns = drafts_[d].nodes;
  ns.erase(std::find(ns.begin(), ns.end(), n));
  draft_of_.erase(n);
  if (ns.empty()) drafts_[d].alive = false;
}

int Drafts::find(int d) const {
  while (parent_[d] != d) {
    parent_[d] = parent_[parent_[d]];
    d = parent_[d];
  }
  return d;
}

int Drafts::group(const Node* n) const {
  auto it = draft_of_.find(n);
  return it == draft_of_.end() ? -1 : find(it->second);
}

std::vector<Node*> Drafts::nodes_in_order(int d) const {
  std::vector<Node*> out = drafts_[find(d)].nodes;
  std::stable_sort(out.begin(), out.end(), [&](const Node* a, const Node* b) { return pos_.at(a) < pos_.at(b); });
  return out;
}

bool Drafts::is_alias(int d) const {
  const auto& ns = drafts_[find(d)].nodes;
  return !ns.empty() && std::all_of(ns.begin(), ns.end(), [](const Node* n) { return is_alias_view(*n); });
}

bool Drafts::has_extern(int d) const {
  const auto& ns = drafts_[find(d)].nodes;
  return std::any_of(ns.begin(), ns.end(), [](const Node* n) { return is_extern(*n); });
}

std::vector<const Node*> Drafts::reductions(int d) const {
  std::vector<const Node*> out;
  for (const Node* n : drafts_[find(d)].nodes)
    if (n->category() == OpCategory::Reduction) out.push_back(n);
  return out;
}

std::pair<Shape, std::vector<int64_t>> Drafts::row_space(int d) const {
  auto reds = reductions(d);
  KILN_INTERNAL_ASSERT(!reds.empty(), "a row space belongs to a draft with a reduction");
  const Node* n = *std::min_element(reds.begin(), reds.end(),
                                    [&](const Node* a, const Node* b) { return pos_.at(a) < pos_.at(b); });
  return {n->input(0).meta().shape, reduced_dims(*n)};
}

std::vector<int> Drafts::alive_reduction_drafts() const {
  std::vector<int> out;
  for (int d = static_cast<int>(drafts_.size()) - 1; d >= 0; --d)
    if (drafts_[d].alive && !reductions(d).empty()) out.push_back(d);
  return out;
}

bool Drafts::only_read_by(int d, int reader) const {
  d = find(d);
  reader = find(reader);
  for (Node* n : drafts_[d].nodes)
    for (int i = 0; i < n->num_results(); ++i) {
      if (is_graph_output(n->result(i))) return false;
      for (const Use& u : n->result_info(i).uses) {
        int g = group(u.user);
        if (g != d && g != reader) return false;
      }
    }
  return true;
}

std::vector<Value> Drafts::outputs_if_merged(int a, int b) const {
  a = find(a);
  b = find(b);
  std::vector<Value> out;
  for (int d : {a, b})
    for (Node* n : drafts_[d].nodes)
      for (int i = 0; i < n->num_results(); ++i) {
        bool outside = is_graph_output(n->result(i));
        for (const Use& u : n->result_info(i).uses) {
          int g = group(u.user);  // an unplaced reader comes later and is outside for now
          outside |= g != a && g != b;
        }
        if (outside) out.push_back(n->result(i));
      }
  return out;
}

std::vector<int> Drafts::consumers(int d) const {
  std::vector<int> out;
  for (Node* n : drafts_[d].nodes)
    for (int i = 0; i < n->num_results(); ++i)
      for (const Use& u : n->result_info(i).uses) {
        int g = group(u.user);
        if (g >= 0 && g != d && std::find(out.begin(), out.end(), g) == out.end()) out.push_back(g);
      }
  return out;
}

std::optional<int> Drafts::path_through_other(int a, int b) const {
  a = find(a);
  b = find(b);
  // Nodes not yet placed come later in program order than every placed node, so no path
  // between placed drafts runs through them.
  std::vector<int> stack;
  std::set<int> seen;
  for (int c : consumers(a))
    if (c != b && seen.insert(c).second) stack.push_back(c);
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    for (int c : consumers(x)) {
      if (c == b) return x;
      if (c != a && seen.insert(c).second) stack.push_back(c);
    }
  }
  return std::nullopt;
}

std::vector<int> Drafts::downstream(int d) const {
  d = find(d);
  std::vector<int> out, stack{d};
  std::set<int> seen{d};
  while (!stack.empty()) {
    int x = stack.back();
    stack.pop_back();
    for (int c : consumers(x))
      if (seen.insert(c).second) {
        out.push_back(c);
        stack.push_back(c);
      }
  }
  return out;
}

int Drafts::first_position(int d) const {
  int best = INT32_MAX;
  for (const Node* n : drafts_[d].nodes) best = std::min(best, pos_.at(n));
  return best;
}

std::vector<int> Drafts::execution_order() const {
  std::vector<int> live;
  for (int d = 0; d < static_cast<int>(drafts_.size()); ++d)
    if (drafts_[d].alive) live.push_back(d);
  std::unordered_map<int, int> pending;  // producers not yet ordered
  std::unordered_map<int, std::vector<int>> next;
  for (int d : live) pending[d] = 0;
  for (int d : live)
    for (int c : consumers(d)) {
      next[d].push_back(c);
      ++pending[c];
    }
  using Item = std::pair<int, int>;  // (first program position, draft)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> ready;
  for (int d : live)
    if (pending[d] == 0) ready.push({first_position(d), d});
  std::vector<int> order;
  while (!ready.empty()) {
    int d = ready.top().second;
    ready.pop();
    order.push_back(d);
    for (int c : next[d])
      if (--pending[c] == 0) ready.push({first_position(c), c});
  }
  KILN_INTERNAL_ASSERT(order.size() == live.size(), "the group graph is acyclic");
  return order;
}

}  // namespace kiln::fusion
