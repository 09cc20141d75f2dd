// The fusion plan made visible: group labels, the .kir text with one comment line per group,
// and the Graphviz drawing with one cluster per group.
#include <fmt/format.h>

#include "ir/dot.h"
#include "ir/printer.h"
#include "passes/fusion/fusion.h"
#include "passes/fusion/space.h"

namespace kiln::fusion {

std::string_view kernel_kind_name(KernelKind k) {
  switch (k) {
    case KernelKind::Pointwise: return "pointwise";
    case KernelKind::Reduction: return "reduction";
    case KernelKind::Matmul: return "matmul";
    case KernelKind::Scatter: return "scatter";
    case KernelKind::Alias: return "alias";
    case KernelKind::Constant: return "constant";
    case KernelKind::Opaque: return "opaque";
    case KernelKind::Collective: return "collective";
    case KernelKind::Attention: return "attention";
    case KernelKind::Sort: return "sort";
  }
  return "?";
}

namespace {

// "[amax, sub, exp, sum, div]", cut after a few ops: labels stay one readable line.
std::string op_list(const std::vector<Node*>& nodes) {
  constexpr size_t kShown = 8;
  std::string out = "[";
  for (size_t i = 0; i < nodes.size() && i < kShown; ++i) out += (i ? ", " : "") + std::string(nodes[i]->info().name);
  if (nodes.size() > kShown) out += fmt::format(", ... +{}", nodes.size() - kShown);
  return out + "]";
}

std::string value_list(const std::vector<Value>& values) {
  std::string out;
  for (const Value& v : values) out += (out.empty() ? "%" : ", %") + v.name();
  return out;
}

}  // namespace

std::string FusionGroup::label() const {
  return fmt::format("k{} {} {}", id, kernel_kind_name(kind), op_list(nodes));
}

int FusionPlan::num_kernels() const {
  int n = 0;
  for (const auto& g : groups) n += g.kind != KernelKind::Alias && g.folded_into < 0;
  return n;
}

std::string print_fused(const Graph& g, const FusionPlan& plan) {
  // The header and the return lines come from the plain printer so both forms agree.
  std::string plain = print_graph(g);
  size_t header_end = plain.find('\n') + 1;
  size_t tail_begin = plain.rfind("  return (");
  std::string out = plain.substr(0, header_end);
  for (const FusionGroup& grp : plan.groups) {
    std::string what = grp.kind == KernelKind::Alias ? "alias"
                       : grp.folded_into >= 0 && grp.kind == KernelKind::Reduction ? fmt::format("rows in the chunks of k{},", grp.folded_into)
                       : grp.folded_into >= 0    ? fmt::format("epilogue of k{},", grp.folded_into)
                                                 : "kernel";
    std::string space = grp.kind == KernelKind::Reduction
                            ? fmt::format("rows {} over {}", shape_str(grp.space), dims_str(grp.reduce_dims))
                            : fmt::format("space {}", shape_str(grp.space));
    if (grp.rows_of >= 0) space += fmt::format(" (with the rows of k{})", grp.rows_of);
    std::string outs = grp.outputs.empty() ? "" : " -> " + value_list(grp.outputs);
    out += fmt::format("  # {} k{} ({}): {} {}{}\n", what, grp.id, kernel_kind_name(grp.kind), space, op_list(grp.nodes),
                       outs);
    for (const Node* n : grp.nodes) out += "  " + print_node(*n) + "\n";
  }
  return out + plain.substr(tail_begin);
}

std::string fused_to_dot(const Graph& g, const FusionPlan& plan) {
  DotOptions options;
  for (const FusionGroup& grp : plan.groups) {
    options.clusters.push_back(DotCluster{fmt::format("k{}", grp.id), grp.label(), grp.kind == KernelKind::Alias});
    for (const Node* n : grp.nodes) options.cluster_of[n] = static_cast<int>(options.clusters.size()) - 1;
  }
  return to_dot(g, options);
}

}  // namespace kiln::fusion
