// Attention's ops: shape rules (and their errors), the reference of scaled_dot_product_attention
// against a hand-computed case and against the written-out formula, flash_attention's output and
// log-sum-exp against sdpa's and logsumexp's references, and the print/parse round trips.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/reference/reference.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::F;
using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::run1;
using testing::T;
using testing::vals;

TEST(OpsAttention, ShapeRules) {
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {F({2, 3, 4}), F({2, 5, 3}), F({2, 5, 4})}, Attrs{}, "features (4) and key's (3)"));
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {F({2, 3, 4}), F({2, 5, 4}), F({2, 6, 4})}, Attrs{}, "key has 5 positions and value 6"));
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {F({4}), F({5, 4}), F({5, 4})}, Attrs{}, "at least 2 dims"));
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {T(DType::I64, {3, 4}), T(DType::I64, {5, 4}), T(DType::I64, {5, 4})}, Attrs{},
                         "floating-point"));
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {F({3, 4}), F({5, 4}), F({5, 4}), T(DType::Bool, {3, 5})},
                         Attrs{{"is_causal", true}}, "not both"));
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {F({3, 4}), F({5, 4}), F({5, 4}), T(DType::I64, {3, 5})}, Attrs{}, "attn_mask must be bool"));
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {F({3, 4}), F({5, 4}), F({5, 4}), F({4, 5})}, Attrs{}, "do not broadcast"));
  EXPECT_TRUE(meta_fails(Op::ScaledDotProductAttention, {F({3, 4}), F({5, 4}), F({5, 4})}, Attrs{{"dropout_p", 1.5}}, "dropout_p"));
  EXPECT_TRUE(meta_fails(Op::FlashAttention, {F({2, 3, 4}), F({1, 5, 4}), F({2, 5, 4})}, Attrs{}, "equal batch dims"));
  // Batch dims broadcast for sdpa; flash_attention's log-sum-exp is f32 (f64 for f64).
  EXPECT_EQ(one_node_round_trip(Op::ScaledDotProductAttention, {F({2, 1, 3, 4}), F({1, 6, 5, 4}), F({5, 7})}),
            "%y = scaled_dot_product_attention(%x0, %x1, %x2) : f32[2,6,3,7]");
  EXPECT_EQ(one_node_round_trip(Op::FlashAttention, {F({2, 3, 4}), F({2, 5, 4}), F({2, 5, 6})}),
            "%y, %y_1 = flash_attention(%x0, %x1, %x2) : f32[2,3,6], f32[2,3]");
  EXPECT_EQ(one_node_round_trip(Op::FlashAttentionBackward,
                                {F({3, 6}), F({3, 4}), F({5, 4}), F({5, 6}), F({3}), F({3})}),
            "%y, %y_1, %y_2 = flash_attention_backward(%x0, %x1, %x2, %x3, %x4, %x5) : f32[3,4], f32[5,4], f32[5,6]");
}

// One query, two keys: weights softmax([1, 0] * scale).
TEST(OpsAttention, ReferenceAgainstHandComputedWeights) {
  HostTensor q = make(DType::F64, {1, 2}, {1, 0}), k = make(DType::F64, {2, 2}, {1, 0, 0, 1}), v = make(DType::F64, {2, 1}, {10, 20});
  double w0 = std::exp(0.5) / (std::exp(0.5) + 1.0);
  std::vector<double> y = vals(run1(Op::ScaledDotProductAttention, {q, k, v}, {{"scale", 0.5}}));
  ASSERT_EQ(y.size(), 1u);
  EXPECT_NEAR(y[0], 10 * w0 + 20 * (1 - w0), 1e-12);
  // Causal: the first query sees the first key only; the default scale is 1/sqrt(2).
  HostTensor q2 = make(DType::F64, {2, 2}, {1, 0, 0, 1});
  std::vector<double> yc = vals(run1(Op::ScaledDotProductAttention, {q2, k, v}, {{"is_causal", true}}));
  double w1 = 1.0 / (1.0 + std::exp(1.0 / std::sqrt(2.0)));
  EXPECT_NEAR(yc[0], 10, 1e-12);
  EXPECT_NEAR(yc[1], 10 * w1 + 20 * (1 - w1), 1e-12);
  // A query that attends to no key (every key masked) gets zeros, not NaN.
  HostTensor none = make(DType::Bool, {2, 2}, {0, 0, 1, 1});
  std::vector<double> ym = vals(run1(Op::ScaledDotProductAttention, {q2, k, v, none}));
  EXPECT_EQ(ym[0], 0);
  EXPECT_NEAR(ym[1], 10 * w1 + 20 * (1 - w1), 1e-12);  // the second attends both keys
}

TEST(OpsAttention, FlashAttentionAgreesWithSdpaAndLogsumexp) {
  HostTensor q = random_tensor(TensorMeta(DType::F64, {2, 5, 3}), 1), k = random_tensor(TensorMeta(DType::F64, {2, 7, 3}), 2),
             v = random_tensor(TensorMeta(DType::F64, {2, 7, 4}), 3);
  for (bool causal : {false, true}) {
    std::vector<HostTensor> fa = run_reference(Op::FlashAttention, std::vector<HostTensor>{q, k, v}, Attrs{{"is_causal", causal}, {"scale", 0.7}});
    HostTensor want = run1(Op::ScaledDotProductAttention, {q, k, v}, {{"is_causal", causal}, {"scale", 0.7}});
    EXPECT_TRUE(testing::tensors_close(fa[0], want, 1e-12, 1e-12));
    EXPECT_EQ(fa[1].dtype(), DType::F64);
    // lse of row (b, i): logsumexp over the scaled scores it attends to.
    HostTensor s = run1(Op::Mul, {run1(Op::Matmul, {q, run1(Op::Transpose, {k}, {{"dim0", int64_t{1}}, {"dim1", int64_t{2}}})}),
                                  HostTensor::scalar(DType::F64, 0.7)});
    if (causal) s = run1(Op::MaskedFill, {s, run1(Op::Triu, {}, {{"size", IntList{5, 7}}, {"diagonal", int64_t{1}}, {"dtype", DType::Bool}})},
                         {{"value", -std::numeric_limits<double>::infinity()}});
    EXPECT_TRUE(testing::tensors_close(fa[1], run1(Op::Logsumexp, {s}, {{"dim", IntList{-1}}}), 1e-12, 1e-12));
  }
  // No keys: zeros and -inf.
  std::vector<HostTensor> empty = run_reference(Op::FlashAttention, std::vector<HostTensor>{q, HostTensor::empty(DType::F64, {2, 0, 3}), HostTensor::empty(DType::F64, {2, 0, 4})}, Attrs{});
  EXPECT_EQ(vals(empty[0]), std::vector<double>(2 * 5 * 4, 0.0));
  EXPECT_EQ(vals(empty[1]), std::vector<double>(10, -std::numeric_limits<double>::infinity()));
}

}  // namespace
}  // namespace kiln
