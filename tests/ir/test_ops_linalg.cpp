// Matrix products, einsum, gather and the scatters: shape rules (and their errors), reference
// kernels against hand-computed products (every torch.matmul case, strided operands, empty and
// integer operands) and PyTorch's scatter_reduce results, and the print/parse round trip of each op.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "ir/einsum.h"
#include "ir/meta/meta.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using testing::F;
using testing::I;
using testing::run_fails;
using testing::make;
using testing::meta_fails;
using testing::one_node_round_trip;
using testing::run1;
using testing::vals;

HostTensor f32(const Shape& s, std::vector<double> v) { return make(DType::F32, s, std::move(v)); }
HostTensor i64(const Shape& s, std::vector<double> v) { return make(DType::I64, s, std::move(v)); }
HostTensor transposed(const HostTensor& t) {
  return run1(Op::Transpose, {t}, {{"dim0", int64_t{0}}, {"dim1", int64_t{1}}});
}

TEST(OpsLinalg, MatmulVectorCases) {
  HostTensor dot = run1(Op::Matmul, {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})});
  EXPECT_EQ(dot.shape(), Shape{});
  EXPECT_EQ(dot.get(0), 32);
  HostTensor m23 = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(vals(run1(Op::Matmul, {f32({2}, {1, 2}), m23})), (std::vector<double>{9, 12, 15}));
  HostTensor mv = run1(Op::Matmul, {m23, f32({3}, {1, 0, -1})});
  EXPECT_EQ(mv.shape(), (Shape{2}));
  EXPECT_EQ(vals(mv), (std::vector<double>{-2, -2}));
}

TEST(OpsLinalg, MatmulOfStridedOperands) {
  // B^T is a strided view of B = [[5,6],[7,8]]; A @ B^T = [[17,23],[39,53]].
  HostTensor a = f32({2, 2}, {1, 2, 3, 4});
  HostTensor bt = transposed(f32({2, 2}, {5, 6, 7, 8}));
  ASSERT_FALSE(bt.is_contiguous());
  EXPECT_EQ(vals(run1(Op::Matmul, {a, bt})), (std::vector<double>{17, 23, 39, 53}));
  EXPECT_EQ(vals(run1(Op::Matmul, {transposed(a), a})), (std::vector<double>{10, 14, 14, 20}));
}

TEST(OpsLinalg, MatmulBroadcastsBatchDims) {
  // a: batch [2,1] of rows a0=[1,2], a1=[3,4]; b: batch [3] of columns [1,0], [0,1], [1,1].
  HostTensor a = f32({2, 1, 1, 2}, {1, 2, 3, 4});
  HostTensor b = f32({3, 2, 1}, {1, 0, 0, 1, 1, 1});
  HostTensor out = run1(Op::Matmul, {a, b});
  EXPECT_EQ(out.shape(), (Shape{2, 3, 1, 1}));
  EXPECT_EQ(vals(out), (std::vector<double>{1, 2, 3, 3, 4, 7}));
  // A vector on either side of a batch: the added dim is removed again.
  HostTensor vb = run1(Op::Matmul, {f32({2}, {1, 2}), b});
  EXPECT_EQ(vb.shape(), (Shape{3, 1}));
  EXPECT_EQ(vals(vb), (std::vector<double>{1, 2, 3}));
  HostTensor bv = run1(Op::Matmul, {f32({2, 1, 2}, {1, 2, 3, 4}), f32({2}, {1, 1})});
  EXPECT_EQ(bv.shape(), (Shape{2, 1}));
  EXPECT_EQ(vals(bv), (std::vector<double>{3, 7}));
}

TEST(OpsLinalg, MatmulIntegerAndEmpty) {
  int64_t big = int64_t{1} << 31;  // big*big + 1*1 = 2^62 + 1, which a double would round
  auto i64 = [](std::vector<int64_t> v) { return HostTensor::from_ints(DType::I64, {2}, v); };
  HostTensor exact = run1(Op::Matmul, {i64({big, 1}), i64({big, 1})});
  EXPECT_EQ(exact.dtype(), DType::I64);
  EXPECT_EQ(exact.get_int(0), (int64_t{1} << 62) + 1);
  HostTensor zeros = run1(Op::Matmul, {HostTensor::empty(DType::F32, {2, 0}), HostTensor::empty(DType::F32, {0, 3})});
  EXPECT_EQ(zeros.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(zeros), std::vector<double>(6, 0.0));
  EXPECT_EQ(run1(Op::Matmul, {HostTensor::empty(DType::F32, {0, 2}), f32({2}, {1, 2})}).shape(), (Shape{0}));
}

TEST(OpsLinalg, MatmulShapeErrors) {
  EXPECT_TRUE(meta_fails(Op::Matmul, {F({2, 3}), F({2, 3})}, Attrs{}, "cannot be multiplied (2x3 and 2x3)"));
  EXPECT_TRUE(meta_fails(Op::Matmul, {F({}), F({3})}, Attrs{}, "at least 1 dimension"));
  EXPECT_TRUE(meta_fails(Op::Matmul, {F({2, 1, 2}), F({3, 2, 2})}, Attrs{}, "broadcast"));
  EXPECT_TRUE(meta_fails(Op::Matmul, {F({2}), TensorMeta(DType::F64, {2})}, Attrs{}, "one dtype"));
  EXPECT_TRUE(meta_fails(Op::Matmul, {TensorMeta(DType::Bool, {2}), TensorMeta(DType::Bool, {2})}, Attrs{}, "bool"));
  EXPECT_EQ(one_node_round_trip(Op::Matmul, {F({5, 2, 3}), F({3, 4})}), "%y = matmul(%x0, %x1) : f32[5,2,4]");
  EXPECT_EQ(one_node_round_trip(Op::Matmul, {F({3}), F({3})}), "%y = matmul(%x0, %x1) : f32[]");
}

TEST(OpsLinalg, Bmm) {
  HostTensor out = run1(Op::Bmm, {f32({2, 1, 2}, {1, 2, 5, 6}), f32({2, 2, 1}, {3, 4, 7, 8})});
  EXPECT_EQ(out.shape(), (Shape{2, 1, 1}));
  EXPECT_EQ(vals(out), (std::vector<double>{11, 83}));
  EXPECT_TRUE(meta_fails(Op::Bmm, {F({2, 2}), F({2, 2})}, Attrs{}, "two 3-d tensors"));
  EXPECT_TRUE(meta_fails(Op::Bmm, {F({2, 1, 2}), F({3, 2, 1})}, Attrs{}, "batch sizes differ: 2 and 3"));
  EXPECT_EQ(one_node_round_trip(Op::Bmm, {F({2, 1, 2}), F({2, 2, 3})}), "%y = bmm(%x0, %x1) : f32[2,1,3]");
}

TEST(OpsLinalg, Linear) {
  HostTensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor w = f32({2, 3}, {1, 0, 0, 0, 1, 1});
  EXPECT_EQ(vals(run1(Op::Linear, {x, w, f32({2}, {10, 20})})), (std::vector<double>{11, 25, 14, 31}));
  EXPECT_EQ(vals(run1(Op::Linear, {x, w})), (std::vector<double>{1, 5, 4, 11}));
  // A strided weight (the transpose of a [3,2] matrix) and a 3-d input.
  HostTensor wt = transposed(f32({3, 2}, {1, 0, 0, 1, 0, 1}));
  HostTensor x3 = f32({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor y3 = run1(Op::Linear, {x3, wt});
  EXPECT_EQ(y3.shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(vals(y3), (std::vector<double>{1, 5, 4, 11}));
  // A 1-d weight gives one feature per row, and the dim is dropped; a 0-d bias broadcasts.
  HostTensor y1 = run1(Op::Linear, {x, f32({3}, {1, 1, 1}), f32({}, {0.5})});
  EXPECT_EQ(y1.shape(), (Shape{2}));
  EXPECT_EQ(vals(y1), (std::vector<double>{6.5, 15.5}));
  EXPECT_TRUE(meta_fails(Op::Linear, {F({2, 3}), F({2, 4})}, Attrs{}, "does not match weight"));
  EXPECT_TRUE(meta_fails(Op::Linear, {F({2, 3}), F({2, 3}), F({3})}, Attrs{}, "do not broadcast"));
  EXPECT_TRUE(meta_fails(Op::Linear, {F({2, 3}), F({2, 3}), F({2, 1, 2})}, Attrs{}, "does not broadcast to the output"));
  EXPECT_EQ(one_node_round_trip(Op::Linear, {F({8, 64}), F({600, 64}), F({600})}), "%y = linear(%x0, %x1, %x2) : f32[8,600]");
  EXPECT_EQ(one_node_round_trip(Op::Linear, {F({8, 64}), F({600, 64})}), "%y = linear(%x0, %x1) : f32[8,600]");
}

TEST(OpsLinalg, Addmm) {
  HostTensor m1 = f32({2, 2}, {1, 2, 3, 4});
  HostTensor eye = f32({2, 2}, {1, 0, 0, 1});
  // 2*[1,2] (broadcast over rows) + 3*m1.
  Attrs scales{{"beta", int64_t{2}}, {"alpha", int64_t{3}}};
  EXPECT_EQ(vals(run1(Op::Addmm, {f32({2}, {1, 2}), m1, eye}, scales)), (std::vector<double>{5, 10, 11, 16}));
  EXPECT_EQ(vals(run1(Op::Addmm, {f32({2, 2}, {1, 1, 1, 1}), m1, transposed(m1)})), (std::vector<double>{6, 12, 12, 26}));
  // beta = 0 ignores self entirely: its nan does not reach the result.
  HostTensor nan_self = f32({2, 2}, {NAN, NAN, INFINITY, 1});
  EXPECT_EQ(vals(run1(Op::Addmm, {nan_self, m1, eye}, {{"beta", 0.0}, {"alpha", 0.5}})),
            (std::vector<double>{0.5, 1, 1.5, 2}));
  // Integer tensors: exact, and float scalars truncate toward zero as in PyTorch (1.5 -> 1,
  // -0.5 -> 0, so self is then ignored).
  auto i64 = [](std::vector<double> v) { return make(DType::I64, {1, 1}, v); };
  EXPECT_EQ(run1(Op::Addmm, {i64({1}), i64({2}), i64({3})}, {{"beta", int64_t{-1}}}).get_int(0), 5);
  EXPECT_EQ(run1(Op::Addmm, {i64({3}), i64({3}), i64({3})}, {{"beta", 1.5}, {"alpha", 2.7}}).get_int(0), 21);
  EXPECT_EQ(run1(Op::Addmm, {i64({3}), i64({3}), i64({3})}, {{"beta", -0.5}}).get_int(0), 9);
  EXPECT_TRUE(meta_fails(Op::Addmm, {F({3}), F({2, 2}), F({2, 2})}, Attrs{}, "do not broadcast"));
  EXPECT_TRUE(meta_fails(Op::Addmm, {F({3, 2, 2}), F({2, 2}), F({2, 2})}, Attrs{}, "does not broadcast to the product"));
  EXPECT_TRUE(meta_fails(Op::Addmm, {F({2}), F({2, 3}), F({2, 2})}, Attrs{}, "cannot be multiplied"));
  EXPECT_EQ(one_node_round_trip(Op::Addmm, {F({3}), F({2, 4}), F({4, 3})}, {{"beta", 0.5}, {"alpha", int64_t{2}}}),
            "%y = addmm(%x0, %x1, %x2, beta=0.5, alpha=2) : f32[2,3]");
}

TEST(OpsIndex, Gather) {
  HostTensor x = f32({2, 3}, {0, 1, 2, 10, 11, 12});
  // torch.gather(x, 1, [[2,0],[1,-1]]) = [[2,0],[11,12]] (negative indices wrap).
  HostTensor rows = run1(Op::Gather, {x, i64({2, 2}, {2, 0, 1, -1})}, {{"dim", int64_t{1}}});
  EXPECT_EQ(rows.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(rows), (std::vector<double>{2, 0, 11, 12}));
  // Along dim 0 with an index smaller than x in dim 1.
  EXPECT_EQ(vals(run1(Op::Gather, {x, i64({1, 2}, {1, 0})}, {{"dim", int64_t{0}}})), (std::vector<double>{10, 1}));
  EXPECT_EQ(run1(Op::Gather, {x, HostTensor::empty(DType::I64, {0, 3})}, {{"dim", int64_t{1}}}).shape(), (Shape{0, 3}));
  EXPECT_TRUE(run_fails(Op::Gather, {x, i64({1, 1}, {3})}, {{"dim", int64_t{1}}}, "index 3 is out of range for dim 1 of size 3"));
  EXPECT_TRUE(meta_fails(Op::Gather, {F({2, 3}), I({2})}, {{"dim", int64_t{0}}}, "must have as many dims"));
  EXPECT_TRUE(meta_fails(Op::Gather, {F({2, 3}), I({2, 4})}, {{"dim", int64_t{0}}}, "larger than self"));
  EXPECT_TRUE(meta_fails(Op::Gather, {F({2, 3}), F({2, 3})}, {{"dim", int64_t{0}}}, "index must be i64 or i32"));
  EXPECT_EQ(one_node_round_trip(Op::Gather, {F({4, 5}), I({4, 1})}, {{"dim", int64_t{-1}}}),
            "%y = gather(%x0, %x1, dim=-1) : f32[4,1]");
}

TEST(OpsIndex, ScatterAdd) {
  HostTensor base = f32({2, 3}, {1, 1, 1, 1, 1, 1});
  // Repeated destinations accumulate: row 0 gets src[0][0] + src[0][1] in column 2.
  HostTensor src = f32({2, 2}, {5, 7, 3, 4});
  HostTensor out = run1(Op::ScatterAdd, {base, i64({2, 2}, {2, 2, 0, 1}), src}, {{"dim", int64_t{1}}});
  EXPECT_EQ(vals(out), (std::vector<double>{1, 1, 13, 4, 5, 1}));
  // Embedding backward's shape: rows of src added into rows of a table.
  HostTensor table = run1(Op::ScatterAdd, {f32({3, 2}, {0, 0, 0, 0, 0, 0}), i64({3, 2}, {2, 2, 0, 0, 2, 2}),
                                           f32({3, 2}, {1, 2, 3, 4, 5, 6})},
                          {{"dim", int64_t{0}}});
  EXPECT_EQ(vals(table), (std::vector<double>{3, 4, 0, 0, 6, 8}));
  EXPECT_TRUE(run_fails(Op::ScatterAdd, {base, i64({1, 1}, {-4}), src}, {{"dim", int64_t{1}}}, "index -4 is out of range"));
  EXPECT_TRUE(meta_fails(Op::ScatterAdd, {F({2, 3}), I({2, 2}), F({1, 2})}, {{"dim", int64_t{1}}}, "larger than src"));
  EXPECT_TRUE(meta_fails(Op::ScatterAdd, {F({2, 3}), I({2, 2}), make(DType::F64, {2, 2}, {1, 2, 3, 4}).meta()},
                         {{"dim", int64_t{1}}}, "src must have self's dtype f32"));
  EXPECT_EQ(one_node_round_trip(Op::ScatterAdd, {F({4, 5}), I({4, 1}), F({4, 1})}, {{"dim", int64_t{0}}}),
            "%y = scatter_add(%x0, %x1, %x2, dim=0) : f32[4,5]");
}

TEST(OpsIndex, ScatterWritesAndTheLaterWriteStays) {
  HostTensor base = f32({2, 3}, {1, 1, 1, 1, 1, 1});
  // Row 0 writes column 2 twice (5, then 7: 7 stays); row 1 writes columns 0 and 1; -0 and NaN
  // are written as they are.
  HostTensor src = f32({2, 2}, {5, 7, -0.0, std::nan("")});
  HostTensor out = run1(Op::Scatter, {base, i64({2, 2}, {2, 2, 0, -2}), src}, {{"dim", int64_t{1}}});
  std::vector<double> v = vals(out);
  EXPECT_EQ(std::vector<double>(v.begin(), v.begin() + 4), (std::vector<double>{1, 1, 7, 0}));
  EXPECT_TRUE(std::signbit(v[3]));
  EXPECT_TRUE(std::isnan(v[4]));
  EXPECT_EQ(v[5], 1);
  HostTensor ints = run1(Op::Scatter, {i64({4}, {1, 2, 3, 4}), i64({3}, {3, 0, 3}), i64({3}, {10, 20, 30})}, {{"dim", int64_t{0}}});
  EXPECT_EQ(vals(ints), (std::vector<double>{20, 2, 3, 30}));
  EXPECT_TRUE(run_fails(Op::Scatter, {base, i64({1, 1}, {3}), src}, {{"dim", int64_t{1}}}, "index 3 is out of range"));
  EXPECT_TRUE(meta_fails(Op::Scatter, {F({2, 3}), I({2, 2}), F({1, 2})}, {{"dim", int64_t{1}}}, "larger than src"));
  EXPECT_EQ(one_node_round_trip(Op::Scatter, {F({4, 5}), I({4, 1}), F({4, 1})}, {{"dim", int64_t{0}}}),
            "%y = scatter(%x0, %x1, %x2, dim=0) : f32[4,5]");
}

// ---- scatter_reduce and scatter_fold: the reference kernel against PyTorch 1.13's own results
// (torch.Tensor.scatter_reduce, written down below), NaN, integer wrap-around, the shape rule's
// errors and the round trip.

Attrs reduce_attrs(const std::string& reduce, bool include_self) {
  return {{"dim", int64_t{0}}, {"reduce", reduce}, {"include_self", include_self}};
}

// self [10, 20, 30, 40], index [0, 0, 2, 2, 2], src [1, 2, 3, 4, -7]: what PyTorch 1.13 returns
// (`s.scatter_reduce(0, i, src, r, include_self=inc)`).
TEST(OpsScatterReduce, EveryReductionAsPyTorchComputesIt) {
  HostTensor self = i64({4}, {10, 20, 30, 40}), index = i64({5}, {0, 0, 2, 2, 2}), src = i64({5}, {1, 2, 3, 4, -7});
  struct Want {
    const char* reduce;
    bool include_self;
    std::vector<double> ints;
  };
  for (const Want& w : {Want{"sum", true, {13, 20, 30, 40}}, Want{"sum", false, {3, 20, 0, 40}},
                        Want{"prod", true, {20, 20, -2520, 40}}, Want{"prod", false, {2, 20, -84, 40}},
                        Want{"amax", true, {10, 20, 30, 40}}, Want{"amax", false, {2, 20, 4, 40}},
                        Want{"amin", true, {1, 20, -7, 40}}, Want{"amin", false, {1, 20, -7, 40}}}) {
    SCOPED_TRACE(fmt::format("{} include_self={}", w.reduce, w.include_self));
    EXPECT_EQ(vals(run1(Op::ScatterReduce, {self, index, src}, reduce_attrs(w.reduce, w.include_self))), w.ints);
    // The same in f32.
    HostTensor f = run1(Op::ScatterReduce, {f32({4}, {10, 20, 30, 40}), index, f32({5}, {1, 2, 3, 4, -7})},
                        reduce_attrs(w.reduce, w.include_self));
    EXPECT_EQ(vals(f), w.ints);
  }
  // mean of floats: 10 + 1 + 2 over 3 and 30 + 3 + 4 - 7 over 4 with self, 1.5 and 0 without; an element nothing reaches
  // keeps self's.
  EXPECT_EQ(vals(run1(Op::ScatterReduce, {f32({4}, {10, 20, 30, 40}), index, f32({5}, {1, 2, 3, 4, -7})}, reduce_attrs("mean", true))),
            (std::vector<double>{static_cast<float>(13.0 / 3), 20, 7.5, 40}));
  EXPECT_EQ(vals(run1(Op::ScatterReduce, {f32({4}, {10, 20, 30, 40}), index, f32({5}, {1, 2, 3, 4, -7})}, reduce_attrs("mean", false))),
            (std::vector<double>{1.5, 20, 0, 40}));
}

TEST(OpsScatterReduce, NanPropagatesThroughAmaxAndAmin) {
  // PyTorch: self [1, nan, 3, 4] amax 5, 2 into 1 stays nan; amin of nan and 2 into 0 without self is nan.
  std::vector<double> a = vals(run1(Op::ScatterReduce, {f32({4}, {1, NAN, 3, 4}), i64({2}, {1, 1}), f32({2}, {5, 2})},
                                    reduce_attrs("amax", true)));
  EXPECT_TRUE(std::isnan(a[1]));
  std::vector<double> b = vals(run1(Op::ScatterReduce, {f32({4}, {1, NAN, 3, 4}), i64({2}, {0, 0}), f32({2}, {NAN, 2})},
                                    reduce_attrs("amin", false)));
  EXPECT_TRUE(std::isnan(b[0]));
  EXPECT_EQ(b[2], 3);
}

TEST(OpsScatterReduce, ScatterFoldAlongADimAndIntegerProductsWrap) {
  // dim 1 of [2, 3]: row 0's src goes to columns 2, 2; row 1's to 0, 1.
  HostTensor out = run1(Op::ScatterFold, {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64({2, 2}, {2, 2, 0, 1}), f32({2, 2}, {10, 0.5, -1, 7})},
                        {{"dim", int64_t{1}}, {"reduce", std::string("prod")}});
  EXPECT_EQ(vals(out), (std::vector<double>{1, 2, 15, -4, 35, 6}));
  HostTensor big = run1(Op::ScatterFold, {i64({1}, {4611686018427387904.0}), i64({1}, {0}), i64({1}, {4})},
                        {{"dim", int64_t{0}}, {"reduce", std::string("prod")}});
  EXPECT_EQ(vals(big), (std::vector<double>{0})) << "2^62 * 4 wraps to 0, as two's complement";
}

TEST(OpsScatterReduce, ShapeRuleAndErrors) {
  EXPECT_TRUE(meta_fails(Op::ScatterReduce, {F({4}), I({2}), F({2})}, reduce_attrs("max", true), "reduce must be one of sum, prod, mean, amax, amin; got 'max'"));
  EXPECT_TRUE(meta_fails(Op::ScatterReduce, {I({4}), I({2}), I({2})}, reduce_attrs("mean", true), "reduce='mean' of i64 is not supported"));
  EXPECT_TRUE(meta_fails(Op::ScatterReduce, {F({2, 3}), I({2, 2}), F({1, 2})}, {{"dim", int64_t{1}}, {"reduce", std::string("sum")}},
                         "larger than src"));
  EXPECT_TRUE(meta_fails(Op::ScatterFold, {F({4}), I({2}), F({2})}, {{"dim", int64_t{0}}, {"reduce", std::string("sum")}},
                         "(sum is scatter_add)"));
  EXPECT_EQ(one_node_round_trip(Op::ScatterReduce, {F({4, 5}), I({4, 1}), F({4, 1})}, reduce_attrs("amax", false)),
            "%y = scatter_reduce(%x0, %x1, %x2, dim=0, reduce=\"amax\", include_self=false) : f32[4,5]");
  EXPECT_EQ(one_node_round_trip(Op::ScatterFold, {F({4, 5}), I({4, 1}), F({4, 1})}, {{"dim", int64_t{0}}, {"reduce", std::string("prod")}}),
            "%y = scatter_fold(%x0, %x1, %x2, dim=0, reduce=\"prod\") : f32[4,5]");
}

// ---- einsum: the equation's parsing (ir/einsum.h: implicit results, ellipses, broadcasting,
// every error), the shape rule, the reference kernel against hand-computed sums of products,
// and the round trip. Compiled einsum: tests/backend/test_backend_ops.cpp; its gradients:
// tests/autograd/test_rules_linalg.cpp; PyTorch's values: tools/torch_check/cases/einsum.kir.

Attrs eq(const std::string& e) { return {{"equation", e}}; }
Shape shape_of(const std::string& e, std::vector<TensorMeta> ins) { return meta::meta_einsum(ins, eq(e)).at(0).shape; }

// The result's subscripts as letters ("..." dims as '.').
std::string result_of(const std::string& e, const std::vector<int64_t>& ranks) {
  EinsumSpec s = parse_einsum(e, ranks);
  std::string out;
  for (int l : s.output) out += s.names[static_cast<size_t>(l)].size() == 1 ? s.names[static_cast<size_t>(l)] : ".";
  return out;
}

TEST(Einsum, ImplicitResultsAreTheLettersSeenOnceSortedAfterTheEllipsis) {
  EXPECT_EQ(result_of("ij,jk", {2, 2}), "ik");
  EXPECT_EQ(result_of("ii", {2}), "");           // a trace
  EXPECT_EQ(result_of("ba", {2}), "ab");         // a transpose
  EXPECT_EQ(result_of("Ba,aA", {2, 2}), "AB");   // upper case first
  EXPECT_EQ(result_of("...ij,jk", {4, 2}), "..ik");
  EXPECT_EQ(result_of(" i j , j k -> k i ", {2, 2}), "ki");  // spaces
  EXPECT_EQ(result_of("ij->", {2}), "");
}

TEST(Einsum, ShapesBroadcastAndEllipsesAlignFromTheRight) {
  EXPECT_EQ(shape_of("ij,jk->ik", {F({2, 3}), F({3, 4})}), (Shape{2, 4}));
  EXPECT_EQ(shape_of("ii->i", {F({3, 3})}), (Shape{3}));
  EXPECT_EQ(shape_of("...ij,...jk->...ik", {F({5, 1, 2, 3}), F({4, 3, 6})}), (Shape{5, 4, 2, 6}));
  EXPECT_EQ(shape_of("bij,bkj->bik", {F({7, 2, 3}), F({1, 4, 3})}), (Shape{7, 2, 4}));  // b broadcast from 1
  EXPECT_EQ(shape_of("i,j,k->kji", {F({2}), F({3}), F({4})}), (Shape{4, 3, 2}));
  EXPECT_EQ(shape_of("...->...", {F({})}), (Shape{}));
  EXPECT_EQ(shape_of("ij,jk->ik", {F({0, 3}), F({3, 4})}), (Shape{0, 4}));
}

TEST(Einsum, ErrorsSayWhatIsWrong) {
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3}), F({3, 4})}, eq("ij,jk->il"), "'l' is not one of the operands'"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ij->ii"), "repeats subscript 'i'"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ij,jk"), "subscripts for 2 operands, 1 given"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ijk"), "operand 0 has 3 subscripts for its 2 dims"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2}), F({3})}, eq("i,i"), "subscript 'i' has size 3 in operand 1 and 2"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ii"), "repeated in operand 0 with sizes 2 and 3"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("i1"), "'1' in operand 0 is not a subscript"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("ij->..."), "no operand has one"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2, 3})}, eq("i...j..."), "more than one ellipsis"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {F({2}), TensorMeta(DType::F64, {2})}, eq("i,i"), "einsum"));
  EXPECT_TRUE(meta_fails(Op::Einsum, {TensorMeta(DType::Bool, {2})}, eq("i"), "bool"));
}

TEST(Einsum, ReferenceSumsProducts) {
  HostTensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6}), b = f32({3, 2}, {1, 0, 0, 1, 1, 1});
  EXPECT_EQ(vals(run1(Op::Einsum, {a, b}, eq("ij,jk->ik"))), (std::vector<double>{4, 5, 10, 11}));
  EXPECT_EQ(vals(run1(Op::Einsum, {a}, eq("ij->ji"))), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(vals(run1(Op::Einsum, {a}, eq("ij->"))), (std::vector<double>{21}));
  EXPECT_EQ(vals(run1(Op::Einsum, {a}, eq("ij->j"))), (std::vector<double>{5, 7, 9}));
  HostTensor sq = f32({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  EXPECT_EQ(vals(run1(Op::Einsum, {sq}, eq("ii"))), (std::vector<double>{15}));
  EXPECT_EQ(vals(run1(Op::Einsum, {sq}, eq("ii->i"))), (std::vector<double>{1, 5, 9}));
  // an outer product, a broadcast size-1 operand, three operands
  EXPECT_EQ(vals(run1(Op::Einsum, {f32({2}, {1, 2}), f32({3}, {1, 10, 100})}, eq("i,j->ij"))),
            (std::vector<double>{1, 10, 100, 2, 20, 200}));
  EXPECT_EQ(vals(run1(Op::Einsum, {f32({1}, {3}), f32({3}, {1, 2, 3})}, eq("i,i->i"))), (std::vector<double>{3, 6, 9}));
  EXPECT_EQ(vals(run1(Op::Einsum, {f32({2}, {1, 2}), f32({2, 2}, {1, 2, 3, 4}), f32({2}, {1, 1})}, eq("i,ij,j->"))),
            (std::vector<double>{1 * (1 + 2) + 2 * (3 + 4)}));
  // integers exactly, and an empty sum
  int64_t big = int64_t{1} << 31;
  HostTensor ib = i64({2}, {0, 0});
  ib.set_int(0, big);
  ib.set_int(1, 1);
  EXPECT_EQ(run1(Op::Einsum, {ib, ib}, eq("i,i->")).get_int(0), big * big + 1);
  HostTensor empty = run1(Op::Einsum, {f32({2, 0}, {}), f32({0, 3}, {})}, eq("ij,jk->ik"));
  EXPECT_EQ(empty.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(empty), (std::vector<double>(6, 0.0)));
}

TEST(Einsum, RoundTrips) {
  EXPECT_EQ(one_node_round_trip(Op::Einsum, {F({2, 3}), F({3, 4})}, eq("ij,jk->ik")),
            "%y = einsum(%x0, %x1, equation=\"ij,jk->ik\") : f32[2,4]");
  EXPECT_EQ(one_node_round_trip(Op::Einsum, {F({4, 2, 3})}, eq("...ij->...ji")),
            "%y = einsum(%x0, equation=\"...ij->...ji\") : f32[4,3,2]");
}

}  // namespace
}  // namespace kiln
