#include "frontend/autograd.h"

#include <mutex>
#include <unordered_map>

#include "backend/compile.h"

#include "frontend/trace.h"
#include "ir/error.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"

namespace kiln {
namespace {

// The joint graph of a traced scalar function, run once: (value, grads in `wrt` order).
struct JointRun {
  HostTensor value;
  std::vector<HostTensor> grads;
};

JointRun run_joint(const TracedGraph& tg, const std::vector<HostTensor>& example_values,
                   const std::vector<std::string>& wrt, const Executor& executor) {
  const Graph& g = tg.graph;
  tg.reject_writes("kiln::grad", "call eval() on the module, or train it with make_train_step or kiln::compile(module, loss_fn, optimizer)");
  if (g.outputs().size() != 1) fail("kiln::grad: the function of '{}' must return one tensor", g.name());
  const TensorMeta& out = g.outputs()[0].meta();
  if (out.rank() != 0 || !is_floating(out.dtype))
    fail("kiln::grad: the function must return a 0-d floating-point tensor (a loss), got {}", out.str());
  autograd::JointOptions options;
  options.wrt = wrt;
  autograd::JointGraph joint = autograd::build_joint(g, options);
  std::vector<HostTensor> inputs = tg.graph_inputs(example_values);
  for (int i = 0; i < joint.num_tangents; ++i) {
    // The only differentiable output is the scalar loss: its tangent is 1 (d loss / d loss).
    const TensorMeta& meta = joint.graph.inputs()[static_cast<size_t>(joint.num_primals + i)]->meta();
    HostTensor one = HostTensor::empty(meta);
    for (int64_t k = 0; k < one.numel(); ++k) one.set(k, 1.0);
    inputs.push_back(std::move(one));
  }
  std::vector<HostTensor> outs = (executor ? executor : reference_executor())(joint.graph, inputs);
  KILN_INTERNAL_ASSERT(outs.size() == static_cast<size_t>(joint.num_forward_outputs) + wrt.size(),
                       "a joint graph returns its outputs, then one grad per wrt input");
  JointRun r;
  r.value = outs[0];
  r.grads.assign(outs.begin() + joint.num_forward_outputs, outs.end());
  return r;
}

std::vector<HostTensor> values_of(const std::vector<Tensor>& args) {
  std::vector<HostTensor> out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined()) fail("kiln::grad: argument {} is undefined", i);
    if (args[i].is_traced()) fail("kiln::grad: argument {} is a traced tensor; pass concrete tensors", i);
    out.push_back(args[i].data());
  }
  return out;
}

TracedGraph trace_scalar(const ScalarFn& fn, const std::vector<Tensor>& args) {
  return trace([&](const std::vector<Tensor>& in) { return std::vector<Tensor>{fn(in)}; }, args, "loss");
}

ValueAndGrads value_and_grad_once(const ScalarFn& fn, const std::vector<int>& argnums, const Executor& executor,
                                  const std::vector<Tensor>& args) {
  std::vector<HostTensor> values = values_of(args);
  TracedGraph tg = trace_scalar(fn, args);
  std::vector<std::string> wrt;
  const int n = static_cast<int>(args.size());
  for (int a : argnums) {
    int i = a < 0 ? a + n : a;
    if (i < 0 || i >= n) fail("kiln::grad: argnum {} is out of range for {} argument{}", a, n, n == 1 ? "" : "s");
    const Node* in = tg.graph.inputs()[static_cast<size_t>(i)];
    if (!is_floating(in->meta().dtype))
      fail("kiln::grad: argument {} (%{}) is {}, not floating point: it has no gradient", i, in->name(),
           in->meta().str());
    wrt.push_back(in->name());
  }
  JointRun r = run_joint(tg, values, wrt, executor);
  ValueAndGrads out;
  out.value = Tensor(r.value);
  for (auto& gt : r.grads) out.grads.emplace_back(std::move(gt));
  return out;
}

}  // namespace

Executor reference_executor() {
  return [](const Graph& g, std::span<const HostTensor> inputs) { return interpret(g, inputs); };
}

Executor compiled_executor(Device device) {
  // One compile per graph: a training loop hands the same step graph every time. The cache is
  // keyed by the graph's identity (Graph::id: never reused, unlike an address), and checked
  // against its name and size in case the graph was changed in place.
  struct Entry {
    std::string name;
    size_t nodes = 0, inputs = 0;
    std::shared_ptr<backend::CompiledGraph> compiled;
  };
  auto cache = std::make_shared<std::unordered_map<uint64_t, Entry>>();
  auto mu = std::make_shared<std::mutex>();
  return [cache, mu, device](const Graph& g, std::span<const HostTensor> inputs) {
    std::shared_ptr<backend::CompiledGraph> c;
    {
      std::lock_guard lock(*mu);
      Entry& e = (*cache)[g.id()];
      if (!e.compiled || e.name != g.name() || e.nodes != g.num_nodes() || e.inputs != g.inputs().size()) {
        backend::CompileOptions options;
        options.device = device;
        options.origin = "compiled_executor";
        e = {g.name(), g.num_nodes(), g.inputs().size(), std::make_shared<backend::CompiledGraph>(backend::compile(g, options))};
      }
      c = e.compiled;
    }
    return c->run(inputs);
  };
}

GradFn grad(ScalarFn fn, std::vector<int> argnums, Executor executor) {
  return [fn = std::move(fn), argnums = std::move(argnums), executor = std::move(executor)](const std::vector<Tensor>& args) {
    return value_and_grad_once(fn, argnums, executor, args).grads;
  };
}

ValueAndGradFn value_and_grad(ScalarFn fn, std::vector<int> argnums, Executor executor) {
  return [fn = std::move(fn), argnums = std::move(argnums), executor = std::move(executor)](const std::vector<Tensor>& args) {
    return value_and_grad_once(fn, argnums, executor, args);
  };
}

const Tensor& ModuleGrads::operator[](const std::string& path) const {
  for (const auto& [p, g] : grads)
    if (p == path) return g;
  fail("no parameter named '{}' among the {} gradients", path, grads.size());
}

ModuleGrads value_and_grad(const nn::Module& module, const ScalarFn& loss_fn, const std::vector<Tensor>& batch,
                           Executor executor) {
  std::vector<HostTensor> values = values_of(batch);
  TracedGraph tg = trace_scalar(loss_fn, batch);
  // The parameters the loss reads are lifted into graph inputs, known by their module path.
  std::unordered_map<std::string, std::string> input_of_path;
  for (size_t i = 0; i < tg.parameter_paths.size(); ++i)
    if (!tg.parameter_paths[i].empty()) input_of_path[tg.parameter_paths[i]] = tg.parameter_names[i];
  std::vector<std::string> wrt;
  auto params = module.named_parameters();
  for (const auto& [path, t] : params) {
    auto it = input_of_path.find(path);
    if (it != input_of_path.end() && is_floating(t.dtype())) wrt.push_back(it->second);
  }
  JointRun r = run_joint(tg, values, wrt, executor);
  ModuleGrads out;
  out.loss = Tensor(r.value);
  size_t k = 0;
  for (const auto& [path, t] : params) {
    auto it = input_of_path.find(path);
    if (it != input_of_path.end() && is_floating(t.dtype())) out.grads.emplace_back(path, Tensor(r.grads[k++]));
    else out.grads.emplace_back(path, Tensor(HostTensor::empty(t.meta().contiguous())));
  }
  return out;
}

// ---- grad mode

namespace {
thread_local bool g_grad_enabled = true;
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : previous_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = previous_; }

}  // namespace kiln
