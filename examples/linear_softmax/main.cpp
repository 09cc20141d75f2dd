// nn::Linear(64, 600) followed by softmax, the way kiln sees it:
//   1. kiln::trace runs the C++ code once and records it as a graph (the weights become inputs);
//   2. print_graph writes that graph in kiln's text form (.kir);
//   3. autograd::build_joint derives the joint forward-backward graph, as AOTAutograd does;
//   4. each backward node is listed with the forward node whose derivative it computes.
#include <fmt/format.h>

#include <optional>
#include <string>
#include <vector>

#include "frontend/kiln.h"
#include "ir/error.h"
#include "ir/printer.h"
#include "passes/autograd/joint.h"

using namespace kiln;

int main() {
  try {
    nn::Linear layer(64, 600, /*bias=*/true, /*seed=*/0);
    Tensor x(random_tensor(TensorMeta(DType::F32, {8, 64}), /*seed=*/1), "x");

    TracedGraph traced = trace([&](const Tensor& t) { return softmax(layer(t), /*dim=*/-1); }, x);
    fmt::print("== the traced forward graph (the layer's weight and bias became inputs)\n{}\n",
               print_graph(traced.graph));

    // Gradients with respect to every floating-point input: x, weight and bias.
    autograd::JointGraph joint = autograd::build_joint(traced.graph);
    fmt::print("== the joint graph: (inputs..., tangents...) -> (outputs..., gradients...)\n{}\n",
               print_graph(joint.graph));

    // The joint graph starts with the forward nodes, unchanged; the backward nodes follow, made
    // by the derivative rules of the forward nodes in reverse order (softmax's, then linear's).
    fmt::print("== the backward nodes, under the forward node whose derivative they compute\n");
    const std::vector<Node*> nodes = joint.graph.nodes();
    std::optional<std::string> current;  // the forward node of the group being printed
    for (size_t i = traced.graph.num_nodes(); i < nodes.size(); ++i) {
      const Node& n = *nodes[i];
      auto it = joint.derivative_of.find(n.name());
      const std::string forward = it == joint.derivative_of.end() ? "" : it->second;
      if (forward != current) {
        current = forward;
        if (forward.empty()) fmt::print("made by build_joint itself (a zero gradient, a copy that names one)\n");
        else fmt::print("the derivative of {}\n", print_node(*joint.graph.find(forward).node));
      }
      fmt::print("    {}\n", print_node(n));
    }
    for (const std::string& input : joint.wrt) fmt::print("the gradient of %{} is %grad_{}\n", input, input);
    return 0;
  } catch (const Error& e) {
    fmt::print(stderr, "error: {}\n", e.what());
    return 1;
  }
}
