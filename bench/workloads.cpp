#include "bench/workloads.h"

#include <fmt/format.h>

#include <cmath>
#include <memory>

#include "frontend/autocast.h"
#include "frontend/nn/block.h"
#include "frontend/nn/layers.h"
#include "frontend/nn/minigpt.h"
#include "frontend/nn/mlp.h"
#include "frontend/nn/resnet.h"
#include "frontend/nn/vit.h"
#include "frontend/ops.h"
#include "ir/for_chunks.h"
#include "ir/parser.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"

namespace kiln::bench {

Graph pointwise_chain(int64_t n) {
  return parse_graph(fmt::format(R"(
graph pointwise(%x: f32[{0}], %y: f32[{0}]) {{
  %a = mul(%x, %y) : f32[{0}]
  %c = full(size=[], fill_value=0.5) : f32[]
  %b = add(%a, %c) : f32[{0}]
  %t = tanh(%b) : f32[{0}]
  %s = sigmoid(%y) : f32[{0}]
  %m = mul(%t, %s) : f32[{0}]
  %e = exp(%m) : f32[{0}]
  %r = sub(%e, %x) : f32[{0}]
  %o = relu(%r) : f32[{0}]
  return (%o)
}})", n));
}

Graph gelu_bias_sigmoid(int64_t rows, int64_t cols) {
  return parse_graph(fmt::format(R"(
graph gelu_bias_sigmoid(%x: f32[{0},{1}], %w: f32[{1}], %b: f32[{1}]) {{
  %xw = mul(%x, %w) : f32[{0},{1}]
  %h = add(%xw, %b) : f32[{0},{1}]
  %g = gelu(%h) : f32[{0},{1}]
  %s = sigmoid(%x) : f32[{0},{1}]
  %y = mul(%g, %s) : f32[{0},{1}]
  return (%y)
}})", rows, cols));
}

Graph gelu_bias_sigmoid_transposed(int64_t rows, int64_t cols) {
  return parse_graph(fmt::format(R"(
graph pointwise_transposed(%x: f32[{1},{0}], %w: f32[{1}], %b: f32[{1}]) {{
  %xt = transpose(%x, dim0=0, dim1=1) : f32[{0},{1}]
  %xw = mul(%xt, %w) : f32[{0},{1}]
  %h = add(%xw, %b) : f32[{0},{1}]
  %g = gelu(%h) : f32[{0},{1}]
  %s = sigmoid(%xt) : f32[{0},{1}]
  %y = mul(%g, %s) : f32[{0},{1}]
  return (%y)
}})", rows, cols));
}

Graph row_softmax(int64_t rows, int64_t cols, DType dt) {
  return parse_graph(fmt::format(R"(
graph softmax(%x: {2}[{0},{1}]) {{
  %y = softmax(%x, dim=-1) : {2}[{0},{1}]
  return (%y)
}})", rows, cols, dtype_name(dt)));
}

Graph causal_attention(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim, DType dt) {
  return parse_graph(fmt::format(R"(
graph attention(%q: {4}[{0},{1},{2},{3}], %k: {4}[{0},{1},{2},{3}], %v: {4}[{0},{1},{2},{3}]) {{
  %y = scaled_dot_product_attention(%q, %k, %v, is_causal=true) : {4}[{0},{1},{2},{3}]
  return (%y)
}})", batch, heads, seq, head_dim, dtype_name(dt)));
}

Graph layer_norm_forward(int64_t rows, int64_t cols, DType dt) {
  return parse_graph(fmt::format(R"(
graph layer_norm(%x: {2}[{0},{1}], %w: {2}[{1}], %b: {2}[{1}]) {{
  %y = layer_norm(%x, %w, %b, normalized_shape=[{1}]) : {2}[{0},{1}]
  return (%y)
}})", rows, cols, dtype_name(dt)));
}

Graph cross_entropy_loss(int64_t rows, int64_t classes) {
  return parse_graph(fmt::format(R"(
graph cross_entropy(%logits: f32[{0},{1}], %targets: i64[{0}]) {{
  %loss = cross_entropy(%logits, %targets) : f32[]
  return (%loss)
}})", rows, classes));
}

Graph backward_of(const Graph& forward) {
  autograd::JointGraph joint = autograd::build_joint(forward);
  return std::move(autograd::partition(joint, autograd::PartitionKind::Default).backward);
}

Graph joint_of(const Graph& forward, std::vector<std::string> wrt) {
  return std::move(autograd::build_joint(forward, {std::move(wrt)}).graph);
}

TrainStepWorkload gelu_mlp_train_step(int64_t d, int64_t hidden, int64_t batch) {
  nn::MLP mlp(d, hidden, 0);
  Tensor x = randn({batch, d}, 1), t = randint(0, d, {batch}, 2);
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{cross_entropy(mlp(b[0]), b[1])}; },
                           {x, t}, "mlp_loss");
  TrainStep step = make_train_step(loss, AdamWConfig{});
  return {std::move(loss), std::move(step)};
}

namespace {

class ReluMLP : public nn::Module {
 public:
  ReluMLP(int64_t in, int64_t hidden, int64_t classes) {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(in, hidden, true, nn::derive_seed(0, "fc1")));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(hidden, classes, true, nn::derive_seed(0, "fc2")));
  }
  Tensor operator()(const Tensor& x) const { return (*fc2)(relu((*fc1)(x))); }
  std::shared_ptr<nn::Linear> fc1, fc2;
};

}  // namespace

TrainStepWorkload relu_mlp_train_step(int64_t in, int64_t hidden, int64_t classes, int64_t batch) {
  ReluMLP mlp(in, hidden, classes);
  Tensor x = randn({batch, in}, 1), t = randint(0, classes, {batch}, 2);
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{cross_entropy(mlp(b[0]), b[1])}; },
                           {x, t}, "relu_mlp_loss");
  TrainStep step = make_train_step(loss, AdamWConfig{});
  return {std::move(loss), std::move(step)};
}

TrainStepWorkload gpt2_block_train_step(int64_t d_model, int64_t heads, int64_t batch, int64_t seq,
                                        std::optional<DType> autocast) {
  auto block = std::make_shared<nn::Block>(d_model, heads, seq, 0);
  Tensor x = randn({batch, seq, d_model}, 1);
  Autocast scope(autocast);
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{mean(square((*block)(b[0])))}; },
                           {x}, "gpt2_block_loss");
  TrainStep step = make_train_step(loss, AdamWConfig{});
  return {std::move(loss), std::move(step)};
}

TrainStepWorkload minigpt_train_step(int64_t batch, const nn::MiniGPTConfig& config) {
  nn::MiniGPT model(config, 0);
  const int64_t T = model.config().context, V = model.config().vocab_size;
  Tensor tokens = randint(0, V, {batch, T}, 1), targets = randint(0, V, {batch, T}, 2);
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{model.loss(b[0], b[1])}; },
                           {tokens, targets}, "minigpt_loss");
  TrainStep step = make_train_step(loss, AdamWConfig{});
  return {std::move(loss), std::move(step)};
}

TrainStepWorkload llama_train_step(int64_t batch, int64_t seq, const nn::LlamaConfig& config, std::optional<DType> autocast) {
  nn::LlamaForCausalLM model(config, 0);
  const int64_t V = config.vocab_size;
  Tensor tokens = randint(0, V, {batch, seq}, 1), targets = randint(0, V, {batch, seq}, 2);
  Autocast scope(autocast);
  TracedGraph loss = trace(
      [&](const std::vector<Tensor>& b) { return std::vector<Tensor>{cross_entropy(model(b[0]).reshape({-1, V}), b[1].reshape({-1}))}; },
      {tokens, targets}, "llama_loss");
  TrainStep step = make_train_step(loss, AdamWConfig{});
  return {std::move(loss), std::move(step)};
}

std::vector<HostTensor> train_step_inputs(const TrainStepWorkload& w, int64_t int_bound, uint64_t seed) {
  const TrainStep& ts = w.step;
  std::vector<HostTensor> params;  // the trained ones, by path (not a module's buffers)
  for (const std::string& path : ts.param_paths)
    for (size_t i = 0; i < w.loss.parameter_paths.size(); ++i)
      if (w.loss.parameter_paths[i] == path) {
        params.push_back(w.loss.parameters[i]);
        break;
      }
  TrainState st = ts.init(params);
  std::vector<HostTensor> ins = st.params;
  for (int i = 0; i < ts.num_state; ++i) {
    HostTensor s = random_tensor(st.state[static_cast<size_t>(i)].meta(), seed + static_cast<uint64_t>(i));
    const bool sq = ts.state_names[static_cast<size_t>(i)].ends_with("exp_avg_sq");
    for_chunks(s.numel(), [&](int64_t begin, int64_t end) {
      for (int64_t k = begin; k < end; ++k) s.set(k, sq ? std::abs(s.get(k)) * 1e-4 : s.get(k) * 1e-2);
    });
    ins.push_back(std::move(s));
  }
  const auto& gin = ts.graph.inputs();
  for (int i = 0; i < ts.num_batch; ++i) {
    const Node* in = gin[static_cast<size_t>(ts.num_params + ts.num_state + i)];
    ins.push_back(random_tensor(in->meta(), seed + 100 + static_cast<uint64_t>(i), int_bound));
  }
  ins.push_back(HostTensor::scalar(DType::F32, 3.0));
  ins.insert(ins.end(), st.buffers.begin(), st.buffers.end());  // a module's buffers (BatchNorm's running statistics)
  return ins;
}

TracedGraph resnet50_inference(int64_t batch, int64_t image) {
  auto net = nn::resnet50(1000, 64, 0);
  net->eval();
  Tensor x = randn({batch, 3, image, image}, 1);
  return trace([&](const Tensor& t) { return (*net)(t); }, x, "resnet50");
}

TracedGraph vit_inference(int64_t batch, const ViTShape& v) {
  nn::VisionTransformer vit(v.image, v.patch, v.layers, v.heads, v.hidden, v.mlp, 1000, 0);
  vit.eval();
  Tensor x = randn({batch, 3, v.image, v.image}, 1);
  return trace([&](const Tensor& t) { return vit(t); }, x, "vit");
}

TrainStepWorkload vit_train_step(int64_t batch, const ViTShape& v) {
  nn::VisionTransformer vit(v.image, v.patch, v.layers, v.heads, v.hidden, v.mlp, 1000, 0);
  Tensor x = randn({batch, 3, v.image, v.image}, 1), t = randint(0, 1000, {batch}, 2);
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{cross_entropy(vit(b[0]), b[1])}; }, {x, t},
                           "vit_loss");
  TrainStep step = make_train_step(loss, AdamWConfig{});
  return {std::move(loss), std::move(step)};
}

TrainStepWorkload resnet50_train_step(int64_t batch, int64_t image) {
  auto net = nn::resnet50(1000, 64, 0);
  Tensor x = randn({batch, 3, image, image}, 1), t = randint(0, 1000, {batch}, 2);
  TracedGraph loss = trace([&](const std::vector<Tensor>& b) { return std::vector<Tensor>{cross_entropy((*net)(b[0]), b[1])}; },
                           {x, t}, "resnet50_loss");
  TrainStep step = make_train_step(loss, AdamWConfig{});
  return {std::move(loss), std::move(step)};
}

TracedGraph gpt2_block(int64_t d_model, int64_t heads, int64_t batch, int64_t seq) {
  nn::Block block(d_model, heads, seq, 0);
  Tensor x = randn({batch, seq, d_model}, 1);
  return trace([&](const Tensor& t) { return block(t); }, x, "gpt2_block");
}

int64_t traffic_bytes(const Graph& g) {
  int64_t b = 0;
  for (const Node* in : g.inputs()) b += in->meta().nbytes();
  for (const Value& v : g.outputs()) b += v.meta().nbytes();
  return b;
}

std::vector<HostTensor> inputs_for(const Graph& g) {
  std::vector<HostTensor> ins;
  uint64_t seed = 1;
  for (const Node* in : g.inputs()) {
    int64_t bound = 8;
    // Class targets index the last dim of the logits they are scored against.
    if (is_integral(in->meta().dtype)) bound = g.inputs()[0]->meta().shape.back();
    ins.push_back(random_tensor(in->meta(), seed++, bound));
  }
  return ins;
}

}  // namespace kiln::bench
