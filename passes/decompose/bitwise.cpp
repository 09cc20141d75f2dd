// bitwise_not: logical_not of a bool (~ on its 0/1 would be -1/-2, both true), else xor with all
// ones (two's complement ~x; the integer pointwise kernels compute in int64 and store back).
#include "passes/decompose/rules.h"

namespace kiln::decompositions {

namespace {

std::vector<Value> bitwise_not(DecompositionContext& c) {
  Builder& b = c.b;
  Var x = c.input(0);
  if (x.dtype() == DType::Bool) return {b.logical_not(x)};
  return {b.op(Op::BitwiseXor, {x, b.scalar(-1, x.dtype())})};
}

}  // namespace

void install_bitwise() { register_decomposition(Op::BitwiseNot, bitwise_not); }

}  // namespace kiln::decompositions
