// Derivatives of attention against float64 finite differences: scaled_dot_product_attention
// through flash_attention (causal or not, odd sizes, no keys) and through the written-out form
// (bool and additive masks, dropout, broadcast batch dims); flash_attention with its log-sum-exp
// used too; and what training saves for attention (the output and one number per query).
#include <gtest/gtest.h>

#include "ir/builder.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::gradcheck_values;

namespace {

HostTensor rnd(const Shape& s, uint64_t seed) { return random_tensor(TensorMeta(DType::F64, s), seed); }

TEST(RulesAttention, SdpaThroughTheFlashPrimitives) {
  for (bool causal : {false, true}) {
    EXPECT_TRUE(gradcheck_values(Op::ScaledDotProductAttention, {rnd({2, 5, 3}, 1), rnd({2, 7, 3}, 2), rnd({2, 7, 4}, 3)},
                                 Attrs{{"is_causal", causal}}));
    EXPECT_TRUE(gradcheck_values(Op::ScaledDotProductAttention, {rnd({2, 2, 7, 4}, 4), rnd({2, 2, 3, 4}, 5), rnd({2, 2, 3, 2}, 6)},
                                 Attrs{{"is_causal", causal}, {"scale", 0.3}}));
  }
  EXPECT_TRUE(gradcheck_values(Op::ScaledDotProductAttention, {rnd({1, 1}, 7), rnd({1, 1}, 8), rnd({1, 1}, 9)}));
}

TEST(RulesAttention, SdpaThroughTheWrittenOutForm) {
  HostTensor keep = random_tensor(TensorMeta(DType::Bool, {5, 6}), 10, 2);
  for (int64_t i = 0; i < 5; ++i) keep.set_int(i * 6, 1);  // every query attends somewhere
  EXPECT_TRUE(gradcheck_values(Op::ScaledDotProductAttention, {rnd({2, 5, 3}, 11), rnd({2, 6, 3}, 12), rnd({2, 6, 4}, 13), keep}));
  EXPECT_TRUE(gradcheck_values(Op::ScaledDotProductAttention, {rnd({2, 5, 3}, 14), rnd({1, 6, 3}, 15), rnd({6, 4}, 16), rnd({5, 6}, 17)},
                               Attrs{{"dropout_p", 0.3}, {"seed", int64_t{4}}}));
}

TEST(RulesAttention, FlashAttentionWithItsLogSumExpUsed) {
  Graph g("flash");
  Builder b(g);
  Value q = g.add_input("q", TensorMeta(DType::F64, {2, 4, 3})), k = g.add_input("k", TensorMeta(DType::F64, {2, 5, 3})),
        v = g.add_input("v", TensorMeta(DType::F64, {2, 5, 2}));
  std::vector<Var> fa = b.op_n(Op::FlashAttention, {q, k, v}, Attrs{{"is_causal", true}, {"scale", 0.5}});
  g.set_outputs({b.sum(fa[0]) + b.sum(b.square(fa[1]))});
  EXPECT_TRUE(kiln::testing::gradcheck_graph(g, {rnd({2, 4, 3}, 1), rnd({2, 5, 3}, 2), rnd({2, 5, 2}, 3)}));
}

// Training saves q, k, v, the output and the log-sum-exp: O(L) beyond the inputs, no [L, S].
TEST(RulesAttention, TrainingSavesNoScoreMatrix) {
  Graph g("attn");
  Builder b(g);
  Value q = g.add_input("q", TensorMeta(DType::F32, {2, 4, 64, 16})), k = g.add_input("k", TensorMeta(DType::F32, {2, 4, 64, 16})),
        v = g.add_input("v", TensorMeta(DType::F32, {2, 4, 64, 16}));
  g.set_outputs({b.sum(b.op(Op::ScaledDotProductAttention, {q, k, v}, Attrs{{"is_causal", true}}))});
  for (auto kind : {autograd::PartitionKind::Default, autograd::PartitionKind::MinCut}) {
    autograd::Partition p = autograd::partition(autograd::build_joint(g), kind);
    for (const autograd::SavedTensor& s : p.saved) EXPECT_LT(s.meta.numel(), 2 * 4 * 64 * 64) << s.name << " " << s.meta.str();
    EXPECT_LE(p.saved_bytes, 4 * (2 * 4 * 64 * 16 + 2 * 4 * 64) * 4);
  }
}

}  // namespace
