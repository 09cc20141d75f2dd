#pragma once
// The benchmark workloads shared by the CPU benchmark (cpu_bench.cpp) and the CUDA benchmark
// (cuda_bench.cpp): each builder returns the graph a backend compiles, at the shape asked for,
// so that the two benchmarks (and a small-shape correctness check) build them the same way.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/nn/llama.h"
#include "frontend/nn/minigpt.h"
#include "frontend/optim.h"
#include "frontend/trace.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::bench {

// relu(exp(tanh(x*y + 0.5) * sigmoid(y)) - x) over f32[n]: 8 pointwise ops, 1 kernel.
Graph pointwise_chain(int64_t n);
// gelu(x*w + b) * sigmoid(x), x f32[rows,cols], w and b f32[cols] (exact, erf-based gelu).
Graph gelu_bias_sigmoid(int64_t rows, int64_t cols);
// The same over x read through a transposed view: x f32[cols,rows], used as xᵀ [rows,cols].
Graph gelu_bias_sigmoid_transposed(int64_t rows, int64_t cols);
// softmax over the last dim of dt[rows,cols] (f32 or bf16).
Graph row_softmax(int64_t rows, int64_t cols, DType dt = DType::F32);
// layer_norm over the last dim of dt[rows,cols], with weight and bias dt[cols], eps 1e-5.
Graph layer_norm_forward(int64_t rows, int64_t cols, DType dt = DType::F32);
// Causal attention over q, k, v dt[batch,heads,seq,head_dim]: scaled_dot_product_attention.
Graph causal_attention(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim, DType dt = DType::F32);
// The mean cross_entropy of logits f32[rows,classes] against i64 targets [rows]: f32[].
Graph cross_entropy_loss(int64_t rows, int64_t classes);

// The backward half of `forward`'s joint graph (default partitioner): what a training step
// runs after the forward. Inputs: the saved tensors and the tangents; outputs: the gradients.
Graph backward_of(const Graph& forward);
// The joint forward+backward graph of `forward` with respect to the inputs named `wrt`.
Graph joint_of(const Graph& forward, std::vector<std::string> wrt);

// A training step (forward, backward, AdamW update in one graph) and the traced loss it came from.
struct TrainStepWorkload {
  TracedGraph loss;
  TrainStep step;
};
// Loss of the GPT-2 feed-forward block nn::MLP(d, hidden) (Linear-GELU-Linear) under
// cross_entropy against targets in [0, d), on a batch [batch, d].
TrainStepWorkload gelu_mlp_train_step(int64_t d, int64_t hidden, int64_t batch);
// Linear(in, hidden)-ReLU-Linear(hidden, classes) + cross_entropy, on a batch [batch, in].
TrainStepWorkload relu_mlp_train_step(int64_t in, int64_t hidden, int64_t classes, int64_t batch);
// mean(block(x)^2) of a GPT-2 block nn::Block(d_model, heads, seq) on x [batch, seq, d_model];
// with `autocast`, the loss is traced under kiln::Autocast of that dtype (f32 master weights,
// the casts in the graph), as torch.autocast around the loss.
TrainStepWorkload gpt2_block_train_step(int64_t d_model, int64_t heads, int64_t batch, int64_t seq,
                                        std::optional<DType> autocast = std::nullopt);
// nn::MiniGPT (by default vocab 600, d_model 64, 4 heads, 2 layers, context 32; GPT-2 small is
// {50257, 768, 12, 12, 1024}) and its loss on a batch of [batch, context] tokens and targets.
TrainStepWorkload minigpt_train_step(int64_t batch, const nn::MiniGPTConfig& config = {});
// nn::LlamaForCausalLM of `config` and its mean next-token cross-entropy on a batch of [batch,
// seq] tokens and targets; with `autocast`, traced under kiln::Autocast of that dtype (f32 master
// weights, the loss in f32), as torch.autocast around the loss.
TrainStepWorkload llama_train_step(int64_t batch, int64_t seq, const nn::LlamaConfig& config,
                                   std::optional<DType> autocast = std::nullopt);
// The inputs of a train step: its parameters' initial values, AdamW state as after a few steps
// (exp_avg ~ U(-0.01, 0.01), exp_avg_sq ~ U(0, 1e-4)), a random batch (integer targets below
// `int_bound`), step = 3, then the step's buffers (their traced values).
std::vector<HostTensor> train_step_inputs(const TrainStepWorkload& w, int64_t int_bound, uint64_t seed = 1);

// A GPT-2 transformer block (nn::Block: pre-LN attention + MLP, causal) on x f32[batch,seq,d]:
// inference, the block's output. Inputs: x, then the block's parameters (and the causal mask).
TracedGraph gpt2_block(int64_t d_model, int64_t heads, int64_t batch, int64_t seq);

// torchvision's ResNet-50 (nn::resnet50, 1000 classes) on x f32[batch,3,image,image]: inference
// in eval mode (the running statistics are inputs), and a training step (AdamW; BatchNorm's
// batch statistics, its running statistics written back by the step) under cross_entropy.
TracedGraph resnet50_inference(int64_t batch, int64_t image);
// torchvision's VisionTransformer (nn::VisionTransformer, 1000 classes) on x
// f32[batch,3,image,image]: inference, and an AdamW training step under cross_entropy.
struct ViTShape {
  int64_t image = 224, patch = 16, layers = 12, heads = 12, hidden = 768, mlp = 3072;  // ViT-B/16
};
TracedGraph vit_inference(int64_t batch, const ViTShape& shape);
TrainStepWorkload vit_train_step(int64_t batch, const ViTShape& shape);
TrainStepWorkload resnet50_train_step(int64_t batch, int64_t image);

// The least memory traffic of one run: every graph input read once, every output written once.
int64_t traffic_bytes(const Graph& g);
// Random graph inputs (seeds 1, 2, ... in input order): floats ~ U(-1, 1); integer inputs below
// the last dim of the first input (class targets index the logits they are scored against).
std::vector<HostTensor> inputs_for(const Graph& g);

}  // namespace kiln::bench
