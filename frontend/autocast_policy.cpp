// Autocast's table: one row per op it changes (frontend/autocast.h), like PyTorch's autocast
// lists (lower_precision_fp, fp32, promote). Changing a choice is changing one row.
#include <array>
#include <utility>

#include "frontend/autocast.h"

namespace kiln {
namespace {

constexpr std::array kRows = {
    // GEMMs: 16-bit inputs, f32 accumulation on tensor cores.
    std::pair{Op::Matmul, AutocastPolicy::LowerPrecision},
    std::pair{Op::Bmm, AutocastPolicy::LowerPrecision},
    std::pair{Op::Linear, AutocastPolicy::LowerPrecision},
    std::pair{Op::Addmm, AutocastPolicy::LowerPrecision},
    // (PyTorch's einsum reaches bmm, which autocast lowers; kiln's is one op until decomposed.)
    std::pair{Op::Einsum, AutocastPolicy::LowerPrecision},
    // Attention: 16-bit q, k and v on tensor cores, its softmax in f32 inside the kernel
    // (PyTorch's autocast lists scaled_dot_product_attention among its lower-precision ops too).
    std::pair{Op::ScaledDotProductAttention, AutocastPolicy::LowerPrecision},
    // Reductions and what overflows or loses digits in 16 bits: f32.
    std::pair{Op::Sum, AutocastPolicy::Float32},
    std::pair{Op::Mean, AutocastPolicy::Float32},
    std::pair{Op::Var, AutocastPolicy::Float32},
    std::pair{Op::Prod, AutocastPolicy::Float32},
    std::pair{Op::Softmax, AutocastPolicy::Float32},
    std::pair{Op::LogSoftmax, AutocastPolicy::Float32},
    std::pair{Op::LayerNorm, AutocastPolicy::Float32},
    std::pair{Op::CrossEntropy, AutocastPolicy::Float32},
    std::pair{Op::NllLoss, AutocastPolicy::Float32},
    std::pair{Op::Exp, AutocastPolicy::Float32},
    std::pair{Op::Log, AutocastPolicy::Float32},
    std::pair{Op::Log1p, AutocastPolicy::Float32},
    std::pair{Op::Pow, AutocastPolicy::Float32},
    std::pair{Op::Reciprocal, AutocastPolicy::Float32},
    std::pair{Op::Rsqrt, AutocastPolicy::Float32},
    // Ops that combine inputs: all floats to the widest of them.
    std::pair{Op::Add, AutocastPolicy::Promote},
    std::pair{Op::Sub, AutocastPolicy::Promote},
    std::pair{Op::Mul, AutocastPolicy::Promote},
    std::pair{Op::Div, AutocastPolicy::Promote},
    std::pair{Op::Maximum, AutocastPolicy::Promote},
    std::pair{Op::Minimum, AutocastPolicy::Promote},
    std::pair{Op::Eq, AutocastPolicy::Promote},
    std::pair{Op::Ne, AutocastPolicy::Promote},
    std::pair{Op::Lt, AutocastPolicy::Promote},
    std::pair{Op::Le, AutocastPolicy::Promote},
    std::pair{Op::Gt, AutocastPolicy::Promote},
    std::pair{Op::Ge, AutocastPolicy::Promote},
    std::pair{Op::Where, AutocastPolicy::Promote},
    std::pair{Op::Cat, AutocastPolicy::Promote},
    std::pair{Op::ScatterAdd, AutocastPolicy::Promote},
    std::pair{Op::Scatter, AutocastPolicy::Promote},
    std::pair{Op::ScatterReduce, AutocastPolicy::Promote},
    std::pair{Op::ScatterFold, AutocastPolicy::Promote},
};

}  // namespace

AutocastPolicy autocast_policy(Op op) {
  for (const auto& [row_op, policy] : kRows)
    if (row_op == op) return policy;
  return AutocastPolicy::None;
}

}  // namespace kiln
