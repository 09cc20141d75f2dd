#pragma once
// Gradient-check helpers for derivative-rule tests (tests/autograd/test_rules_*.cpp).
//
// Typical use, one line per case:
//
//   EXPECT_TRUE(gradcheck_op(Op::Mul, {F64({3, 1}), F64({1, 4})}));            // inputs U(-1, 1)
//   EXPECT_TRUE(gradcheck_op(Op::Log, {F64({5})}, {}, Range::Positive));         // inputs in [0.25, 1.25]
//   EXPECT_TRUE(gradcheck_op(Op::Sum, {F64({2, 3, 4})}, {{"dim", IntList{-1}}, {"keepdim", true}}));
//   EXPECT_TRUE(gradcheck_values(Op::Where, {mask, a, b}));                     // inputs given
//
// Each builds a graph with inputs %x0, %x1, ... and the single node %y = op(...), runs
// kiln::autograd::gradcheck on it (float64, full mode: every input element, central
// differences) and, on failure, reports the graph and gradcheck's per-input table.
// Integer and bool inputs get random values in [0, int_bound) / half true, and no gradient.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "passes/autograd/gradcheck.h"
#include "tests/support/support.h"  // one_op_graph

namespace kiln::testing {

// Where random floating inputs are drawn from: keep inputs away from the points where an op is
// not differentiable (abs/relu at 0, log/sqrt at <= 0, ...).
enum class Range {
  Any,           // U(-1, 1)
  AwayFromZero,  // [-1.25, -0.25] u [0.25, 1.25]
  Positive,      // [0.25, 1.25]
  Wide,          // U(-3, 3): both sides of clamp bounds, gelu's tails
  Inside,        // U(-0.9, 0.9): erfinv's domain, away from its poles
};

// f64 tensor types, the dtype gradcheck works in.
TensorMeta F64(const Shape& shape);

// A random tensor of `meta` with floating values drawn from `range` (deterministic in seed).
HostTensor random_input(const TensorMeta& meta, Range range, uint64_t seed);


// gradcheck of one op on random inputs (every input of `range`; seed picks the values).
::testing::AssertionResult gradcheck_op(Op op, const std::vector<TensorMeta>& inputs, const Attrs& attrs = {},
                                        Range range = Range::Any, uint64_t seed = 1,
                                        const autograd::GradcheckOptions& options = {});
// gradcheck of one op on the given input values.
::testing::AssertionResult gradcheck_values(Op op, const std::vector<HostTensor>& inputs, const Attrs& attrs = {},
                                            const autograd::GradcheckOptions& options = {});
// gradcheck of any graph on the given input values.
::testing::AssertionResult gradcheck_graph(const Graph& g, const std::vector<HostTensor>& inputs,
                                           const autograd::GradcheckOptions& options = {});

// The gradients build_joint + the interpreter give for `g` at `inputs` with output tangents
// `tangents` (one per floating output): one tensor per floating input, in input order.
std::vector<HostTensor> joint_gradients(const Graph& g, const std::vector<HostTensor>& inputs,
                                        const std::vector<HostTensor>& tangents);

}  // namespace kiln::testing
