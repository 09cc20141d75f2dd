#include "passes/fusion/matmul_epilogue.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace kiln::fusion {

namespace {

struct Fold {
  MatmulEpilogue kind = MatmulEpilogue::None;
  Value bias, result;
};

// What the GEMM of `mm` can compute of `next` (the group right after it), or why not.
std::optional<Fold> epilogue_of(const Graph& g, const FusionPlan& plan, const Node* mm, const FusionGroup& next,
                                std::string& why) {
  const std::vector<Node*>& ns = next.nodes;
  if (ns.empty() || ns.size() > 2 || next.outputs.size() != 1) {
    why = "the group after it is not a bias add (and an activation) with one result";
    return std::nullopt;
  }
  Value mv{const_cast<Node*>(mm), 0};
  const TensorMeta& mo = mv.meta();
  // Folding is only right when the matmul's result is read by the add alone.
  if (mm->result_info(0).uses.size() != 1 || std::find(g.outputs().begin(), g.outputs().end(), mv) != g.outputs().end()) {
    why = fmt::format("%{} is read by more than the bias add", mv.name());
    return std::nullopt;
  }
  const Node* add = ns[0];
  if (add->op() != Op::Add || add->meta().dtype != mo.dtype || add->meta().shape != mo.shape || mo.rank() < 1) {
    why = fmt::format("%{} is not an add of the product's type", add->name());
    return std::nullopt;
  }
  Value other = add->input(0) == mv ? add->input(1) : add->input(1) == mv ? add->input(0) : Value{};
  if (!other || other == mv) {
    why = fmt::format("%{} does not add a bias to the product", add->name());
    return std::nullopt;
  }
  const TensorMeta& bm = other.meta();
  if (bm.dtype != mo.dtype || bm.shape != Shape{mo.shape.back()} || !bm.is_contiguous()) {
    why = fmt::format("the bias %{} is not a contiguous vector along the product's columns", other.name());
    return std::nullopt;
  }
  // The epilogue's bias runs along the GEMM's n. A matrix times a vector has no n in its
  // result, whose last dim is m: [6,3] @ [3] + b[6] added b along the wrong dim on the GPU
  // (found by kiln fuzz).
  if (mm->input(1).meta().rank() < 2) {
    why = "a matrix times a vector has no columns for a bias";
    return std::nullopt;
  }
  const bool materialized = other.node->is_input() || plan.groups[plan.group_of.at(other.node)].kind != KernelKind::Alias;
  if (!materialized || (!other.node->is_input() && plan.group_of.at(other.node) == next.id)) {
    why = fmt::format("the bias %{} is a view or computed in the same group: the GEMM reads a buffer", other.name());
    return std::nullopt;
  }
  Fold f;
  f.kind = MatmulEpilogue::Bias;
  if (ns.size() == 2) {
    const Node* act = ns[1];
    if (act->input(0) != Value{const_cast<Node*>(add), 0} || add->result_info(0).uses.size() != 1) {
      why = fmt::format("%{} is read by more than the activation", add->name());
      return std::nullopt;
    }
    f.kind = epilogue_activation(*act);
    if (f.kind == MatmulEpilogue::None) {
      why = fmt::format("%{} is not a ReLU or a tanh GELU (the epilogues the GEMM has)", act->name());
      return std::nullopt;
    }
  }
  f.bias = other;
  f.result = next.outputs[0];
  return f;
}

}  // namespace

MatmulEpilogue epilogue_activation(const Node& act) {
  if (act.op() == Op::Relu) return MatmulEpilogue::BiasRelu;
  if (act.op() == Op::Gelu && act.attrs().get_string("approximate") == "tanh") return MatmulEpilogue::BiasGelu;
  return MatmulEpilogue::None;
}

void choose_matmul_epilogues(const Graph& g, FusionPlan& plan) {
  for (size_t i = 0; i + 1 < plan.groups.size(); ++i) {
    FusionGroup& grp = plan.groups[i];
    FusionGroup& next = plan.groups[i + 1];
    if (grp.kind != KernelKind::Matmul || next.kind != KernelKind::Pointwise || next.folded_into >= 0) continue;
    const Node* mm = nullptr;
    for (const Node* n : grp.nodes)
      if (n->op() == Op::Matmul || n->op() == Op::Bmm) mm = n;
    if (!mm) continue;
    std::string why;
    std::optional<Fold> f = epilogue_of(g, plan, mm, next, why);
    if (!f) {
      grp.reasons.push_back(fmt::format("no epilogue: k{} stays a kernel: {}", next.id, why));
      continue;
    }
    grp.epilogue = f->kind;
    grp.epilogue_bias = f->bias;
    grp.epilogue_result = f->result;
    next.folded_into = grp.id;
    grp.reasons.push_back(fmt::format("epilogue {}: the GEMM adds %{} and writes %{}: k{} folded in", matmul_epilogue_name(f->kind),
                                      f->bias.name(), f->result.name(), next.id));
    next.reasons.push_back(fmt::format("folded into the GEMM of k{} as its epilogue", grp.id));
  }
}

std::string_view matmul_epilogue_name(MatmulEpilogue e) {
  switch (e) {
    case MatmulEpilogue::None: return "none";
    case MatmulEpilogue::Bias: return "bias";
    case MatmulEpilogue::BiasRelu: return "bias+relu";
    case MatmulEpilogue::BiasGelu: return "bias+gelu_tanh";
  }
  return "?";
}

}  // namespace kiln::fusion
