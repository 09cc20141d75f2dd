// Creation ops: shape-and-dtype rules (default dtypes from the Scalars, errors), reference
// kernels against hand-written values and print/parse round trips of input-less graphs.
#include <gtest/gtest.h>

#include <limits>

#include "ir/random.h"

#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace testing;  // the shared helpers of tests/support
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(CreationMeta, DTypesAndShapes) {
  EXPECT_EQ(meta(Op::Full, {}, {{"size", IntList{2, 3}}, {"fill_value", int64_t(1)}}), T(DType::I64, {2, 3}));
  EXPECT_EQ(meta(Op::Full, {}, {{"size", IntList{2}}, {"fill_value", 1.5}}), T(DType::F32, {2}));
  EXPECT_EQ(meta(Op::Full, {}, {{"size", IntList{}}, {"fill_value", 1.5}, {"dtype", DType::F16}}), T(DType::F16, {}));
  EXPECT_EQ(meta(Op::Zeros, {}, {{"size", IntList{0, 4}}}), T(DType::F32, {0, 4}));
  EXPECT_EQ(meta(Op::Ones, {}, {{"size", IntList{3}}, {"dtype", DType::Bool}}), T(DType::Bool, {3}));
  EXPECT_EQ(meta(Op::Arange, {}, {{"end", int64_t(5)}}), T(DType::I64, {5}));
  EXPECT_EQ(meta(Op::Arange, {}, {{"end", 2.0}, {"start", int64_t(1)}, {"step", 0.25}}), T(DType::F32, {4}));
  EXPECT_EQ(meta(Op::Arange, {}, {{"end", int64_t(0)}, {"start", int64_t(5)}, {"step", int64_t(-2)}}), T(DType::I64, {3}));
  EXPECT_EQ(meta(Op::Arange, {}, {{"end", 2.5}, {"dtype", DType::I32}}), T(DType::I32, {3}));
  EXPECT_EQ(meta(Op::Arange, {}, {{"end", int64_t(3)}, {"start", int64_t(3)}}), T(DType::I64, {0}));
  EXPECT_EQ(meta(Op::Constant, {}, {{"size", IntList{2}}, {"dtype", DType::I64}, {"values", FloatList{1, 2}}}), T(DType::I64, {2}));
}

TEST(CreationMeta, Errors) {
  EXPECT_TRUE(has(meta_error(Op::Full, {}, {{"size", IntList{2, -1}}, {"fill_value", 0.0}}), "sizes must be non-negative, got [2,-1]"));
  EXPECT_TRUE(has(meta_error(Op::Full, {}, {{"size", IntList{2}}}), "full: missing attribute 'fill_value'"));
  EXPECT_TRUE(has(meta_error(Op::Zeros, {}, {{"size", IntList{-3}}}), "sizes must be non-negative"));
  EXPECT_TRUE(has(meta_error(Op::Ones, {}, {{"size", IntList{2}}, {"dtype", int64_t(1)}}), "attribute 'dtype' must be"));
  EXPECT_TRUE(has(meta_error(Op::Arange, {}, {{"end", int64_t(5)}, {"step", int64_t(0)}}), "arange step must be nonzero"));
  EXPECT_TRUE(has(meta_error(Op::Arange, {}, {{"end", int64_t(0)}, {"start", int64_t(5)}}),
                  "upper bound and lower bound inconsistent with step sign"));
  EXPECT_TRUE(has(meta_error(Op::Arange, {}, {{"end", kInf}}), "arange bounds must be finite"));
  EXPECT_TRUE(has(meta_error(Op::Constant, {}, {{"size", IntList{2, 2}}, {"dtype", DType::F32}, {"values", FloatList{1, 2, 3}}}),
                  "constant of shape [2,2] needs 4 values, got 3"));
  EXPECT_TRUE(has(meta_error(Op::Constant, {}, {{"size", IntList{1}}, {"values", FloatList{1}}}), "missing attribute 'dtype'"));
}

TEST(CreationKernel, FullZerosOnes) {
  EXPECT_EQ(run1(Op::Full, {}, {{"size", IntList{2, 2}}, {"fill_value", int64_t(-7)}}).to_ints(), (std::vector<int64_t>{-7, -7, -7, -7}));
  EXPECT_TRUE(tensors_close(run1(Op::Full, {}, {{"size", IntList{3}}, {"fill_value", -kInf}}), make(DType::F32, {3}, {-kInf, -kInf, -kInf})));
  // The fill value is cast to the dtype: 2.7 truncates in i64, 0.5 is true, 0.1 rounds in f16.
  EXPECT_EQ(run1(Op::Full, {}, {{"size", IntList{2}}, {"fill_value", 2.7}, {"dtype", DType::I64}}).to_ints(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(run1(Op::Full, {}, {{"size", IntList{1}}, {"fill_value", 0.5}, {"dtype", DType::Bool}}).get_int(0), 1);
  EXPECT_EQ(run1(Op::Full, {}, {{"size", IntList{1}}, {"fill_value", 0.1}, {"dtype", DType::F16}}).get(0), 0.0999755859375);
  EXPECT_EQ(run1(Op::Full, {}, {{"size", IntList{1}}, {"fill_value", int64_t(9007199254740993)}}).get_int(0), 9007199254740993);
  HostTensor z = run1(Op::Full, {}, {{"size", IntList{}}, {"fill_value", 4.0}});
  EXPECT_EQ(z.shape(), Shape{});
  EXPECT_EQ(z.get(0), 4.0);
  EXPECT_EQ(run1(Op::Full, {}, {{"size", IntList{0, 2}}, {"fill_value", 1.0}}).shape(), (Shape{0, 2}));
  EXPECT_TRUE(tensors_close(run1(Op::Zeros, {}, {{"size", IntList{2, 2}}}), make(DType::F32, {2, 2}, {0, 0, 0, 0})));
  EXPECT_TRUE(tensors_close(run1(Op::Ones, {}, {{"size", IntList{2}}, {"dtype", DType::BF16}}), make(DType::BF16, {2}, {1, 1})));
  EXPECT_EQ(run1(Op::Ones, {}, {{"size", IntList{3}}, {"dtype", DType::I32}}).to_ints(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(run1(Op::Zeros, {}, {{"size", IntList{}}, {"dtype", DType::Bool}}).to_ints(), (std::vector<int64_t>{0}));
}

TEST(CreationKernel, Arange) {
  EXPECT_EQ(run1(Op::Arange, {}, {{"end", int64_t(5)}}).to_ints(), (std::vector<int64_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(run1(Op::Arange, {}, {{"end", int64_t(0)}, {"start", int64_t(5)}, {"step", int64_t(-2)}}).to_ints(),
            (std::vector<int64_t>{5, 3, 1}));
  EXPECT_TRUE(tensors_close(run1(Op::Arange, {}, {{"end", 2.0}, {"start", int64_t(1)}, {"step", 0.25}}),
                            make(DType::F32, {4}, {1, 1.25, 1.5, 1.75}), 0, 0));
  // start + i*step in double, then rounded: 3 * 0.1 is 0.30000000000000004, 0.3 in f32.
  EXPECT_TRUE(tensors_close(run1(Op::Arange, {}, {{"end", 1.0}, {"step", 0.1}}),
                            make(DType::F32, {10}, {0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9}), 0, 0));
  EXPECT_TRUE(tensors_close(run1(Op::Arange, {}, {{"end", int64_t(3)}, {"dtype", DType::F64}}), make(DType::F64, {3}, {0, 1, 2})));
  // Integer dtypes compute in int64, exactly past 2^53.
  EXPECT_EQ(run1(Op::Arange, {}, {{"end", int64_t(9007199254740996)}, {"start", int64_t(9007199254740992)}}).to_ints(),
            (std::vector<int64_t>{9007199254740992, 9007199254740993, 9007199254740994, 9007199254740995}));
  // With an integer dtype, a float start is truncated first (torch: arange(0.5, 5, 2) = [0, 2, 4]).
  EXPECT_EQ(run1(Op::Arange, {}, {{"end", int64_t(5)}, {"start", 0.5}, {"step", int64_t(2)}, {"dtype", DType::I64}}).to_ints(),
            (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(run1(Op::Arange, {}, {{"end", 2.5}, {"dtype", DType::I32}}).to_ints(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(run1(Op::Arange, {}, {{"end", int64_t(2)}, {"start", int64_t(2)}}).numel(), 0);
  std::string err = error_of([] { run1(Op::Arange, {}, {{"end", int64_t(1)}, {"step", 0.5}, {"dtype", DType::I64}}); });
  EXPECT_TRUE(has(err, "arange step must be nonzero (step 0.5 truncates to 0 for i64)")) << err;
}

TEST(CreationKernel, Constant) {
  EXPECT_TRUE(tensors_close(run1(Op::Constant, {}, {{"size", IntList{2, 2}}, {"dtype", DType::F32}, {"values", FloatList{1, -2.5, kInf, 0}}}),
                            make(DType::F32, {2, 2}, {1, -2.5, kInf, 0}), 0, 0));
  EXPECT_EQ(run1(Op::Constant, {}, {{"size", IntList{3}}, {"dtype", DType::I32}, {"values", FloatList{-1, 2, 3.9}}}).to_ints(),
            (std::vector<int64_t>{-1, 2, 3}));
  EXPECT_EQ(run1(Op::Constant, {}, {{"size", IntList{2}}, {"dtype", DType::Bool}, {"values", FloatList{0, 2}}}).to_ints(),
            (std::vector<int64_t>{0, 1}));
  HostTensor s = run1(Op::Constant, {}, {{"size", IntList{}}, {"dtype", DType::F64}, {"values", FloatList{0.1}}});
  EXPECT_EQ(s.shape(), Shape{});
  EXPECT_EQ(s.get(0), 0.1);
  EXPECT_EQ(run1(Op::Constant, {}, {{"size", IntList{0}}, {"dtype", DType::F32}, {"values", FloatList{}}}).numel(), 0);
}

TEST(CreationMeta, Rand) {
  EXPECT_EQ(meta(Op::Rand, {}, {{"size", IntList{2, 3}}}), T(DType::F32, {2, 3}));
  EXPECT_EQ(meta(Op::Rand, {}, {{"size", IntList{}}, {"seed", int64_t(4)}, {"dtype", DType::F64}}), T(DType::F64, {}));
  EXPECT_TRUE(meta_fails(Op::Rand, {}, {{"size", IntList{2}}, {"dtype", DType::I64}}, "rand makes floating-point values, got dtype i64"));
  EXPECT_TRUE(meta_fails(Op::Rand, {}, {{"size", IntList{-1}}}, "sizes must be non-negative"));
  EXPECT_TRUE(meta_fails(Op::Rand, {}, {{"size", IntList{2}}, {"seed", 0.5}}, "seed"));
}

TEST(CreationKernel, RandIsDropoutsStream) {
  // Element i (row-major) is random_uniform(seed, i); the first values are pinned too, so a
  // change to the stream itself (which would change every dropout mask) shows here.
  HostTensor r = run1(Op::Rand, {}, {{"size", IntList{3, 5}}, {"seed", int64_t(7)}});
  ASSERT_EQ(r.shape(), (Shape{3, 5}));
  for (int64_t i = 0; i < r.numel(); ++i) {
    EXPECT_EQ(r.get(i), static_cast<double>(random_uniform(7, static_cast<uint64_t>(i))));
    EXPECT_GE(r.get(i), 0.0);
    EXPECT_LT(r.get(i), 1.0);
  }
  EXPECT_EQ(r.get(0), 0.9545971155166626);
  EXPECT_EQ(r.get(1), 0.40696036815643311);
  EXPECT_EQ(r.get(2), 0.0060750842094421387);
  // f64 holds the same (exact) values; another seed gives another stream.
  HostTensor d = run1(Op::Rand, {}, {{"size", IntList{15}}, {"seed", int64_t(7)}, {"dtype", DType::F64}});
  EXPECT_EQ(d.to_doubles(), r.to_doubles());
  HostTensor other = run1(Op::Rand, {}, {{"size", IntList{15}}, {"seed", int64_t(8)}});
  EXPECT_NE(other.to_doubles(), r.to_doubles());
  // Dropout keeps element i exactly where rand's element i is >= p.
  HostTensor x = make(DType::F32, {15}, std::vector<double>(15, 2.0));
  HostTensor y = run1(Op::Dropout, {x}, {{"p", 0.5}, {"seed", int64_t(7)}});
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(y.get(i), r.get(i) >= 0.5 ? 4.0 : 0.0) << i;
  EXPECT_EQ(run1(Op::Rand, {}, {{"size", IntList{0, 3}}}).numel(), 0);
}

TEST(CreationRoundTrip, EveryOp) {
  one_node_round_trip(Op::Rand, {}, {{"size", IntList{2, 3}}});
  one_node_round_trip(Op::Rand, {}, {{"size", IntList{4}}, {"seed", int64_t(-3)}, {"dtype", DType::BF16}});
  one_node_round_trip(Op::Full, {}, {{"size", IntList{2, 3}}, {"fill_value", int64_t(-1)}});
  one_node_round_trip(Op::Full, {}, {{"size", IntList{}}, {"fill_value", -kInf}, {"dtype", DType::BF16}});
  one_node_round_trip(Op::Zeros, {}, {{"size", IntList{0, 4}}});
  one_node_round_trip(Op::Zeros, {}, {{"size", IntList{2}}, {"dtype", DType::I64}});
  one_node_round_trip(Op::Ones, {}, {{"size", IntList{3}}, {"dtype", DType::F16}});
  one_node_round_trip(Op::Arange, {}, {{"end", int64_t(10)}});
  one_node_round_trip(Op::Arange, {}, {{"end", 1.0}, {"start", -1.0}, {"step", 0.25}, {"dtype", DType::F64}});
  one_node_round_trip(Op::Constant, {}, {{"size", IntList{2}}, {"dtype", DType::F32}, {"values", FloatList{0.1, -kInf}}});
}

}  // namespace
}  // namespace kiln
