// scatter_reduce's derivatives: through its decomposition (scatter_add, where, scatter_fold),
// gradchecked in float64 for every reduction with and without self, and PyTorch 1.13's own
// gradients where they are not smooth: amax's ties share the gradient, prod's zeros.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <string>

#include "tests/support/gradcheck_util.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using kiln::testing::gradcheck_values;
using kiln::testing::joint_gradients;
using kiln::testing::make;
using kiln::testing::one_op_graph;
using kiln::testing::vals;

HostTensor rnd(const Shape& s, uint64_t seed) { return testing::random_input(TensorMeta(DType::F64, s), testing::Range::Any, seed); }
HostTensor idx(const Shape& s, std::vector<double> v) { return make(DType::I64, s, std::move(v)); }
HostTensor f64(const Shape& s, std::vector<double> v) { return make(DType::F64, s, std::move(v)); }

Attrs reduce_attrs(int64_t dim, const std::string& reduce, bool include_self) {
  return {{"dim", dim}, {"reduce", reduce}, {"include_self", include_self}};
}

TEST(ScatterReduceRules, EveryReductionWithAndWithoutSelf) {
  for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"})
    for (bool include_self : {true, false}) {
      SCOPED_TRACE(fmt::format("{} include_self={}", reduce, include_self));
      // Repeated destinations, one row reached by nothing (row 1 of dim 0), src wider than index.
      EXPECT_TRUE(gradcheck_values(Op::ScatterReduce, {rnd({3, 4}, 1), idx({2, 3}, {0, 2, 2, 2, 0, 0}), rnd({3, 5}, 2)},
                                   reduce_attrs(0, reduce, include_self)));
      EXPECT_TRUE(gradcheck_values(Op::ScatterReduce, {rnd({2, 5}, 3), idx({2, 3}, {4, 4, 0, 1, 2, 1}), rnd({2, 3}, 4)},
                                   reduce_attrs(-1, reduce, include_self)));
    }
}

TEST(ScatterReduceRules, ScatterFoldItself) {
  for (const char* reduce : {"prod", "amax", "amin"})
    EXPECT_TRUE(gradcheck_values(Op::ScatterFold, {rnd({3, 4}, 5), idx({3, 2}, {1, 1, 0, 3, 3, 3}), rnd({3, 2}, 6)},
                                 {{"dim", int64_t{1}}, {"reduce", std::string(reduce)}}))
        << reduce;
}

// What PyTorch 1.13 gives (`o = s.scatter_reduce(0, i, src, r); o.sum().backward()`).
TEST(ScatterReduceRules, TiesAndZerosAsPyTorch) {
  auto grads = [](HostTensor self, HostTensor index, HostTensor src, const std::string& reduce, bool include_self) {
    Graph g = one_op_graph(Op::ScatterReduce, {self.meta(), index.meta(), src.meta()}, reduce_attrs(0, reduce, include_self));
    HostTensor ones = make(DType::F64, self.shape(), std::vector<double>(static_cast<size_t>(self.numel()), 1.0));
    return joint_gradients(g, {self, index, src}, {ones});
  };
  // amax: [1, 2, 3] with src [0, 5, 2, 2] at [0, 0, 2, 2]: 5 wins element 0, self's 3 element 2.
  std::vector<HostTensor> a = grads(f64({3}, {1, 2, 3}), idx({4}, {0, 0, 2, 2}), f64({4}, {0, 5, 2, 2}), "amax", true);
  EXPECT_EQ(vals(a[0]), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(vals(a[1]), (std::vector<double>{0, 1, 0, 0}));
  // A tie: self's 3 and src's 3 share element 0's gradient.
  std::vector<HostTensor> t = grads(f64({2}, {3, 1}), idx({3}, {0, 0, 1}), f64({3}, {3, 1, 3}), "amax", true);
  EXPECT_EQ(vals(t[0]), (std::vector<double>{0.5, 0}));
  EXPECT_EQ(vals(t[1]), (std::vector<double>{0.5, 0, 1}));
  // prod with zeros: [1, 2, 0] and src [0, 5, 2, 0] at [0, 0, 2, 1]: one zero in each element;
  // the zero's gradient is the product of the others, the rest 0.
  std::vector<HostTensor> p = grads(f64({3}, {1, 2, 0}), idx({4}, {0, 0, 2, 1}), f64({4}, {0, 5, 2, 0}), "prod", true);
  EXPECT_EQ(vals(p[0]), (std::vector<double>{0, 0, 2}));
  EXPECT_EQ(vals(p[1]), (std::vector<double>{5, 0, 0, 2}));
  // mean without self, tangent 1: element 0 the mean of 3 and 1, element 2 kept from self.
  std::vector<HostTensor> m = grads(f64({3}, {3, 1, 5}), idx({3}, {0, 0, 1}), f64({3}, {3, 1, 3}), "mean", false);
  EXPECT_EQ(vals(m[0]), (std::vector<double>{0, 0, 1}));
  EXPECT_EQ(vals(m[1]), (std::vector<double>{0.5, 0.5, 1}));
  // (Without self, a tie between the winning src element and the excluded self element: PyTorch
  // 1.13 still counts self among the ties and gives the src element half; kiln gives it the whole
  // gradient, the derivative of what the forward computes.)
  std::vector<HostTensor> x = grads(f64({2}, {3, 1}), idx({3}, {0, 0, 1}), f64({3}, {3, 1, 3}), "amax", false);
  EXPECT_EQ(vals(x[0]), (std::vector<double>{0, 0}));
  EXPECT_EQ(vals(x[1]), (std::vector<double>{1, 0, 1}));
}

}  // namespace
}  // namespace kiln
