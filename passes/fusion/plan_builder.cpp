#include "passes/fusion/plan_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <unordered_map>

#include "ir/log.h"
#include "passes/decompose.h"
#include "passes/fusion/column_partials.h"
#include "passes/fusion/matmul_epilogue.h"
#include "passes/fusion/rebuild.h"
#include "passes/fusion/space.h"

namespace kiln::fusion {

namespace {

KernelKind kind_of(const std::vector<Node*>& nodes) {
  bool all_creation = true, all_alias = true;
  bool reduction = false;
  for (const Node* n : nodes) {
    if (n->category() == OpCategory::Matmul) return KernelKind::Matmul;
    if (n->category() == OpCategory::Scatter) return KernelKind::Scatter;
    if (n->category() == OpCategory::Opaque) return KernelKind::Opaque;
    if (n->category() == OpCategory::Collective) return KernelKind::Collective;
    if (n->category() == OpCategory::Attention) return KernelKind::Attention;
    if (n->category() == OpCategory::Sort) return KernelKind::Sort;
    reduction |= n->category() == OpCategory::Reduction;
    all_creation &= is_creation(*n);
    all_alias &= is_alias_view(*n);
  }
  if (reduction) return KernelKind::Reduction;
  if (all_creation) return KernelKind::Constant;
  if (all_alias) return KernelKind::Alias;
  return KernelKind::Pointwise;
}

}  // namespace

FusionPlan build_plan(Graph& g_, const Drafts& drafts_, const std::vector<Note>& notes_, const FusionOptions& opt_) {
  std::vector<int> order = drafts_.execution_order();
  std::unordered_map<int, int> final_id;
  for (size_t i = 0; i < order.size(); ++i) final_id[order[i]] = static_cast<int>(i);

  std::vector<Node*> node_order;
  FusionPlan plan;
  for (int d : order) {
    FusionGroup grp;
    grp.id = final_id.at(d);
    grp.nodes = drafts_.nodes_in_order(d);
    node_order.insert(node_order.end(), grp.nodes.begin(), grp.nodes.end());
    plan.groups.push_back(std::move(grp));
  }
  for (auto& [d, text, subject] : notes_) {
    auto it = final_id.find(drafts_.find(d));
    if (it == final_id.end()) continue;  // a group a recompute left empty
    plan.groups[it->second].reasons.push_back(resolve_refs(text, [&](int draft) {
      auto f = final_id.find(drafts_.find(draft));
      return f == final_id.end() ? -1 : f->second;
    }));
  }

  if (node_order != g_.nodes()) {
    auto map = rebuild_in_order(g_, node_order);
    for (auto& grp : plan.groups)
      for (Node*& n : grp.nodes) n = map.at(n);
  }

  for (auto& grp : plan.groups)
    for (Node* n : grp.nodes) plan.group_of[n] = grp.id;
  std::set<std::pair<const Node*, int>> returned;
  for (const Value& v : g_.outputs()) returned.insert({v.node, v.index});
  for (auto& grp : plan.groups) {
    grp.kind = kind_of(grp.nodes);
    for (Node* n : grp.nodes) {
      for (Value v : n->inputs()) {
        auto it = plan.group_of.find(v.node);
        bool outside = it == plan.group_of.end() || it->second != grp.id;
        if (outside && std::find(grp.inputs.begin(), grp.inputs.end(), v) == grp.inputs.end()) grp.inputs.push_back(v);
      }
      for (int i = 0; i < n->num_results(); ++i) {
        bool read_outside = returned.count({n, i}) != 0;
        for (const Use& u : n->result_info(i).uses) read_outside |= plan.group_of.at(u.user) != grp.id;
        if (read_outside) grp.outputs.push_back(n->result(i));
      }
    }
    const Node* red = nullptr;
    for (const Node* n : grp.nodes)
      if (n->category() == OpCategory::Reduction) { red = n; break; }
    if (red) {
      grp.space = red->input(0).meta().shape;
      grp.reduce_dims = reduced_dims(*red);
    } else {
      grp.space = grp.outputs.empty() ? grp.nodes.back()->meta().shape : grp.outputs.front().meta().shape;
    }
  }

  if (opt_.matmul_epilogues) choose_matmul_epilogues(g_, plan);
  if (opt_.column_partials_in_rows) choose_rows_with_column_partials(g_, plan);

  if (log_enabled("fusion")) {
    log_line("fusion", fmt::format("graph {}: {} nodes -> {} kernels in {} groups", g_.name(), g_.num_nodes(),
                                   plan.num_kernels(), plan.groups.size()));
    for (auto& grp : plan.groups) {
      log_line("fusion", grp.label());
      for (auto& r : grp.reasons) log_line("fusion", fmt::format("  k{}: {}", grp.id, r));
    }
  }
  return plan;
}


}  // namespace kiln::fusion
