#include "passes/autograd/vjp.h"

#include <mutex>
#include <unordered_map>

#include "ir/error.h"
#include "passes/autograd/rules.h"

namespace kiln::autograd {

namespace {

// The table itself, and a once-only install of the built-in rules. Installers call
// register_vjp, which writes the table directly (re-entering call_once would deadlock).
std::unordered_map<Op, VjpRule>& table() {
  static std::unordered_map<Op, VjpRule> rules;
  return rules;
}
thread_local bool installing = false;

std::unordered_map<Op, VjpRule>& installed_table() {
  static std::once_flag once;
  std::call_once(once, [] {
    installing = true;
    install_pointwise_vjps();
    install_reduction_vjps();
    install_view_vjps();
    install_linalg_vjps();
    install_composite_vjps();
    install_activation_vjps();
    install_attention_vjps();
    install_collective_vjps();
    installing = false;
  });
  return table();
}

}  // namespace

void register_vjp(Op op, VjpRule rule) {
  auto& rules = installing ? table() : installed_table();
  if (!rules.emplace(op, std::move(rule)).second) fail("op '{}' already has a derivative rule", op_name(op));
}

const VjpRule* find_vjp(Op op) {
  auto& rules = installed_table();
  auto it = rules.find(op);
  return it == rules.end() ? nullptr : &it->second;
}

// Ops differentiated through their decompositions' parts: attention (its flash kernels have
// their own backward, chosen after), convolution and the pools (slices, cat and matmul, whose
// rules give the transposed convolution and the windows' scatter), rms_norm, group_norm,
// einsum (permutes, diagonals as strided slices, sums and matmuls) and scatter_reduce
// (scatter_add, where and scatter_fold, whose rule gives PyTorch's derivatives).
std::span<const Op> decomposed_before_differentiation() {
  static constexpr Op ops[] = {Op::ScaledDotProductAttention, Op::Convolution, Op::MaxPool, Op::AvgPool, Op::RmsNorm, Op::GroupNorm,
                               Op::Einsum, Op::ScatterReduce};
  return ops;
}

bool is_differentiable(Op op) {
  switch (op_info(op).category) {
    case OpCategory::Placeholder:
    case OpCategory::Creation:
      return false;
    default:
      break;
  }
  switch (op) {
    case Op::Eq: case Op::Ne: case Op::Lt: case Op::Le: case Op::Gt: case Op::Ge:
    case Op::LogicalNot: case Op::LogicalAnd: case Op::LogicalOr:
    case Op::BitwiseNot: case Op::BitwiseAnd: case Op::BitwiseOr: case Op::BitwiseXor:
    case Op::Sign: case Op::Argmax: case Op::Isnan: case Op::Isinf:
    // Piecewise constant: zero almost everywhere, as PyTorch's derivatives of them are.
    case Op::Floor: case Op::Ceil: case Op::Round: case Op::Trunc:
      return false;
    default:
      return true;
  }
}

}  // namespace kiln::autograd
