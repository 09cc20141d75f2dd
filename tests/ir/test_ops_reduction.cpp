// Reductions: shape-and-dtype rules (dims, keepdim, dtype=, errors), reference kernels against
// hand-computed values (NaN, empty slices, ints, views, 0-d) and print/parse round trips.
#include <gtest/gtest.h>

#include <limits>

#include "tests/support/support.h"

namespace kiln {
namespace {

using namespace testing;  // the shared helpers of tests/support
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// 1..6 as [[1,2,3],[4,5,6]].
HostTensor m23(DType dt = DType::F64) { return make(dt, {2, 3}, {1, 2, 3, 4, 5, 6}); }

// ---- shape-and-dtype rules

TEST(ReductionMeta, DimsKeepdimAndDTypes) {
  TensorMeta x = T(DType::F32, {2, 3, 4});
  for (Op op : {Op::Sum, Op::Mean, Op::Amax, Op::Amin, Op::Var}) {
    SCOPED_TRACE(std::string(op_name(op)));
    EXPECT_EQ(meta(op, {x}), T(DType::F32, {}));
    EXPECT_EQ(meta(op, {x}, {{"dim", IntList{}}}), T(DType::F32, {}));  // [] means every dim
    EXPECT_EQ(meta(op, {x}, {{"dim", IntList{-1, 0}}}), T(DType::F32, {3}));
    EXPECT_EQ(meta(op, {x}, {{"dim", IntList{1}}, {"keepdim", true}}), T(DType::F32, {2, 1, 4}));
    EXPECT_EQ(meta(op, {x}, {{"keepdim", true}}), T(DType::F32, {1, 1, 1}));
    EXPECT_TRUE(has(meta_error(op, {x}, {{"dim", IntList{3}}}), "dim 3 is out of range for a tensor of rank 3"));
    EXPECT_TRUE(has(meta_error(op, {x}, {{"dim", IntList{1, -2}}}), "dim 1 appears more than once"));
  }
  EXPECT_EQ(meta(Op::Sum, {T(DType::I32, {3})}), T(DType::I64, {}));  // integer sums accumulate in int64
  EXPECT_EQ(meta(Op::Sum, {T(DType::Bool, {3})}), T(DType::I64, {}));
  EXPECT_EQ(meta(Op::Sum, {T(DType::F16, {3})}), T(DType::F16, {}));
  EXPECT_EQ(meta(Op::Sum, {T(DType::F32, {3})}, {{"dtype", DType::I32}}), T(DType::I32, {}));
  EXPECT_EQ(meta(Op::Mean, {T(DType::I64, {3})}, {{"dtype", DType::F64}}), T(DType::F64, {}));
  EXPECT_TRUE(has(meta_error(Op::Mean, {T(DType::I64, {3})}), "mean needs a floating-point input or dtype, got i64"));
  EXPECT_EQ(meta(Op::Amax, {T(DType::I32, {2, 3})}, {{"dim", IntList{0}}}), T(DType::I32, {3}));
  EXPECT_EQ(meta(Op::Amin, {T(DType::F32, {0, 3})}, {{"dim", IntList{1}}}), T(DType::F32, {0}));  // no empty slice
  EXPECT_TRUE(has(meta_error(Op::Amax, {T(DType::F32, {0, 3})}, {{"dim", IntList{0}}}),
                  "cannot compute a max or min over an empty dimension (dim 0 has size 0)"));
  EXPECT_TRUE(has(meta_error(Op::Amin, {T(DType::F32, {0, 3})}), "over an empty dimension"));
  EXPECT_TRUE(has(meta_error(Op::Var, {T(DType::I64, {3})}), "var needs a floating-point input, got i64"));
  EXPECT_TRUE(has(meta_error(Op::Sum, {x}, {{"dim", 1.5}}), "attribute 'dim' must be"));
}

TEST(ReductionMeta, ArgmaxAndProdTakeOneDim) {
  TensorMeta x = T(DType::F32, {2, 3});
  EXPECT_EQ(meta(Op::Argmax, {x}), T(DType::I64, {}));
  EXPECT_EQ(meta(Op::Argmax, {x}, {{"keepdim", true}}), T(DType::I64, {1, 1}));
  EXPECT_EQ(meta(Op::Argmax, {x}, {{"dim", int64_t(-1)}}), T(DType::I64, {2}));
  EXPECT_EQ(meta(Op::Argmax, {x}, {{"dim", int64_t(0)}, {"keepdim", true}}), T(DType::I64, {1, 3}));
  EXPECT_TRUE(has(meta_error(Op::Argmax, {T(DType::F32, {0})}), "argmax of an empty tensor"));
  EXPECT_TRUE(has(meta_error(Op::Argmax, {x}, {{"dim", int64_t(2)}}), "out of range"));
  EXPECT_TRUE(has(meta_error(Op::Argmax, {x}, {{"dim", IntList{0, 1}}}), "attribute 'dim' must be int"));
  EXPECT_EQ(meta(Op::Prod, {x}), T(DType::F32, {}));
  EXPECT_EQ(meta(Op::Prod, {x}, {{"dim", int64_t(1)}, {"keepdim", true}}), T(DType::F32, {2, 1}));
  EXPECT_EQ(meta(Op::Prod, {T(DType::I32, {2})}), T(DType::I64, {}));
  EXPECT_EQ(meta(Op::Prod, {T(DType::I32, {2})}, {{"dtype", DType::F16}}), T(DType::F16, {}));
  EXPECT_TRUE(has(meta_error(Op::Prod, {x}, {{"dim", int64_t(-3)}}), "dim -3 is out of range"));
}

// ---- kernels

TEST(ReductionKernel, SumOverDims) {
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {m23()}), make(DType::F64, {}, {21})));
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {m23()}, {{"dim", IntList{0}}}), make(DType::F64, {3}, {5, 7, 9})));
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {m23()}, {{"dim", IntList{-1}}, {"keepdim", true}}), make(DType::F64, {2, 1}, {6, 15})));
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {m23()}, {{"dim", IntList{1, 0}}}), make(DType::F64, {}, {21})));
  // Over the middle dim of [2,2,2] = 0..7.
  HostTensor c = make(DType::F32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {c}, {{"dim", IntList{1}}}), make(DType::F32, {2, 2}, {2, 4, 10, 12})));
  // A transposed view: [[1,4],[2,5],[3,6]] summed over dim 0 is [6,15].
  HostTensor t = m23().view(TensorMeta(DType::F64, {3, 2}, {1, 3}), 0);
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {t}, {{"dim", IntList{0}}}), make(DType::F64, {2}, {6, 15})));
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {make(DType::F32, {3}, {1, kInf, -kInf})}), make(DType::F32, {}, {kNan})));
}

TEST(ReductionKernel, SumDTypesEmptyAndZeroDim) {
  HostTensor s = run1(Op::Sum, {ints(DType::I32, {3}, {2147483647, 1, 1})});
  EXPECT_EQ(s.dtype(), DType::I64);
  EXPECT_EQ(s.get_int(0), 2147483649);  // accumulates in int64, no 32-bit wrap
  EXPECT_EQ(run1(Op::Sum, {ints(DType::I64, {2}, {9007199254740993, 1})}).get_int(0), 9007199254740994);  // exact
  EXPECT_EQ(run1(Op::Sum, {ints(DType::Bool, {3}, {1, 1, 0})}).get_int(0), 2);
  // dtype= converts first: 1.7 and 2.7 become 1 and 2.
  HostTensor d = run1(Op::Sum, {make(DType::F32, {2}, {1.7, 2.7})}, {{"dtype", DType::I32}});
  EXPECT_EQ(d.dtype(), DType::I32);
  EXPECT_EQ(d.get_int(0), 3);
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {HostTensor::empty(DType::F32, {0, 3})}, {{"dim", IntList{0}}}),
                            make(DType::F32, {3}, {0, 0, 0})));
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {HostTensor::empty(DType::F32, {0})}), make(DType::F32, {}, {0})));
  EXPECT_TRUE(tensors_close(run1(Op::Sum, {HostTensor::scalar(DType::F32, 2.5)}, {{"dim", IntList{0}}}), make(DType::F32, {}, {2.5})));
  // f16 accumulates in double and rounds once: 2048 + 1 + 1 is 2050 (f16 steps by 2 there).
  EXPECT_EQ(run1(Op::Sum, {make(DType::F16, {3}, {2048, 1, 1})}).get(0), 2050);
}

TEST(ReductionKernel, Mean) {
  EXPECT_TRUE(tensors_close(run1(Op::Mean, {m23()}, {{"dim", IntList{1}}}), make(DType::F64, {2}, {2, 5})));
  EXPECT_TRUE(tensors_close(run1(Op::Mean, {m23()}), make(DType::F64, {}, {3.5})));
  EXPECT_TRUE(tensors_close(run1(Op::Mean, {ints(DType::I64, {2}, {1, 2})}, {{"dtype", DType::F32}}), make(DType::F32, {}, {1.5})));
  EXPECT_TRUE(tensors_close(run1(Op::Mean, {HostTensor::empty(DType::F32, {0})}), make(DType::F32, {}, {kNan})));
  EXPECT_TRUE(tensors_close(run1(Op::Mean, {make(DType::F32, {2}, {1, kNan})}), make(DType::F32, {}, {kNan})));
  EXPECT_TRUE(tensors_close(run1(Op::Mean, {HostTensor::scalar(DType::F64, -4)}), make(DType::F64, {}, {-4})));
}

TEST(ReductionKernel, Prod) {
  EXPECT_TRUE(tensors_close(run1(Op::Prod, {m23()}, {{"dim", int64_t(1)}}), make(DType::F64, {2}, {6, 120})));
  EXPECT_TRUE(tensors_close(run1(Op::Prod, {m23()}, {{"dim", int64_t(-2)}, {"keepdim", true}}), make(DType::F64, {1, 3}, {4, 10, 18})));
  EXPECT_TRUE(tensors_close(run1(Op::Prod, {m23()}), make(DType::F64, {}, {720})));
  EXPECT_TRUE(tensors_close(run1(Op::Prod, {HostTensor::empty(DType::F32, {0})}), make(DType::F32, {}, {1})));
  HostTensor p = run1(Op::Prod, {ints(DType::I32, {2, 2}, {1, 2, 3, -4})}, {{"dim", int64_t(1)}});
  EXPECT_EQ(p.dtype(), DType::I64);
  EXPECT_EQ(p.to_ints(), (std::vector<int64_t>{2, -12}));
  EXPECT_EQ(run1(Op::Prod, {ints(DType::I64, {2}, {int64_t(1) << 40, int64_t(1) << 30})}).get_int(0), 0);  // wraps
  EXPECT_TRUE(tensors_close(run1(Op::Prod, {make(DType::F32, {3}, {0, kInf, 1})}), make(DType::F32, {}, {kNan})));
}

TEST(ReductionKernel, AmaxAmin) {
  HostTensor x = make(DType::F32, {2, 3}, {1, kNan, -2, -kInf, 5, 0});
  EXPECT_TRUE(tensors_close(run1(Op::Amax, {x}, {{"dim", IntList{1}}}), make(DType::F32, {2}, {kNan, 5})));
  EXPECT_TRUE(tensors_close(run1(Op::Amin, {x}, {{"dim", IntList{1}}}), make(DType::F32, {2}, {kNan, -kInf})));
  EXPECT_TRUE(tensors_close(run1(Op::Amax, {x}, {{"dim", IntList{0}}}), make(DType::F32, {3}, {1, kNan, 0})));
  EXPECT_TRUE(tensors_close(run1(Op::Amin, {x}, {{"dim", IntList{0}}, {"keepdim", true}}), make(DType::F32, {1, 3}, {-kInf, kNan, -2})));
  EXPECT_TRUE(tensors_close(run1(Op::Amax, {x}), make(DType::F32, {}, {kNan})));
  HostTensor i = ints(DType::I64, {3}, {-9007199254740993, 4, -9007199254740992});
  EXPECT_EQ(run1(Op::Amin, {i}).get_int(0), -9007199254740993);
  EXPECT_EQ(run1(Op::Amax, {i}).get_int(0), 4);
  EXPECT_EQ(run1(Op::Amax, {ints(DType::Bool, {2}, {0, 1})}).get_int(0), 1);
  EXPECT_EQ(run1(Op::Amin, {ints(DType::Bool, {2}, {0, 1})}).get_int(0), 0);
  EXPECT_EQ(run1(Op::Amax, {HostTensor::empty(DType::F32, {0, 3})}, {{"dim", IntList{1}}}).shape(), (Shape{0}));
}

// PyTorch's rules at the edges: amax propagates NaN wherever it sits (after an +inf too);
// argmax treats NaN as the maximum and returns the first NaN, otherwise the first index of the
// maximum (ties of +inf, of -inf, of equal finite values); -0 and +0 are a tie.
TEST(ReductionKernel, AmaxAndArgmaxWithNaNInfinityAndTies) {
  HostTensor x = make(DType::F32, {6, 4},
                      {kInf, 1, kNan, 2,            //
                       -kInf, -kInf, -kInf, -kInf,  //
                       3, kInf, kInf, 3,            //
                       kNan, kNan, kInf, kNan,      //
                       7, -0.0, 7, 0,               //
                       -0.0, 0.0, -1, -2});
  EXPECT_TRUE(tensors_close(run1(Op::Amax, {x}, {{"dim", IntList{1}}}), make(DType::F32, {6}, {kNan, -kInf, kInf, kNan, 7, 0})));
  EXPECT_TRUE(tensors_close(run1(Op::Amin, {x}, {{"dim", IntList{1}}}), make(DType::F32, {6}, {kNan, -kInf, 3, kNan, -0.0, -2})));
  EXPECT_EQ(run1(Op::Argmax, {x}, {{"dim", int64_t(1)}}).to_ints(), (std::vector<int64_t>{2, 0, 1, 0, 0, 0}));
  EXPECT_EQ(run1(Op::Argmax, {x}).get_int(0), 2);  // the first NaN in row-major order
  // Down the columns: a NaN in row 3 of columns 0, 1 and 3 wins; column 2 has NaN in row 0.
  EXPECT_EQ(run1(Op::Argmax, {x}, {{"dim", int64_t(0)}}).to_ints(), (std::vector<int64_t>{3, 3, 0, 3}));
  HostTensor no_nan = make(DType::F32, {5}, {1, kInf, -kInf, kInf, 0});
  EXPECT_EQ(run1(Op::Argmax, {no_nan}).get_int(0), 1);
  EXPECT_EQ(run1(Op::Amax, {no_nan}).get(0), kInf);
}

TEST(ReductionKernel, ArgmaxFirstMaxAndNaN) {
  EXPECT_EQ(run1(Op::Argmax, {make(DType::F32, {4}, {1, kNan, 5, kNan})}).get_int(0), 1);  // NaN is the max
  EXPECT_EQ(run1(Op::Argmax, {make(DType::F32, {3}, {-kInf, -kInf, -kInf})}).get_int(0), 0);
  HostTensor t = ints(DType::I64, {2, 3}, {1, 3, 3, 2, 2, 0});
  EXPECT_EQ(run1(Op::Argmax, {t}, {{"dim", int64_t(1)}}).to_ints(), (std::vector<int64_t>{1, 0}));  // first of ties
  EXPECT_EQ(run1(Op::Argmax, {t}, {{"dim", int64_t(0)}}).to_ints(), (std::vector<int64_t>{1, 0, 0}));
  EXPECT_EQ(run1(Op::Argmax, {t}).get_int(0), 1);  // flat index over all elements
  HostTensor k = run1(Op::Argmax, {m23()}, {{"keepdim", true}});
  EXPECT_EQ(k.shape(), (Shape{1, 1}));
  EXPECT_EQ(k.get_int(0), 5);
  // The transposed view [[1,4],[2,5],[3,6]]: the max of each row is in column 1.
  HostTensor v = m23().view(TensorMeta(DType::F64, {3, 2}, {1, 3}), 0);
  EXPECT_EQ(run1(Op::Argmax, {v}, {{"dim", int64_t(1)}}).to_ints(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(run1(Op::Argmax, {v}).get_int(0), 5);
  EXPECT_EQ(run1(Op::Argmax, {ints(DType::I64, {2}, {9007199254740992, 9007199254740993})}).get_int(0), 1);  // exact ints
  EXPECT_EQ(run1(Op::Argmax, {HostTensor::scalar(DType::F32, 7)}).get_int(0), 0);
}

TEST(ReductionKernel, VarCorrection) {
  HostTensor x = make(DType::F64, {3}, {1, 2, 4});  // mean 7/3, sum of squared deviations 14/3
  EXPECT_TRUE(tensors_close(run1(Op::Var, {x}), make(DType::F64, {}, {7.0 / 3.0}), 1e-15));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {x}, {{"correction", int64_t(0)}}), make(DType::F64, {}, {14.0 / 9.0}), 1e-15));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {x}, {{"correction", 0.5}}), make(DType::F64, {}, {14.0 / 7.5}), 1e-15));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {m23()}, {{"dim", IntList{0}}}), make(DType::F64, {3}, {4.5, 4.5, 4.5})));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {m23()}, {{"dim", IntList{1}}, {"keepdim", true}}), make(DType::F64, {2, 1}, {1, 1})));
  // A zero divisor (N - correction <= 0) gives nan when all deviations are 0, else inf.
  EXPECT_TRUE(tensors_close(run1(Op::Var, {make(DType::F32, {1}, {3})}), make(DType::F32, {}, {kNan})));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {make(DType::F32, {2}, {1, 3})}, {{"correction", int64_t(2)}}), make(DType::F32, {}, {kInf})));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {make(DType::F32, {2}, {1, 1})}, {{"correction", int64_t(2)}}), make(DType::F32, {}, {kNan})));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {HostTensor::empty(DType::F32, {0})}), make(DType::F32, {}, {kNan})));
  EXPECT_TRUE(tensors_close(run1(Op::Var, {make(DType::F32, {2}, {1, kInf})}), make(DType::F32, {}, {kNan})));
  // Offset large values: the two-pass formula keeps var([1e9+1, 1e9+3]) = 2 exactly.
  EXPECT_EQ(run1(Op::Var, {make(DType::F64, {2}, {1e9 + 1, 1e9 + 3})}).get(0), 2.0);
}

TEST(ReductionRoundTrip, EveryOp) {
  TensorMeta x(DType::F32, {2, 3, 4});
  for (Op op : {Op::Sum, Op::Mean, Op::Amax, Op::Amin, Op::Var}) {
    one_node_round_trip(op, {x});
    one_node_round_trip(op, {x}, {{"dim", IntList{-1, 0}}, {"keepdim", true}});
  }
  one_node_round_trip(Op::Sum, {TensorMeta(DType::I32, {5})}, {{"dtype", DType::F64}});
  one_node_round_trip(Op::Mean, {TensorMeta(DType::I64, {5})}, {{"dtype", DType::F32}, {"dim", IntList{0}}});
  one_node_round_trip(Op::Var, {x}, {{"correction", 0.5}});
  one_node_round_trip(Op::Var, {x}, {{"correction", int64_t(0)}, {"dim", IntList{1}}});
  one_node_round_trip(Op::Argmax, {x});
  one_node_round_trip(Op::Argmax, {x}, {{"dim", int64_t(-1)}, {"keepdim", true}});
  one_node_round_trip(Op::Prod, {x}, {{"dim", int64_t(2)}});
  one_node_round_trip(Op::Prod, {TensorMeta(DType::I32, {5})}, {{"dtype", DType::I64}, {"keepdim", true}});
}

}  // namespace
}  // namespace kiln
