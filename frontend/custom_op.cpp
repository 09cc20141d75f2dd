#include "frontend/custom_op.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/scalar_expr.h"
#include "frontend/dispatcher.h"
#include "ir/error.h"
#include "ir/meta/meta.h"
#include "passes/autograd/joint.h"

namespace kiln {

namespace {

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\n"), e = s.find_last_not_of(" \t\n");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

// "ns::name(args) -> ret" -> the name, and "args -> ret" in the form ir's parse_schema reads.
std::pair<std::string, std::string> split_schema(const std::string& schema) {
  const size_t open = schema.find('(');
  const size_t close = schema.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open)
    fail("cannot register custom op: schema '{}' is not of the form 'ns::name(Tensor x, float beta=1.0) -> Tensor'", schema);
  std::string name = trim(std::string_view(schema).substr(0, open));
  if (name.empty()) fail("cannot register custom op: schema '{}' has no op name before '('", schema);
  std::string rest = trim(std::string_view(schema).substr(close + 1));
  if (rest.empty()) fail("cannot register custom op '{}': schema '{}' has no result ('-> Tensor')", name, schema);
  if (rest.rfind("->", 0) != 0)
    fail("cannot register custom op '{}': schema '{}': expected '->' after the arguments, found '{}'", name, schema, rest);
  return {name, schema.substr(open + 1, close - open - 1) + " " + rest};
}

// Broadcast the tensor inputs; PyTorch's result type, at least a floating one.
MetaFn pointwise_meta() {
  return [](std::span<const TensorMeta> in, const Attrs&) {
    if (in.empty()) fail("expects at least one tensor input");
    Shape shape = in[0].shape;
    for (size_t i = 1; i < in.size(); ++i) shape = broadcast_shapes(shape, in[i].shape);
    DType dt = meta::result_type(in);
    if (!is_floating(dt)) dt = kDefaultFloat;
    return std::vector<TensorMeta>{TensorMeta(dt, shape, in[0].device)};
  };
}

// A VJP rule derived from a decomposition: the op's node alone in a graph of its own is
// decomposed and differentiated (autograd::build_joint, with the built-in ops' rules), and the
// gradient part of that joint graph is copied in where the rule is asked for.
autograd::VjpRule vjp_from_decomposition(DecompositionFn decomposition) {
  return [decomposition](autograd::VjpContext& c) -> std::vector<Value> {
    const Node& n = c.node;
    Graph sub("vjp_of_" + std::string(op_short_name(n.op())));
    std::vector<Value> ins;
    for (size_t i = 0; i < n.inputs().size(); ++i)
      ins.push_back(sub.add_input(fmt::format("in{}", i), n.input(static_cast<int>(i)).meta()));
    Node* copy = sub.add_node(n.op(), ins, n.attrs());
    Builder sb(sub, copy);
    DecompositionContext dc{sb, *copy};
    std::vector<Value> outs = decomposition(dc);
    sub.set_outputs(outs);
    autograd::JointGraph joint = autograd::build_joint(sub);
    // Joint inputs: the primals (in order), then one tangent per output; outputs: the forward
    // outputs, then the gradients of the floating inputs (joint.wrt), in order.
    std::unordered_map<const Node*, std::vector<Value>> mapped;
    const auto& jin = joint.graph.inputs();
    for (int i = 0; i < joint.num_primals; ++i) mapped[jin[static_cast<size_t>(i)]] = {n.input(i)};
    // Each output's tangent (tangent_for_output: its graph input, -1 for none) is the gradient
    // flowing into that result here, or zeros where none does.
    for (size_t o = 0; o < joint.tangent_for_output.size(); ++o) {
      if (joint.tangent_for_output[o] < 0) continue;
      const Node* t = jin[static_cast<size_t>(joint.tangent_for_output[o])];
      Value g = o < c.grad_outputs.size() ? c.grad_outputs[o] : Value{};
      mapped[t] = {g ? g : c.b.zeros(t->meta().shape, t->meta().dtype).v};
    }
    auto value_of = [&](Value v) { return mapped.at(v.node).at(static_cast<size_t>(v.index)); };
    for (Node* m : joint.graph.nodes()) {
      std::vector<Value> args;
      for (Value v : m->inputs()) args.push_back(value_of(v));
      std::vector<Value> res;
      for (const Var& r : c.b.op_n(m->op(), args, m->attrs())) res.push_back(r);
      mapped[m] = res;
    }
    std::vector<Value> grads(n.inputs().size());
    const auto& jout = joint.graph.outputs();
    for (size_t w = 0; w < joint.wrt.size(); ++w) {
      // wrt names the primals ("in<k>", as made above); their position is the op's input index.
      const auto it = std::find_if(jin.begin(), jin.begin() + joint.num_primals, [&](const Node* p) { return p->name() == joint.wrt[w]; });
      const size_t input = static_cast<size_t>(it - jin.begin());
      if (c.needs_grad[input]) grads[input] = value_of(jout[static_cast<size_t>(joint.num_forward_outputs) + w]);
    }
    return grads;
  };
}

}  // namespace

Op register_custom_op(const CustomOp& def) {
  auto [name, body] = split_schema(def.schema);
  if (find_op(name)) fail("cannot register custom op '{}': an op of that name exists", name);
  Schema schema = parse_schema(body);  // its errors name the schema and the argument
  const std::string what = fmt::format("cannot register custom op '{}'", name);
  if (!def.reference)
    fail("{}: a reference kernel is required (it defines the op; every compiled result is checked against it)", what);
  const bool opaque = def.cpu_kernel || !def.cuda_kernel.source.empty();
  if (def.scalar_expr.empty() && !opaque && !def.decomposition)
    fail("{}: give a scalar expression (a pointwise op that fuses), kernels of its own (cpu_kernel, cuda_kernel) or a "
         "decomposition into existing ops; with none it cannot be compiled",
         what);
  if (!def.scalar_expr.empty() && opaque)
    fail("{}: give a scalar expression or kernels of its own, not both (the expression is generated inline; the kernels "
         "are called)",
         what);
  if (!def.meta && def.scalar_expr.empty())
    fail("{}: a shape-and-dtype rule (meta) is required unless the op has a scalar expression", what);
  if (!def.cuda_kernel.source.empty() && def.cuda_kernel.entry.empty())
    fail("{}: the CUDA kernel needs the name of its extern \"C\" __global__ entry point (cuda_kernel.entry)", what);
  if (!def.cuda_kernel.source.empty() && def.cuda_kernel.source.find(def.cuda_kernel.entry) == std::string::npos)
    fail("{}: the CUDA source has no entry point named '{}'", what, def.cuda_kernel.entry);

  codegen::ScalarExprPtr expr;
  if (!def.scalar_expr.empty()) {
    if (schema.variadic_results) fail("{}: an op with a scalar expression has one result ('-> Tensor')", what);
    std::vector<std::string> inputs, attrs;
    for (const ArgSpec& a : schema.tensors) {
      if (a.type == ArgType::TensorList) fail("{}: an op with a scalar expression takes no Tensor[] argument ('{}')", what, a.name);
      inputs.push_back(a.name);
    }
    if (inputs.empty()) fail("{}: an op with a scalar expression needs at least one Tensor argument", what);
    for (const ArgSpec& a : schema.attrs)
      if (is_numeric(a.type)) attrs.push_back(a.name);
    expr = codegen::parse_scalar_expr(def.scalar_expr, inputs, attrs, what);
  }

  const OpCategory category = expr ? OpCategory::Pointwise : opaque ? OpCategory::Opaque : OpCategory::Composite;
  Op op = register_op(name, category, body, def.meta ? def.meta : pointwise_meta(), def.reference);
  if (expr) codegen::register_scalar_expr(op, expr, def.scalar_expr);
  if (def.vjp) autograd::register_vjp(op, def.vjp);
  else if (def.decomposition) autograd::register_vjp(op, vjp_from_decomposition(def.decomposition));
  // With an expression or kernels, those generate the code; the decomposition gives gradients.
  if (def.decomposition && category == OpCategory::Composite) register_decomposition(op, def.decomposition);
  if (opaque) backend::register_opaque_kernels(op, def.cpu_kernel, def.cuda_kernel);
  return op;
}

std::vector<Tensor> call_op(std::string_view name, std::span<const Tensor> inputs, const Attrs& attrs) {
  const OpInfo* info = find_op(name);
  if (!info) fail("no op named '{}' (a custom op must be registered before it is called)", name);
  return dispatch(info->op, inputs, attrs);
}

}  // namespace kiln
