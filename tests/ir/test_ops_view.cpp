// View and shape ops: shape rules (and their errors), reference kernels (real views that
// share storage, with PyTorch's strides and offsets; copies where PyTorch copies) and the
// print/parse round trip of each op.
#include <gtest/gtest.h>

#include <numeric>

#include "ir/reference/reference.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::run1;
using testing::vals;

// 0, 1, 2, ... in row-major order.
HostTensor iota(DType dt, const Shape& shape) {
  std::vector<double> v(static_cast<size_t>(numel(shape)));
  std::iota(v.begin(), v.end(), 0.0);
  return make(dt, shape, v);
}

std::vector<HostTensor> run(Op op, std::vector<HostTensor> ins, const Attrs& a = {}) { return run_reference(op, ins, a); }

TEST(OpsView, PermuteIsAStridedView) {
  HostTensor x = iota(DType::F32, {2, 2, 2});
  HostTensor y = run1(Op::Permute, {x}, {{"dims", IntList{2, 0, 1}}});
  EXPECT_EQ(y.shape(), (Shape{2, 2, 2}));
  EXPECT_EQ(y.strides(), (Strides{1, 4, 2}));
  EXPECT_EQ(vals(y), (std::vector<double>{0, 2, 4, 6, 1, 3, 5, 7}));  // y[k,i,j] = x[i,j,k]
  x.set(1, 42);  // x[0,0,1] is y[1,0,0]: the view sees the write
  EXPECT_EQ(y.get(4), 42);
  EXPECT_TRUE(meta_fails(Op::Permute, {TensorMeta(DType::F32, {2, 3})}, (Attrs{{"dims", IntList{0}}}), "must list each"));
  EXPECT_TRUE(meta_fails(Op::Permute, {TensorMeta(DType::F32, {2, 3})}, (Attrs{{"dims", IntList{1, -1}}}), "repeats"));
  EXPECT_EQ(one_node_round_trip(Op::Permute, {TensorMeta(DType::F32, {2, 3, 4})}, {{"dims", IntList{2, 0, 1}}}),
            "%y = permute(%x0, dims=[2,0,1]) : f32[4,2,3]{1,12,4}");
}

TEST(OpsView, TransposeIsAStridedView) {
  HostTensor x = iota(DType::I64, {2, 3});
  HostTensor y = run1(Op::Transpose, {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{-1}}});
  EXPECT_EQ(y.shape(), (Shape{3, 2}));
  EXPECT_EQ(y.strides(), (Strides{1, 3}));
  EXPECT_EQ(y.to_ints(), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  x.set_int(5, -7);
  EXPECT_EQ(y.get_int(5), -7);
  EXPECT_TRUE(meta_fails(Op::Transpose, {TensorMeta(DType::F32, {2, 3})}, (Attrs{{"dim0", int64_t{0}}, {"dim1", int64_t{2}}}),
                    "dim1 2 is out of range"));
  EXPECT_EQ(one_node_round_trip(Op::Transpose, {TensorMeta(DType::F32, {2, 3})}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}}),
            "%y = transpose(%x0, dim0=0, dim1=1) : f32[3,2]{1,3}");
}

TEST(OpsView, ExpandRepeatsWithStrideZero) {
  HostTensor x = make(DType::F32, {3, 1}, {1, 2, 3});
  HostTensor y = run1(Op::Expand, {x}, {{"size", IntList{2, -1, 2}}});
  EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(y.strides(), (Strides{0, 1, 0}));
  EXPECT_EQ(vals(y), (std::vector<double>{1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}));
  x.set(2, 9);  // every copy of x[2] changes at once
  EXPECT_EQ(y.get(5), 9);
  EXPECT_EQ(y.get(11), 9);
  EXPECT_TRUE(meta_fails(Op::Expand, {TensorMeta(DType::F32, {3, 2})}, (Attrs{{"size", IntList{3, 4}}}),
                    "dim 1 has size 2, which is not 1"));
  EXPECT_TRUE(meta_fails(Op::Expand, {TensorMeta(DType::F32, {3, 2})}, (Attrs{{"size", IntList{2}}}), "fewer dims"));
  EXPECT_EQ(one_node_round_trip(Op::Expand, {TensorMeta(DType::F32, {3, 1})}, {{"size", IntList{2, 3, 4}}}),
            "%y = expand(%x0, size=[2,3,4]) : f32[2,3,4]{0,1,0}");
}

TEST(OpsView, SqueezeAndUnsqueeze) {
  HostTensor x = iota(DType::F32, {1, 3, 1});
  HostTensor all = run1(Op::Squeeze, {x});
  EXPECT_EQ(all.shape(), (Shape{3}));
  EXPECT_EQ(vals(all), (std::vector<double>{0, 1, 2}));
  HostTensor one = run1(Op::Squeeze, {x}, {{"dim", IntList{-1, 1}}});  // dim 1 has size 3: kept, as PyTorch
  EXPECT_EQ(one.shape(), (Shape{1, 3}));
  x.set(1, 5);
  EXPECT_EQ(all.get(1), 5);
  EXPECT_EQ(one.get(1), 5);

  HostTensor m = iota(DType::F32, {2, 3});
  HostTensor u = run1(Op::Unsqueeze, {m}, {{"dim", int64_t{1}}});
  EXPECT_EQ(u.shape(), (Shape{2, 1, 3}));
  EXPECT_EQ(u.strides(), (Strides{3, 3, 1}));
  HostTensor last = run1(Op::Unsqueeze, {m}, {{"dim", int64_t{-1}}});
  EXPECT_EQ(last.strides(), (Strides{3, 1, 1}));
  m.set(4, -1);
  EXPECT_EQ(u.get(4), -1);
  EXPECT_TRUE(meta_fails(Op::Unsqueeze, {TensorMeta(DType::F32, {2, 3})}, (Attrs{{"dim", int64_t{3}}}), "out of range"));
  EXPECT_TRUE(meta_fails(Op::Squeeze, {TensorMeta(DType::F32, {2, 3})}, (Attrs{{"dim", IntList{2}}}), "out of range"));
  EXPECT_EQ(one_node_round_trip(Op::Squeeze, {TensorMeta(DType::F32, {1, 3})}, {{"dim", IntList{0}}}),
            "%y = squeeze(%x0, dim=[0]) : f32[3]");
  EXPECT_EQ(one_node_round_trip(Op::Unsqueeze, {TensorMeta(DType::F32, {2, 3})}, {{"dim", int64_t{0}}}),
            "%y = unsqueeze(%x0, dim=0) : f32[1,2,3]");
}

TEST(OpsView, SliceOffsetsAndClampsLikePython) {
  HostTensor x = iota(DType::F32, {2, 4});
  HostTensor cols = run1(Op::Slice, {x}, {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{3}}});
  EXPECT_EQ(cols.shape(), (Shape{2, 2}));
  EXPECT_EQ(cols.strides(), (Strides{4, 1}));
  EXPECT_EQ(cols.offset(), 1);
  EXPECT_EQ(vals(cols), (std::vector<double>{1, 2, 5, 6}));
  x.set(6, 60);
  EXPECT_EQ(cols.get(3), 60);

  HostTensor v = iota(DType::F32, {5});
  auto sl = [&](const HostTensor& t, Attrs a) { return run1(Op::Slice, {t}, a); };
  EXPECT_EQ(vals(sl(v, {{"start", int64_t{1}}, {"end", int64_t{-1}}})), (std::vector<double>{1, 2, 3}));
  HostTensor stepped = sl(v, {{"step", int64_t{2}}});
  EXPECT_EQ(stepped.strides(), (Strides{2}));
  EXPECT_EQ(vals(stepped), (std::vector<double>{0, 2, 4}));
  EXPECT_EQ(vals(sl(v, {{"start", int64_t{-10}}, {"end", int64_t{100}}})), (std::vector<double>{0, 1, 2, 3, 4}));
  EXPECT_EQ(sl(v, {{"start", int64_t{4}}, {"end", int64_t{2}}}).numel(), 0);
  // A slice of a slice: offsets add up, strides multiply.
  HostTensor inner = sl(sl(v, {{"start", int64_t{1}}}), {{"start", int64_t{1}}, {"step", int64_t{2}}});
  EXPECT_EQ(inner.offset(), 2);
  EXPECT_EQ(vals(inner), (std::vector<double>{2, 4}));
  EXPECT_TRUE(meta_fails(Op::Slice, {TensorMeta(DType::F32, {5})}, (Attrs{{"step", int64_t{0}}}), "step must be positive"));
  EXPECT_TRUE(meta_fails(Op::Slice, {TensorMeta(DType::F32, {})}, Attrs{}, "0-dim"));
  EXPECT_EQ(one_node_round_trip(Op::Slice, {TensorMeta(DType::F32, {2, 8})},
                       {{"dim", int64_t{1}}, {"start", int64_t{1}}, {"end", int64_t{7}}, {"step", int64_t{3}}}),
            "%y = slice(%x0, dim=1, start=1, end=7, step=3) : f32[2,2]{8,3}");
}

TEST(OpsView, SplitGivesViewsWithTheirOwnOffsets) {
  HostTensor x = iota(DType::F32, {5, 2});
  auto parts = run(Op::Split, {x}, {{"split_size", int64_t{2}}});
  ASSERT_EQ(parts.size(), 3u);
  EXPECT_EQ(parts[2].shape(), (Shape{1, 2}));
  EXPECT_EQ(parts[1].offset(), 4);
  EXPECT_EQ(parts[2].offset(), 8);
  EXPECT_EQ(vals(parts[1]), (std::vector<double>{4, 5, 6, 7}));
  x.set(9, 90);
  EXPECT_EQ(parts[2].get(1), 90);

  auto cols = run(Op::Split, {iota(DType::F32, {2, 3})}, {{"split_sizes", IntList{1, 0, 2}}, {"dim", int64_t{-1}}});
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[1].numel(), 0);
  EXPECT_EQ(cols[2].strides(), (Strides{3, 1}));
  EXPECT_EQ(cols[2].offset(), 1);
  EXPECT_EQ(vals(cols[2]), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_TRUE(meta_fails(Op::Split, {TensorMeta(DType::F32, {5})}, (Attrs{{"split_sizes", IntList{2, 2}}}), "add up to 4"));
  EXPECT_TRUE(meta_fails(Op::Split, {TensorMeta(DType::F32, {5})}, Attrs{}, "exactly one of"));
  EXPECT_EQ(one_node_round_trip(Op::Split, {TensorMeta(DType::F32, {5, 2})}, {{"split_size", int64_t{2}}}),
            "%y, %y_1, %y_2 = split(%x0, split_size=2) : f32[2,2], f32[2,2], f32[1,2]");
}

TEST(OpsView, ReshapeViewsWhenItCanAndCopiesWhenItMust) {
  HostTensor x = iota(DType::F32, {2, 3});
  HostTensor r = run1(Op::Reshape, {x}, {{"shape", IntList{3, -1}}});
  EXPECT_EQ(r.shape(), (Shape{3, 2}));
  x.set(3, 33);
  EXPECT_EQ(r.get(3), 33);  // a view

  // A transposed matrix cannot be flattened in place: the result is a copy in logical order.
  HostTensor t = run1(Op::Transpose, {iota(DType::F32, {2, 3})}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  HostTensor flat = run1(Op::Reshape, {t}, {{"shape", IntList{6}}});
  EXPECT_EQ(vals(flat), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_TRUE(flat.is_contiguous());
  t.set(0, 100);
  EXPECT_EQ(flat.get(0), 0);  // not shared

  // But adding a unit dim to it is still a view, with PyTorch's strides.
  HostTensor unit = run1(Op::Reshape, {t}, {{"shape", IntList{3, 1, 2}}});
  EXPECT_EQ(unit.strides(), (Strides{1, 6, 3}));  // computeStride's choice for the unit dim
  t.set(1, 7);
  EXPECT_EQ(unit.get(1), 7);
  EXPECT_EQ(run1(Op::Reshape, {iota(DType::F32, {0, 3})}, {{"shape", IntList{3, -1}}}).shape(), (Shape{3, 0}));
  EXPECT_TRUE(meta_fails(Op::Reshape, {TensorMeta(DType::F32, {5})}, (Attrs{{"shape", IntList{2, 2}}}),
                    "is invalid for an input of 5 elements"));
  EXPECT_TRUE(meta_fails(Op::Reshape, {TensorMeta(DType::F32, {4})}, (Attrs{{"shape", IntList{-1, -1}}}), "only one dimension"));
  EXPECT_EQ(one_node_round_trip(Op::Reshape, {TensorMeta(DType::F32, {2, 3})}, {{"shape", IntList{-1}}}),
            "%y = reshape(%x0, shape=[-1]) : f32[6]");
  EXPECT_EQ(one_node_round_trip(Op::Reshape, {TensorMeta(DType::F32, {2, 3}, {1, 2})}, {{"shape", IntList{6}}}),
            "%y = reshape(%x0, shape=[6]) : f32[6]");
}

TEST(OpsView, ContiguousCopiesOnlyWhenNeeded) {
  HostTensor x = iota(DType::F32, {2, 3});
  HostTensor same = run1(Op::Contiguous, {x});
  x.set(0, -5);
  EXPECT_EQ(same.get(0), -5);  // the input itself
  HostTensor t = run1(Op::Transpose, {x}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  HostTensor c = run1(Op::Contiguous, {t});
  EXPECT_EQ(c.strides(), (Strides{2, 1}));
  EXPECT_EQ(vals(c), (std::vector<double>{-5, 3, 1, 4, 2, 5}));
  x.set(0, 0);
  EXPECT_EQ(c.get(0), -5);  // a copy
  EXPECT_EQ(one_node_round_trip(Op::Contiguous, {TensorMeta(DType::F32, {2, 3}, {1, 2})}, {}),
            "%y = contiguous(%x0) : f32[2,3]");
}

TEST(OpsView, CatCopiesAndPromotes) {
  HostTensor a = make(DType::I32, {2, 2}, {1, 2, 3, 4});
  HostTensor b = make(DType::F32, {1, 2}, {0.5, 1.5});
  HostTensor rows = run1(Op::Cat, {a, b});
  EXPECT_EQ(rows.dtype(), DType::F32);
  EXPECT_EQ(rows.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(rows), (std::vector<double>{1, 2, 3, 4, 0.5, 1.5}));

  // Along the last dim, with a transposed (strided) input and a skipped 1-d empty tensor.
  HostTensor t = run1(Op::Transpose, {make(DType::I32, {1, 2}, {7, 8})}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
  HostTensor cols = run1(Op::Cat, {a, HostTensor::empty(DType::I32, {0}), t}, {{"dim", int64_t{-1}}});
  EXPECT_EQ(cols.shape(), (Shape{2, 3}));
  EXPECT_EQ(cols.to_ints(), (std::vector<int64_t>{1, 2, 7, 3, 4, 8}));

  // i64 values beyond 2^53 are copied exactly.
  int64_t big = (int64_t{1} << 53) + 1;
  HostTensor bigs = run1(Op::Cat, {HostTensor::from_ints(DType::I64, {1}, std::vector<int64_t>{big}),
                                   HostTensor::from_ints(DType::I64, {1}, std::vector<int64_t>{-big})});
  EXPECT_EQ(bigs.to_ints(), (std::vector<int64_t>{big, -big}));
  EXPECT_TRUE(meta_fails(Op::Cat, (std::vector<TensorMeta>{TensorMeta(DType::F32, {2, 2}), TensorMeta(DType::F32, {2, 3})}),
                    Attrs{}, "sizes must match except in dim 0"));
  EXPECT_TRUE(meta_fails(Op::Cat, (std::vector<TensorMeta>{TensorMeta(DType::F32, {2, 2}), TensorMeta(DType::F32, {2})}),
                    Attrs{}, "has rank 1"));
  EXPECT_EQ(one_node_round_trip(Op::Cat, {TensorMeta(DType::F32, {2, 2}), TensorMeta(DType::F16, {2, 1})}, {{"dim", int64_t{1}}}),
            "%y = cat(%x0, %x1, dim=1) : f32[2,3]");
}

}  // namespace
// Found by libFuzzer on the parser (scripts/fuzz-parser.sh): a split into 6e13 parts of 1 ran
// until the timeout building results; parts are now limited, and huge sizes do not overflow.
TEST(OpsView, SplitIntoTooManyPartsIsAnError) {
  EXPECT_TRUE(meta_fails(Op::Split, {TensorMeta(DType::F16, {62777777777777})}, (Attrs{{"split_size", int64_t{1}}}),
                         "more than 65536 results"));
  EXPECT_TRUE(meta_fails(Op::Split, {TensorMeta(DType::F16, {int64_t{1} << 40})},
                         (Attrs{{"split_sizes", IntList{int64_t{1} << 62, int64_t{1} << 62, int64_t{1} << 62}}}),
                         "add up to more than"));
  auto metas = infer_meta(op_info(Op::Split), std::vector<TensorMeta>{TensorMeta(DType::F32, {int64_t{1} << 61})},
                          complete_attrs(op_info(Op::Split), Attrs{{"split_size", int64_t{3} << 60}}, 1));
  ASSERT_EQ(metas.size(), 1u);
  EXPECT_EQ(metas[0].shape[0], int64_t{1} << 61);
}

}  // namespace kiln
