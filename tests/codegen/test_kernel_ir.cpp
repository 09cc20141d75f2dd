// The kernel IR: construction, printing, the generic walkers and the index simplifier.
#include <gtest/gtest.h>

#include "codegen/kernel_ir.h"
#include "codegen/simplify.h"

namespace kiln::codegen {
namespace {

std::string s(const ExprPtr& e) { return print_expr(simplify(e)); }

TEST(KernelIR, PrintsExpressionsWithFewestParentheses) {
  ExprPtr i = var("i", 0, 32), p = var("p", 0, 6);
  EXPECT_EQ(print_expr(add(mul(p, imm(33)), i)), "p*33 + i");
  EXPECT_EQ(print_expr(mul(add(p, imm(1)), imm(2))), "(p + 1)*2");
  EXPECT_EQ(print_expr(mul(mod(i, imm(7)), imm(16))), "(i % 7)*16");
  EXPECT_EQ(print_expr(sub(p, sub(i, imm(1)))), "p - (i - 1)");
  ExprPtr x = load("b0", DType::F16, i);
  EXPECT_EQ(print_expr(call("exp", DType::F32, {cast(DType::F32, x)})), "exp(f32(b0[i]))");
  EXPECT_EQ(print_expr(select(imm(DType::Bool, 1), imm(DType::F32, 1.5), imm(DType::F32, -0.0))), "select(true, 1.5, -0.0)");
  EXPECT_EQ(cast(DType::F16, x), x);  // no cast to the same dtype
}

TEST(KernelIR, PrintsKernels) {
  Kernel k;
  k.name = "k0";
  k.comment = "group 0 pointwise [exp]";
  k.buffers = {{"b0", DType::F32, BufferRole::Output, 231, {}, "%y"}, {"b1", DType::F32, BufferRole::Input, 231, {}, "%x"}};
  ExprPtr p = var("p", 0, 6), i = var("i", 0, 32);
  ExprPtr at = add(mul(p, imm(33)), i);
  k.body = block({decl_acc("acc", DType::F32, CombineOp::Sum),
                  for_loop("p", 7, LoopKind::Parallel,
                           {for_loop("i", 33, LoopKind::Parallel,
                                     {let("e", call("exp", DType::F32, {load("b1", DType::F32, at)})),
                                      store("b0", at, value_var("e", DType::F32)), accumulate("acc", CombineOp::Sum, value_var("e", DType::F32))})},
                           "computes %y")});
  EXPECT_EQ(print_kernel(k),
            "kernel k0(b0: f32[231] output %y, b1: f32[231] input %x)  # group 0 pointwise [exp] {\n"
            "  acc acc: f32 = sum.identity\n"
            "  parallel for p in 0..7 {  # computes %y\n"
            "    parallel for i in 0..33 {\n"
            "      e: f32 = exp(b1[p*33 + i])\n"
            "      b0[p*33 + i] = e\n"
            "      acc <sum>= e\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(KernelIR, WalkersVisitAndRewriteEveryNode) {
  ExprPtr i = var("i", 0, 9);
  ExprPtr e = call("add", DType::F32, {load("b0", DType::F32, i), load("b1", DType::F32, add(i, imm(1)))});
  int loads = 0;
  visit(e, [&](const Expr& x) { loads += x.kind == ExprKind::Load; });
  EXPECT_EQ(loads, 2);
  ExprPtr r = rewrite(e, [](const ExprPtr& x) { return x->kind == ExprKind::Var ? var("j", 0, 9) : x; });
  EXPECT_EQ(print_expr(r), "add(b0[j], b1[j + 1])");
  EXPECT_EQ(print_expr(e), "add(b0[i], b1[i + 1])");  // the original is untouched
  StmtPtr st = for_loop("i", 10, LoopKind::Ordered, {store("b2", i, e)});
  StmtPtr st2 = rewrite_exprs(st, [](const ExprPtr& x) { return x->kind == ExprKind::Load ? imm(DType::F32, 0) : x; });
  EXPECT_EQ(print_stmt(st2), "ordered for i in 0..10 {\n  b2[i] = add(0.0, 0.0)\n}\n");
}

TEST(Simplifier, FoldsConstantsAndIdentities) {
  ExprPtr x = var("x", 0, 100);
  EXPECT_EQ(s(add(mul(imm(3), imm(4)), imm(2))), "14");
  EXPECT_EQ(s(add(mul(x, imm(1)), imm(0))), "x");
  EXPECT_EQ(s(mul(x, imm(0))), "0");
  EXPECT_EQ(s(sub(add(x, imm(5)), imm(5))), "x");
  EXPECT_EQ(s(add(mul(add(x, imm(1)), imm(2)), x)), "x*3 + 2");
  EXPECT_EQ(s(cast(DType::F32, imm(3))), "3.0");
}

TEST(Simplifier, DividesOutMultiplesAndUsesRanges) {
  ExprPtr p = var("p", 0, 6), i = var("i", 0, 32), n = var("n", 0, 1000000);
  EXPECT_EQ(s(floordiv(mul(n, imm(8)), imm(8))), "n");              // (a*c)/c
  EXPECT_EQ(s(floordiv(add(mul(p, imm(33)), i), imm(33))), "p");    // i < 33
  EXPECT_EQ(s(mod(add(mul(p, imm(33)), i), imm(33))), "i");
  EXPECT_EQ(s(mod(i, imm(64))), "i");                                // already in range
  EXPECT_EQ(s(floordiv(i, imm(64))), "0");
  EXPECT_EQ(s(floordiv(floordiv(n, imm(3)), imm(11))), "n / 33");    // nested floordiv
  EXPECT_EQ(s(mod(mod(n, imm(12)), imm(4))), "n % 4");               // nested mod
  EXPECT_EQ(s(floordiv(add(mul(n, imm(6)), imm(4)), imm(3))), "n*2 + 1");
  EXPECT_EQ(s(min(i, imm(100))), "i");
  EXPECT_EQ(s(max(i, imm(-1))), "i");
}

// A sum of a multiple of g and a remainder below g, divided by a multiple of g: the remainder
// drops out of the quotient and stays whole in the modulus. Cross-entropy's row over a [4,
// 2048, 32000] logits view: ((row*32000 + r) / 65536000)*65536000 + (row % 2048)*32000 + r
// is row*32000 + r, which the row loop then reads as vectors.
TEST(Simplifier, DropsARemainderBelowACommonFactor) {
  ExprPtr row = var("row", 0, 8191), r = var("r", 0, 31999), x = var("x", -50, 50);
  ExprPtr flat = add(mul(row, imm(32000)), r);
  EXPECT_EQ(s(floordiv(flat, imm(65536000))), "row / 2048");
  EXPECT_EQ(s(mod(flat, imm(65536000))), "(row % 2048)*32000 + r");
  EXPECT_EQ(s(add(add(mul(floordiv(flat, imm(65536000)), imm(65536000)), mul(mod(row, imm(2048)), imm(32000))), r)), "row*32000 + r");
  EXPECT_EQ(s(floordiv(add(mul(x, imm(4)), imm(3)), imm(8))), "x / 2");  // floor, also below 0
  // A remainder that can reach the factor keeps the division.
  EXPECT_EQ(s(floordiv(add(mul(row, imm(32000)), add(r, imm(1))), imm(64000))), "(row*32000 + r + 1) / 64000");
}

TEST(Simplifier, MergesUnraveledIndicesBackIntoOneVar) {
  ExprPtr p = var("p", 0, 230), n = var("n", 0, 1000000), i = var("i", 0, 1022);
  // p unraveled over [7, 33] and raveled with contiguous strides of [7, 33, 1023]:
  ExprPtr d0 = mod(floordiv(p, imm(33)), imm(7)), d1 = mod(p, imm(33));
  EXPECT_EQ(s(add(add(mul(d0, imm(33 * 1023)), mul(d1, imm(1023))), i)), "p*1023 + i");
  // Without a bound on n the outer piece keeps its mod.
  ExprPtr e0 = mod(floordiv(n, imm(33)), imm(7)), e1 = mod(n, imm(33));
  EXPECT_EQ(s(add(mul(e0, imm(33)), e1)), "n % 231");
  EXPECT_EQ(s(add(mul(floordiv(n, imm(33)), imm(33)), e1)), "n");
}

// Adjacent digits of one variable merge into one, also above the lowest: the index a reshape of
// [2,16,4,32,2] sliced at its last dim leaves, (i / 4096)*4096 + (i / 256 % 16)*256 +
// (i / 64 % 4)*64 + (i / 2 % 32)*2, is (i / 2)*2; digits that do not meet stay apart.
TEST(Simplifier, MergesAdjacentDigitsAboveTheLowest) {
  ExprPtr i = var("i", 0, 8191);
  auto digit = [&](int64_t d, int64_t m) { return mod(floordiv(i, imm(d)), imm(m)); };
  ExprPtr pair = add(add(add(mul(floordiv(i, imm(4096)), imm(4096)), mul(digit(256, 16), imm(256))), mul(digit(64, 4), imm(64))),
                     mul(digit(2, 32), imm(2)));
  EXPECT_EQ(s(pair), "(i / 2)*2");
  EXPECT_EQ(s(add(pair, imm(1))), "(i / 2)*2 + 1");
  // Without the top digit: (i / 2 % 2048)*2.
  EXPECT_EQ(s(add(add(mul(digit(256, 16), imm(256)), mul(digit(64, 4), imm(64))), mul(digit(2, 32), imm(2)))), "(i / 2 % 2048)*2");
  // A gap (64 is not 2 * 16) or another scale keeps the digits apart.
  EXPECT_EQ(s(add(mul(digit(64, 4), imm(64)), mul(digit(2, 16), imm(2)))), "(i / 64 % 4)*64 + (i / 2 % 16)*2");
  EXPECT_EQ(s(add(mul(digit(64, 4), imm(128)), mul(digit(2, 32), imm(2)))), "(i / 64 % 4)*128 + (i / 2 % 32)*2");
}

// Comparisons of index values that their ranges decide fold to constants (from the range of
// the difference, so i + 1 > i holds for any i), and the selects and logical ops over them
// with them; undecided ones stay.
TEST(Simplifier, DecidesComparisonsByRanges) {
  ExprPtr i = var("i", 0, 63), j = var("j", 64, 127), n = var("n", 0, 1000000);
  auto cmp = [](const char* op, ExprPtr a, ExprPtr b) { return call(op, DType::Bool, {std::move(a), std::move(b)}); };
  EXPECT_EQ(s(cmp("lt", i, imm(64))), "true");
  EXPECT_EQ(s(cmp("lt", i, imm(63))), "lt(i, 63)");
  EXPECT_EQ(s(cmp("ge", i, imm(64))), "false");
  EXPECT_EQ(s(cmp("lt", i, j)), "true");
  EXPECT_EQ(s(cmp("ge", j, add(i, imm(1)))), "true");
  EXPECT_EQ(s(cmp("gt", add(n, imm(1)), n)), "true");
  EXPECT_EQ(s(cmp("eq", sub(add(n, imm(3)), n), imm(3))), "true");
  EXPECT_EQ(s(cmp("ne", i, j)), "true");
  EXPECT_EQ(s(cmp("le", n, imm(5))), "le(n, 5)");
  // A cat's pick inside its first input's range is that input's load.
  ExprPtr pick = select(cmp("lt", i, imm(64)), load("b1", DType::F32, i), load("b2", DType::F32, sub(i, imm(64))));
  EXPECT_EQ(s(pick), "b1[i]");
  EXPECT_EQ(s(call("logical_and", DType::Bool, {cmp("lt", i, imm(64)), cmp("lt", n, imm(7))})), "lt(n, 7)");
  EXPECT_EQ(s(call("logical_or", DType::Bool, {cmp("lt", n, imm(7)), cmp("lt", i, imm(64))})), "true");
  EXPECT_EQ(s(call("logical_and", DType::Bool, {cmp("lt", n, imm(7)), cmp("ge", i, imm(64))})), "false");
}

TEST(Simplifier, KeepsLoadsAndCallsAsAtoms) {
  ExprPtr i = var("i", 0, 9);
  ExprPtr g = call("check_index", DType::I64, {load("b1", DType::I64, add(i, imm(0))), imm(10), imm(0)});
  EXPECT_EQ(s(add(mul(g, imm(4)), mul(i, imm(1)))), "check_index(b1[i], 10, 0)*4 + i");
  EXPECT_EQ(s(select(imm(DType::Bool, 0), imm(DType::F32, 1), load("b0", DType::F32, mul(i, imm(1))))), "b0[i]");
}

}  // namespace
}  // namespace kiln::codegen
