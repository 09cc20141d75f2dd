// Composite ops: shape rules (and their errors), reference kernels against values worked out
// by hand (softmax of [0, ln 2, ln 5] is [1/8, 2/8, 5/8]; cross entropy of uniform logits is
// ln C; ...) and the print/parse round trip of each op.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/random.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::F;
using testing::I;
using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::run1;
using testing::run_fails;
using testing::tensors_close;
using testing::vals;
const double kInf = std::numeric_limits<double>::infinity();
const double ln2 = std::log(2.0), ln5 = std::log(5.0);

HostTensor f32(const Shape& s, std::vector<double> v) { return make(DType::F32, s, std::move(v)); }
HostTensor f64(const Shape& s, std::vector<double> v) { return make(DType::F64, s, std::move(v)); }
HostTensor i64(const Shape& s, std::vector<double> v) { return make(DType::I64, s, std::move(v)); }

TEST(OpsComposite, TrilTriuOfTensors) {
  HostTensor x = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(vals(run1(Op::Tril, {x})), (std::vector<double>{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(vals(run1(Op::Tril, {x}, {{"diagonal", int64_t{-1}}})), (std::vector<double>{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  EXPECT_EQ(vals(run1(Op::Triu, {x}, {{"diagonal", int64_t{1}}})), (std::vector<double>{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  // A batch of wide matrices, exact for i64, and a strided (transposed) input.
  HostTensor b = i64({2, 2, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12});
  HostTensor ub = run1(Op::Triu, {b});
  EXPECT_EQ(ub.dtype(), DType::I64);
  EXPECT_EQ(ub.to_ints(), (std::vector<int64_t>{1, 2, 3, 0, 5, 6, 7, 8, 9, 0, 11, 12}));
  HostTensor xt = run1(Op::Transpose, {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  EXPECT_EQ(vals(run1(Op::Tril, {xt})), (std::vector<double>{1, 0, 0, 2, 5, 0, 3, 6, 9}));
  EXPECT_EQ(run1(Op::Tril, {HostTensor::empty(DType::F32, {0, 3})}).shape(), (Shape{0, 3}));
  EXPECT_TRUE(meta_fails(Op::Tril, {F({3})}, {}, "at least 2 dims"));
  EXPECT_TRUE(meta_fails(Op::Triu, {F({3, 3})}, {{"size", IntList{3, 3}}}, "not both"));
  EXPECT_EQ(one_node_round_trip(Op::Tril, {F({2, 4, 4})}, {{"diagonal", int64_t{1}}}), "%y = tril(%x0, diagonal=1) : f32[2,4,4]");
}

TEST(OpsComposite, TrilTriuOfSize) {
  HostTensor lower = run1(Op::Tril, {}, {{"size", IntList{2, 3}}});
  EXPECT_EQ(lower.dtype(), DType::F32);
  EXPECT_EQ(vals(lower), (std::vector<double>{1, 0, 0, 1, 1, 0}));
  // Ones where col - row >= -1.
  HostTensor upper = run1(Op::Triu, {}, {{"size", IntList{3, 2}}, {"diagonal", int64_t{-1}}, {"dtype", DType::I64}});
  EXPECT_EQ(upper.dtype(), DType::I64);
  EXPECT_EQ(upper.to_ints(), (std::vector<int64_t>{1, 1, 1, 1, 0, 1}));
  EXPECT_TRUE(meta_fails(Op::Tril, {}, {}, "give an input tensor or size="));
  EXPECT_TRUE(meta_fails(Op::Tril, {}, {{"size", IntList{3}}}, "needs at least 2 dims"));
  EXPECT_EQ(one_node_round_trip(Op::Triu, {}, {{"size", IntList{4, 4}}, {"dtype", DType::Bool}}),
            "%y = triu(size=[4,4], dtype=bool) : bool[4,4]");
}

TEST(OpsComposite, Softmax) {
  HostTensor x = f64({3}, {0, ln2, ln5});
  EXPECT_TRUE(tensors_close(run1(Op::Softmax, {x}, {{"dim", int64_t{0}}}), f64({3}, {0.125, 0.25, 0.625}), 1e-15, 0));
  EXPECT_TRUE(tensors_close(run1(Op::LogSoftmax, {x}, {{"dim", int64_t{-1}}}),
                            f64({3}, {-3 * ln2, -2 * ln2, ln5 - 3 * ln2}), 1e-15, 0));
  // Along dim 0 of a [3,2]: column 0 is [0, ln 2, ln 5], column 1 is constant.
  HostTensor m = f32({3, 2}, {0, 7, ln2, 7, ln5, 7});
  EXPECT_TRUE(tensors_close(run1(Op::Softmax, {m}, {{"dim", int64_t{0}}}),
                            f32({3, 2}, {0.125, 1.0 / 3, 0.25, 1.0 / 3, 0.625, 1.0 / 3})));
  // Stable for huge logits; -inf entries get probability 0; a row of -inf gives nan (PyTorch).
  HostTensor edge = f32({3, 2}, {1000, 1000, -kInf, 0, -kInf, -kInf});
  Attrs last{{"dim", int64_t{1}}};
  EXPECT_TRUE(tensors_close(run1(Op::Softmax, {edge}, last), f32({3, 2}, {0.5, 0.5, 0, 1, NAN, NAN})));
  EXPECT_TRUE(tensors_close(run1(Op::LogSoftmax, {edge}, last), f32({3, 2}, {-ln2, -ln2, -kInf, 0, NAN, NAN})));
  // dtype= casts first: integers become probabilities.
  HostTensor cast = run1(Op::Softmax, {i64({2}, {3, 3})}, {{"dim", int64_t{0}}, {"dtype", DType::F64}});
  EXPECT_EQ(cast.dtype(), DType::F64);
  EXPECT_EQ(vals(cast), (std::vector<double>{0.5, 0.5}));
  EXPECT_EQ(vals(run1(Op::Softmax, {f32({}, {5})}, {{"dim", int64_t{0}}})), (std::vector<double>{1}));
  EXPECT_TRUE(meta_fails(Op::Softmax, {F({2, 3})}, {{"dim", int64_t{2}}}, "out of range"));
  EXPECT_TRUE(meta_fails(Op::LogSoftmax, {I({2, 3})}, {{"dim", int64_t{1}}}, "floating-point"));
  EXPECT_EQ(one_node_round_trip(Op::Softmax, {F({8, 600})}, {{"dim", int64_t{-1}}}), "%y = softmax(%x0, dim=-1) : f32[8,600]");
  EXPECT_EQ(one_node_round_trip(Op::LogSoftmax, {TensorMeta(DType::F16, {4})}, {{"dim", int64_t{0}}, {"dtype", DType::F32}}),
            "%y = log_softmax(%x0, dim=0, dtype=f32) : f32[4]");
}

TEST(OpsComposite, LayerNorm) {
  // Row [0, 2]: mean 1, biased variance 1.
  HostTensor x = f64({2}, {0, 2});
  EXPECT_EQ(vals(run1(Op::LayerNorm, {x}, {{"normalized_shape", IntList{2}}, {"eps", 0.0}})), (std::vector<double>{-1, 1}));
  EXPECT_EQ(vals(run1(Op::LayerNorm, {x}, {{"normalized_shape", IntList{2}}, {"eps", 3.0}})), (std::vector<double>{-0.5, 0.5}));
  HostTensor wb = run1(Op::LayerNorm, {x, f64({2}, {2, 3}), f64({2}, {1, -1})}, {{"normalized_shape", IntList{2}}, {"eps", 0.0}});
  EXPECT_EQ(vals(wb), (std::vector<double>{-1, 2}));
  EXPECT_EQ(vals(run1(Op::LayerNorm, {x, f64({2}, {2, 3})}, {{"normalized_shape", IntList{2}}, {"eps", 0.0}})),
            (std::vector<double>{-2, 3}));
  // Over the last two dims, default eps; a constant row normalizes to 0.
  HostTensor x3 = f32({2, 2, 2}, {0, 2, 0, 2, 1, 1, 1, 1});
  double s = 1 / std::sqrt(1 + 1e-5);
  EXPECT_TRUE(tensors_close(run1(Op::LayerNorm, {x3}, {{"normalized_shape", IntList{2, 2}}}),
                            f32({2, 2, 2}, {-s, s, -s, s, 0, 0, 0, 0})));
  EXPECT_TRUE(meta_fails(Op::LayerNorm, {F({2, 3})}, {{"normalized_shape", IntList{2}}}, "must match the input's last dims"));
  EXPECT_TRUE(meta_fails(Op::LayerNorm, {F({2, 3}), F({2})}, {{"normalized_shape", IntList{3}}}, "weight has shape [2]"));
  EXPECT_TRUE(meta_fails(Op::LayerNorm, {I({2, 3})}, {{"normalized_shape", IntList{3}}}, "floating-point"));
  EXPECT_EQ(one_node_round_trip(Op::LayerNorm, {F({2, 4}), F({4}), F({4})}, {{"normalized_shape", IntList{4}}}),
            "%y = layer_norm(%x0, %x1, %x2, normalized_shape=[4]) : f32[2,4]");
  one_node_round_trip(Op::LayerNorm, {F({2, 4})}, {{"normalized_shape", IntList{4}}, {"eps", 1e-6}});
}

TEST(OpsComposite, Embedding) {
  HostTensor w = f32({3, 2}, {0, 1, 10, 11, 20, 21});
  HostTensor out = run1(Op::Embedding, {w, i64({2, 2}, {2, 0, 1, 2})});
  EXPECT_EQ(out.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(vals(out), (std::vector<double>{20, 21, 0, 1, 10, 11, 20, 21}));
  // A 0-d i32 index gives one row; padding_idx does not change the forward.
  HostTensor row = run1(Op::Embedding, {w, make(DType::I32, {}, {1})}, {{"padding_idx", int64_t{1}}});
  EXPECT_EQ(vals(row), (std::vector<double>{10, 11}));
  EXPECT_EQ(run1(Op::Embedding, {w, HostTensor::empty(DType::I64, {0})}).shape(), (Shape{0, 2}));
  EXPECT_TRUE(run_fails(Op::Embedding, {w, i64({2}, {0, 3})}, {}, "index 3 is out of range"));
  EXPECT_TRUE(run_fails(Op::Embedding, {w, i64({1}, {-1})}, {}, "[0, 3)"));
  EXPECT_TRUE(meta_fails(Op::Embedding, {F({3}), I({2})}, {}, "weight must be 2-d"));
  EXPECT_TRUE(meta_fails(Op::Embedding, {F({3, 2}), F({2})}, {}, "indices must be"));
  EXPECT_EQ(one_node_round_trip(Op::Embedding, {F({10, 4}), I({2, 3})}, {{"padding_idx", int64_t{0}}}),
            "%y = embedding(%x0, %x1, padding_idx=0) : f32[2,3,4]");
}

TEST(OpsComposite, CrossEntropy) {
  // Uniform logits: every row's loss is ln C.
  HostTensor uniform = f32({2, 4}, {0, 0, 0, 0, 0, 0, 0, 0});
  HostTensor t = i64({2}, {1, 3});
  EXPECT_TRUE(tensors_close(run1(Op::CrossEntropy, {uniform, t}), f32({}, {std::log(4.0)})));
  EXPECT_TRUE(tensors_close(run1(Op::CrossEntropy, {uniform, t}, {{"reduction", std::string("sum")}}), f32({}, {2 * std::log(4.0)})));
  EXPECT_TRUE(tensors_close(run1(Op::CrossEntropy, {uniform, t}, {{"label_smoothing", 0.4}}), f32({}, {std::log(4.0)})));
  // Rows [0, ln 2, ln 5] (probabilities 1/8, 2/8, 5/8) and an ignored row.
  HostTensor x = f64({2, 3}, {0, ln2, ln5, 0, 0, 0});
  HostTensor tgt = i64({2}, {2, -100});
  double nll = std::log(8.0 / 5);
  EXPECT_TRUE(tensors_close(run1(Op::CrossEntropy, {x, tgt}), f64({}, {nll}), 1e-15));  // divided by 1 row
  EXPECT_TRUE(tensors_close(run1(Op::CrossEntropy, {x, tgt}, {{"reduction", std::string("none")}}), f64({2}, {nll, 0}), 1e-15));
  // Label smoothing 0.3: 0.7 * nll + 0.3 * (-(sum of log p)) / 3 = 2.9 ln 2 - 0.8 ln 5.
  EXPECT_TRUE(tensors_close(run1(Op::CrossEntropy, {x, tgt}, {{"label_smoothing", 0.3}}), f64({}, {2.9 * ln2 - 0.8 * ln5}), 1e-15));
  // A [C] input with a 0-d target, and another ignore_index.
  HostTensor row = f64({3}, {0, ln2, ln5});
  EXPECT_TRUE(tensors_close(run1(Op::CrossEntropy, {row, i64({}, {1})}), f64({}, {2 * ln2}), 1e-15));
  EXPECT_TRUE(std::isnan(run1(Op::CrossEntropy, {row, i64({}, {1})}, {{"ignore_index", int64_t{1}}}).get(0)));
  EXPECT_TRUE(std::isnan(run1(Op::CrossEntropy, {x, i64({2}, {-100, -100})}).get(0)));  // all ignored: 0/0
  EXPECT_EQ(run1(Op::CrossEntropy, {x, i64({2}, {-100, -100})}, {{"reduction", std::string("sum")}}).get(0), 0);
  EXPECT_TRUE(run_fails(Op::CrossEntropy, {x, i64({2}, {3, 0})}, {}, "target 3 is out of range for 3 classes"));
  EXPECT_TRUE(run_fails(Op::CrossEntropy, {x, i64({2}, {0, -1})}, {}, "target -1 is out of range"));
  EXPECT_TRUE(meta_fails(Op::CrossEntropy, {F({2, 3}), I({3})}, {}, "needs a target of shape [2]"));
  EXPECT_TRUE(meta_fails(Op::CrossEntropy, {F({2, 3}), I({2})}, {{"reduction", std::string("avg")}}, "reduction must be"));
  EXPECT_TRUE(meta_fails(Op::CrossEntropy, {F({2, 3}), I({2})}, {{"label_smoothing", 1.5}}, "label_smoothing must be in [0, 1]"));
  EXPECT_TRUE(meta_fails(Op::CrossEntropy, {F({2, 3}), F({2})}, {}, "class indices"));
  EXPECT_EQ(one_node_round_trip(Op::CrossEntropy, {F({4, 10}), I({4})}, {{"reduction", std::string("none")}, {"label_smoothing", 0.1}}),
            "%y = cross_entropy(%x0, %x1, reduction=\"none\", label_smoothing=0.1) : f32[4]");
}

TEST(OpsComposite, NllLoss) {
  HostTensor logp = f32({2, 3}, {-1, -2, -3, -4, -5, -6});
  HostTensor t = i64({2}, {0, 2});
  EXPECT_EQ(run1(Op::NllLoss, {logp, t}).get(0), 3.5);
  EXPECT_EQ(run1(Op::NllLoss, {logp, t}, {{"reduction", std::string("sum")}}).get(0), 7);
  EXPECT_EQ(vals(run1(Op::NllLoss, {logp, t}, {{"reduction", std::string("none")}})), (std::vector<double>{1, 6}));
  EXPECT_EQ(run1(Op::NllLoss, {logp, i64({2}, {-100, 2})}).get(0), 6);
  EXPECT_EQ(run1(Op::NllLoss, {logp, i64({2}, {0, 1})}, {{"ignore_index", int64_t{0}}}).get(0), 5);
  EXPECT_TRUE(run_fails(Op::NllLoss, {logp, i64({2}, {0, 5})}, {}, "target 5 is out of range"));
  EXPECT_TRUE(meta_fails(Op::NllLoss, {F({2, 3, 4}), I({2})}, {}, "[C] or [N,C]"));
  EXPECT_EQ(one_node_round_trip(Op::NllLoss, {F({4, 10}), I({4})}, {{"ignore_index", int64_t{0}}}),
            "%y = nll_loss(%x0, %x1, ignore_index=0) : f32[]");
}

TEST(OpsComposite, Dropout) {
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(vals(run1(Op::Dropout, {x}, {{"train", false}})), vals(x));
  EXPECT_EQ(vals(run1(Op::Dropout, {x}, {{"p", 0.0}})), vals(x));
  EXPECT_EQ(vals(run1(Op::Dropout, {x}, {{"p", 1.0}})), std::vector<double>(6, 0.0));
  // p = 0.5: each element is 0 or 2x, kept iff random_uniform(seed, i) >= p, i the logical
  // index (so a strided input uses its logical order); the same seed gives the same mask.
  HostTensor ones = f32({1000}, std::vector<double>(1000, 1.0));
  HostTensor y = run1(Op::Dropout, {ones}, {{"seed", int64_t{7}}});
  int kept = 0;
  for (int64_t i = 0; i < 1000; ++i) {
    bool keep = random_uniform(7, static_cast<uint64_t>(i)) >= 0.5f;
    ASSERT_EQ(y.get(i), keep ? 2.0 : 0.0) << "element " << i;
    kept += keep;
  }
  EXPECT_GT(kept, 430);
  EXPECT_LT(kept, 570);
  EXPECT_EQ(vals(run1(Op::Dropout, {ones}, {{"seed", int64_t{7}}})), vals(y));
  EXPECT_NE(vals(run1(Op::Dropout, {ones}, {{"seed", int64_t{8}}})), vals(y));
  HostTensor xt = run1(Op::Transpose, {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});  // [1,4,2,5,3,6]
  HostTensor yt = run1(Op::Dropout, {xt}, {{"p", 0.25}, {"seed", int64_t{3}}});
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_FLOAT_EQ(yt.get(i), random_uniform(3, static_cast<uint64_t>(i)) >= 0.25f ? xt.get(i) / 0.75 : 0.0);
  EXPECT_TRUE(meta_fails(Op::Dropout, {F({2})}, {{"p", 1.5}}, "between 0 and 1"));
  EXPECT_TRUE(meta_fails(Op::Dropout, {I({2})}, {}, "floating-point"));
  EXPECT_EQ(one_node_round_trip(Op::Dropout, {F({4})}, {{"p", 0.1}, {"seed", int64_t{3}}}), "%y = dropout(%x0, p=0.1, seed=3) : f32[4]");
}

// NaN and infinities as PyTorch treats them: any NaN or +inf in a softmax row makes the whole
// row NaN (x - max is NaN somewhere, so the sum is), as does a row of -inf alone; a -inf among
// finite values gets probability exactly 0 (log-probability -inf). layer_norm is NaN over a
// row holding a NaN or an infinity (the mean or the variance is); other rows are untouched.
// cross_entropy is NaN for such logits, +inf when the target's logit alone is -inf.
TEST(OpsComposite, NaNAndInfinityThroughSoftmaxLayerNormAndCrossEntropy) {
  const double nan = NAN;
  HostTensor x = f64({5, 3}, {1, nan, 2, kInf, 0, 1, kInf, kInf, 0, -kInf, -kInf, -kInf, 0, -kInf, ln2});
  Attrs last{{"dim", int64_t{-1}}};
  std::vector<double> nan9(9, nan);
  std::vector<double> sm = nan9, lsm = nan9;
  sm.insert(sm.end(), {nan, nan, nan, 1.0 / 3, 0, 2.0 / 3});
  lsm.insert(lsm.end(), {nan, nan, nan, -std::log(3.0), -kInf, ln2 - std::log(3.0)});
  EXPECT_TRUE(tensors_close(run1(Op::Softmax, {x}, last), f64({5, 3}, sm), 1e-15, 0));
  EXPECT_TRUE(tensors_close(run1(Op::LogSoftmax, {x}, last), f64({5, 3}, lsm), 1e-15, 0));
  // Along dim 0 of the transpose: the same values.
  HostTensor xt = x.view(TensorMeta(DType::F64, {3, 5}, {1, 3}), 0);
  HostTensor st = run1(Op::Softmax, {xt}, {{"dim", int64_t{0}}});
  for (int64_t r = 0; r < 5; ++r)
    for (int64_t c = 0; c < 3; ++c) {
      double want = sm[static_cast<size_t>(r * 3 + c)], got = st.get(c * 5 + r);
      EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << r << "," << c;
    }

  HostTensor rows = f64({4, 2}, {0, 2, nan, 1, kInf, 1, -kInf, -kInf});
  EXPECT_TRUE(tensors_close(run1(Op::LayerNorm, {rows}, {{"normalized_shape", IntList{2}}, {"eps", 0.0}}),
                            f64({4, 2}, {-1, 1, nan, nan, nan, nan, nan, nan})));

  // Row 0: target 1 with logit -inf alone: -log(0) = +inf; row 1: a NaN logit; row 2: +inf.
  HostTensor logits = f64({3, 2}, {0, -kInf, nan, 0, kInf, 0});
  HostTensor losses = run1(Op::CrossEntropy, {logits, i64({3}, {1, 0, 1})}, {{"reduction", std::string("none")}});
  EXPECT_TRUE(tensors_close(losses, f64({3}, {kInf, nan, nan})));
  // The finite row alone: the -inf class is never the target, so the loss is 0.
  EXPECT_EQ(run1(Op::CrossEntropy, {f64({1, 2}, {0, -kInf}), i64({1}, {0})}).get(0), 0);
}

}  // namespace
}  // namespace kiln
