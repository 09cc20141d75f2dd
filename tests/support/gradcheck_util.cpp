#include "tests/support/gradcheck_util.h"

#include <cmath>

#include "ir/error.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"

namespace kiln::testing {

TensorMeta F64(const Shape& shape) { return TensorMeta(DType::F64, shape); }

HostTensor random_input(const TensorMeta& meta, Range range, uint64_t seed) {
  HostTensor t = random_tensor(meta, seed);
  if (!is_floating(meta.dtype)) return t;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double u = t.get(i);  // U(-1, 1)
    switch (range) {
      case Range::Any: break;
      case Range::AwayFromZero: u = u >= 0 ? u + 0.25 : u - 0.25; break;
      case Range::Positive: u = std::abs(u) + 0.25; break;
      case Range::Wide: u *= 3; break;
      case Range::Inside: u *= 0.9; break;
    }
    t.set(i, u);
  }
  return t;
}


::testing::AssertionResult gradcheck_graph(const Graph& g, const std::vector<HostTensor>& inputs,
                                           const autograd::GradcheckOptions& options) {
  autograd::GradcheckResult r;
  try {
    r = autograd::gradcheck(g, inputs, options);
  } catch (const Error& e) {
    return ::testing::AssertionFailure() << "gradcheck threw: " << e.what() << "\n" << print_graph(g);
  }
  if (r.inputs.empty()) return ::testing::AssertionFailure() << "gradcheck checked no input\n" << print_graph(g);
  if (!r.ok) return ::testing::AssertionFailure() << autograd::format_gradcheck(r) << print_graph(g);
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult gradcheck_values(Op op, const std::vector<HostTensor>& inputs, const Attrs& attrs,
                                            const autograd::GradcheckOptions& options) {
  std::vector<TensorMeta> metas;
  for (auto& t : inputs) metas.push_back(t.meta());
  return gradcheck_graph(one_op_graph(op, metas, attrs), inputs, options);
}

::testing::AssertionResult gradcheck_op(Op op, const std::vector<TensorMeta>& inputs, const Attrs& attrs, Range range,
                                        uint64_t seed, const autograd::GradcheckOptions& options) {
  std::vector<HostTensor> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.push_back(random_input(inputs[i], range, seed * 101 + i));
  return gradcheck_values(op, values, attrs, options);
}

std::vector<HostTensor> joint_gradients(const Graph& g, const std::vector<HostTensor>& inputs,
                                        const std::vector<HostTensor>& tangents) {
  autograd::JointGraph j = autograd::build_joint(g);
  std::vector<HostTensor> all = inputs;
  all.insert(all.end(), tangents.begin(), tangents.end());
  std::vector<HostTensor> outs = interpret(j.graph, all);
  return std::vector<HostTensor>(outs.begin() + j.num_forward_outputs, outs.end());
}

}  // namespace kiln::testing
