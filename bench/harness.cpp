#include "bench/harness.h"

#include "backend/reference_check.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "backend/compile.h"
#include "backend/reference_check.h"
#include "bench/workloads.h"
#include "ir/error.h"
#include "ir/npy.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "runtime/cpu/jit.h"

namespace kiln::bench {

namespace {

NpyTensor named(const Node* in, std::string role, HostTensor value) {
  return {in->name(), std::move(role), "", std::move(value)};
}

// The graph's inputs (inputs_for) and outputs, in order, roles input and output.
Case plain(Graph g) {
  auto shared = std::make_shared<Graph>(g.clone());
  Case c{std::move(g), [shared] { return inputs_for(*shared); }, {}, {}};
  c.exchange = [shared](const RunCompiled& run) {
    NpyExchange x;
    std::vector<HostTensor> ins = inputs_for(*shared);
    std::vector<HostTensor> outs = run(*shared, ins);
    for (size_t i = 0; i < ins.size(); ++i) x.inputs.push_back(named(shared->inputs()[i], "input", ins[i]));
    for (size_t i = 0; i < outs.size(); ++i) x.outputs.push_back({fmt::format("out{}", i), "output", "", outs[i]});
    return x;
  };
  return c;
}

// A backward graph's case. Its timed graph reads the forward's saved tensors, which PyTorch
// does not have; the exchange therefore runs the partition's forward graph on the forward's
// inputs, then the timed backward graph on the saved tensors and the tangents, and hands
// PyTorch the forward's inputs, the tangents and the gradients.
Case backward_case(const Graph& forward) {
  autograd::JointGraph joint = autograd::build_joint(forward);
  auto part = std::make_shared<autograd::Partition>(autograd::partition(joint, autograd::PartitionKind::Default));
  auto fwd_inputs = [part] { return inputs_for(part->forward); };
  auto tangents = [part] {
    std::vector<HostTensor> t;
    const auto& bin = part->backward.inputs();
    for (size_t i = part->saved.size(); i < bin.size(); ++i)
      t.push_back(random_tensor(bin[i]->meta(), 1000 + i));
    return t;
  };
  // The timed run (and the interpreter check) reads random saved tensors: the time does not
  // depend on their values, and the interpreter would take seconds to make real ones.
  Case c{part->backward.clone(), [part] { return inputs_for(part->backward); }, {}, {}};
  c.exchange = [part, fwd_inputs, tangents](const RunCompiled& run) {
    NpyExchange x;
    std::vector<HostTensor> fins = fwd_inputs();
    std::vector<HostTensor> fouts = run(part->forward, fins);
    std::vector<HostTensor> bins(fouts.begin() + part->num_forward_outputs, fouts.end());
    std::vector<HostTensor> tans = tangents();
    bins.insert(bins.end(), tans.begin(), tans.end());
    std::vector<HostTensor> grads = run(part->backward, bins);
    for (size_t i = 0; i < fins.size(); ++i) x.inputs.push_back(named(part->forward.inputs()[i], "input", fins[i]));
    for (size_t i = 0; i < tans.size(); ++i) x.inputs.push_back({fmt::format("tangent{}", i), "tangent", "", tans[i]});
    for (size_t i = 0; i < grads.size(); ++i) x.outputs.push_back({fmt::format("grad{}", i), "grad", "", grads[i]});
    return x;
  };
  return c;
}

// A training step's case: parameters, AdamW state, the batch (rotated) and the step count in,
// the loss, the new parameters and the new state out, each parameter and state named by its
// module path. `exchanged`, where given, is the step whose run goes to PyTorch instead of the timed
// one (a model too large to write out whole: the same layers, fewer of them).
Case train_step_case(std::shared_ptr<TrainStepWorkload> timed, int64_t int_bound, nlohmann::json config,
                     std::shared_ptr<TrainStepWorkload> exchanged = nullptr) {
  Case c{timed->step.graph.clone(), [timed, int_bound] { return train_step_inputs(*timed, int_bound); }, {}, {}};
  for (int i = 0; i < timed->step.num_batch; ++i)
    c.rotated.push_back(static_cast<size_t>(timed->step.num_params + timed->step.num_state + i));
  auto ts = exchanged ? exchanged : timed;
  c.exchange = [ts, int_bound, config](const RunCompiled& run) {
    const TrainStep& st = ts->step;
    // The path of the parameter a state tensor belongs to ("<param name>_exp_avg").
    auto state_role = [&](size_t i) -> std::pair<std::string, std::string> {
      const std::string& n = st.state_names[i];
      for (size_t p = 0; p < st.param_names.size(); ++p)
        for (const char* kind : {"exp_avg_sq", "exp_avg", "momentum_buffer"})
          if (n == st.param_names[p] + "_" + kind) return {kind, st.param_paths[p]};
      fail("train step state {} belongs to no parameter", n);
    };
    NpyExchange x;
    x.config = config;
    std::vector<HostTensor> ins = train_step_inputs(*ts, int_bound);
    std::vector<HostTensor> outs = run(st.graph, ins);
    const auto& gin = st.graph.inputs();
    const size_t P = static_cast<size_t>(st.num_params), S = static_cast<size_t>(st.num_state);
    const size_t B = static_cast<size_t>(st.num_batch);
    // Inputs: the parameters, the state, the batch, the step count, the buffers.
    for (size_t i = 0; i < ins.size(); ++i) {
      NpyTensor t{gin[i]->name(), "step", "", ins[i]};
      if (i < P) t.role = "param", t.path = st.param_paths[i];
      else if (i < P + S) std::tie(t.role, t.path) = state_role(i - P);
      else if (i < P + S + B) t.role = "batch";
      else if (i > P + S + B) t.role = "buffer", t.path = st.buffer_paths[i - P - S - B - 1];
      x.inputs.push_back(std::move(t));
    }
    // Outputs: the loss, the parameters, the state, the buffers the step wrote.
    for (size_t i = 0; i < outs.size(); ++i) {
      NpyTensor t{fmt::format("out{}", i), "loss", "", outs[i]};
      if (i >= 1 && i <= P) t.role = "param", t.path = st.param_paths[i - 1];
      else if (i > P + S) t.role = "buffer", t.path = st.buffer_paths[st.written_buffers[i - 1 - P - S]];
      else if (i > P) std::tie(t.role, t.path) = state_role(i - 1 - P);
      x.outputs.push_back(std::move(t));
    }
    return x;
  };
  return c;
}

// A traced forward whose lifted tensors are a module's parameters and buffers (the GPT-2 block,
// the model rows): the example input (random), then each lifted tensor by its path for
// bench/npy_check.py.
Case lifted_case(std::shared_ptr<TracedGraph> tg, nlohmann::json config) {
  auto inputs = [tg] { return tg->graph_inputs({random_tensor(tg->graph.inputs()[0]->meta(), 1)}); };
  Case c{tg->graph.clone(), inputs, {0}, {}};
  c.exchange = [tg, inputs, config](const RunCompiled& run) {
    NpyExchange x;
    x.config = config;
    std::vector<HostTensor> ins = inputs();
    const size_t lifted0 = ins.size() - tg->parameters.size();
    for (size_t i = 0; i < ins.size(); ++i) {
      const std::string path = i >= lifted0 ? tg->parameter_paths[i - lifted0] : "";
      const bool buffer = i >= lifted0 && tg->parameter_tensors[i - lifted0].impl()->is_buffer;
      // an unnamed lifted tensor is a captured constant (the GPT-2 block's causal mask)
      x.inputs.push_back({tg->graph.inputs()[i]->name(), i < lifted0 ? "input" : buffer ? "buffer" : path.empty() ? "const" : "param", path, ins[i]});
    }
    x.outputs.push_back({"out0", "output", "", run(tg->graph, ins).at(0)});
    return x;
  };
  return c;
}

}  // namespace

std::vector<Workload> comparison_workloads(int64_t divisor) {
  const int64_t d = std::max<int64_t>(divisor, 1);
  const int64_t ln_rows = 16384 / d, sm_rows = 65536 / d, ce_rows = 4096 / d, batch = 65536 / d;
  const int64_t block_batch = std::max<int64_t>(8 / d, 1);
  std::vector<Workload> w;
  // Small shapes for the interpreter check: the first dim divided by 64 more (rows kept whole).
  auto small_rows = [](int64_t rows, int64_t floor) { return std::max<int64_t>(rows / 64, floor); };
  w.push_back({"pointwise", fmt::format("pointwise gelu(x*w+b)*sigmoid(x) [{},4096]", ln_rows), true, 10,
               [=](bool s) { return plain(gelu_bias_sigmoid(s ? small_rows(ln_rows, 4) : ln_rows, 4096)); }});
  w.push_back({"softmax", fmt::format("softmax [{},1024]", sm_rows), true, 10,
               [=](bool s) { return plain(row_softmax(s ? small_rows(sm_rows, 16) : sm_rows, 1024)); }});
  w.push_back({"layer_norm_fwd", fmt::format("layer_norm fwd [{},4096]", ln_rows), true, 50,
               [=](bool s) { return plain(layer_norm_forward(s ? small_rows(ln_rows, 4) : ln_rows, 4096)); }});
  w.push_back({"layer_norm_bwd", fmt::format("layer_norm bwd [{},4096]", ln_rows), true, 50, [=](bool s) {
                 return backward_case(layer_norm_forward(s ? small_rows(ln_rows, 4) : ln_rows, 4096));
               }});
  w.push_back({"cross_entropy", fmt::format("cross_entropy fwd+bwd [{},32000]", ce_rows), true, 10, [=](bool s) {
                 return plain(joint_of(cross_entropy_loss(s ? small_rows(ce_rows, 4) : ce_rows, 32000), {"logits"}));
               }});
  // Issue 28's shapes a new user tries: a transposed read, bf16 rows, a large odd vocabulary.
  w.push_back({"pointwise_transposed", fmt::format("pointwise over xT [{},4096]", ln_rows), true, 10,
               [=](bool s) { return plain(gelu_bias_sigmoid_transposed(s ? small_rows(ln_rows, 4) : ln_rows, 4096)); }});
  w.push_back({"softmax_bf16", fmt::format("softmax bf16 [{},1024]", sm_rows), true, 10,
               [=](bool s) { return plain(row_softmax(s ? small_rows(sm_rows, 16) : sm_rows, 1024, DType::BF16)); }});
  w.push_back({"layer_norm_fwd_bf16", fmt::format("layer_norm fwd bf16 [{},4096]", ln_rows), true, 50,
               [=](bool s) { return plain(layer_norm_forward(s ? small_rows(ln_rows, 4) : ln_rows, 4096, DType::BF16)); }});
  w.push_back({"softmax_vocab", fmt::format("softmax [{},50257]", ce_rows), true, 10,
               [=](bool s) { return plain(row_softmax(s ? small_rows(ce_rows, 4) : ce_rows, 50257)); }});
  // Attention alone (issue 28): causal, 12 heads, seq 1024, head dim 64 and 128, f32 and bf16,
  // forward and forward+backward; beside PyTorch's scaled_dot_product_attention.
  const int64_t attn_batch = std::max<int64_t>(8 / d, 1);
  for (DType dt : {DType::F32, DType::BF16})
    for (int64_t hd : {64, 128})
      for (bool bwd : {false, true}) {
        std::string id = fmt::format("attention{}_d{}{}", bwd ? "_fwd_bwd" : "", hd, dt == DType::BF16 ? "_bf16" : "");
        std::string name = fmt::format("attention {}causal [{},12,1024,{}]{}", bwd ? "fwd+bwd " : "", attn_batch, hd,
                                       dt == DType::BF16 ? " bf16" : "");
        w.push_back({id, name, false, dt == DType::BF16 ? 6000.0 : 50.0, [=](bool s) {
                       Graph g = causal_attention(s ? 1 : attn_batch, s ? 2 : 12, s ? 64 : 1024, hd, dt);
                       return plain(bwd ? joint_of(g, {"q", "k", "v"}) : std::move(g));
                     }});
      }
  w.push_back({"mlp_train_step", fmt::format("MLP 64-256-600 train step AdamW, batch {}", batch), false, 100, [=](bool s) {
                 auto ts = std::make_shared<TrainStepWorkload>(relu_mlp_train_step(64, 256, 600, s ? 1024 : batch));
                 return train_step_case(ts, 600, {{"model", "relu_mlp"}});
               }});
  w.push_back({"gpt2_block", fmt::format("GPT-2 block inference, batch {}, seq 1024", block_batch), false, 100, [=](bool s) {
                 const int64_t b = s ? 1 : block_batch, seq = s ? 128 : 1024;
                 return lifted_case(std::make_shared<TracedGraph>(gpt2_block(768, 12, b, seq)), {{"model", "block"}, {"heads", 12}});
               }});
  // The training steps (forward, backward, AdamW in one graph). Their checks run a smaller
  // model (the interpreter is slow): the GPT-2 block at d_model 64, 4 heads, seq 32.
  w.push_back({"gpt2_block_train_step", fmt::format("GPT-2 block train step AdamW, batch {}, seq 1024", block_batch), false,
               100, [=](bool s) {
                 auto ts = std::make_shared<TrainStepWorkload>(
                     s ? gpt2_block_train_step(64, 4, 2, 32) : gpt2_block_train_step(768, 12, block_batch, 1024));
                 return train_step_case(ts, 8, {{"model", "block"}, {"heads", s ? 4 : 12}});
               }});
  // The same step under bf16 autocast (issue 13's row): the GEMMs in bf16 on tensor cores with
  // f32 accumulation, layer norms, softmax and the loss in f32, the master weights and AdamW in
  // f32. Its check allows bf16's rounding (rtol 1.6e-2 against f32's 1.3e-6: slack 1000).
  w.push_back({"gpt2_block_train_step_bf16",
               fmt::format("GPT-2 block train step AdamW, bf16 autocast, batch {}, seq 1024", block_batch), false, 1000,
               [=](bool s) {
                 auto ts = std::make_shared<TrainStepWorkload>(s ? gpt2_block_train_step(64, 4, 2, 32, DType::BF16)
                                                                 : gpt2_block_train_step(768, 12, block_batch, 1024, DType::BF16));
                 return train_step_case(ts, 8, {{"model", "block"}, {"heads", s ? 4 : 12}, {"autocast", "bf16"}});
               }});
  // torchvision's ResNet-50 at 224x224 (issue 29's model rows), judged against torchvision by
  // PyTorch's .npy check: the interpreter's error bounds take minutes on its graphs even at
  // batch 2, 32x32 (tests/frontend/test_resnet.cpp checks ResNet-18 training against PyTorch).
  const int64_t rn_batch = std::max<int64_t>(32 / d, 1);
  const std::string too_large = "its graph is too large for the interpreter's error bounds";
  w.push_back({"resnet50", fmt::format("ResNet-50 inference, batch {}, 224x224", rn_batch), false, 100,
               [=](bool s) {
                 return lifted_case(std::make_shared<TracedGraph>(resnet50_inference(s ? 2 : rn_batch, s ? 32 : 224)),
                                    {{"model", "resnet50"}});
               },
               too_large});
  w.push_back({"resnet50_train_step", fmt::format("ResNet-50 train step AdamW, batch {}, 224x224", rn_batch), false, 100,
               [=](bool s) {
                 auto ts = std::make_shared<TrainStepWorkload>(resnet50_train_step(s ? 2 : rn_batch, s ? 32 : 224));
                 return train_step_case(ts, 1000, {{"model", "resnet50"}});
               },
               too_large});
  // torchvision's ViT-B/16 at batch 32 (issue 29's model rows); checked by the interpreter on a
  // small ViT (32x32 images, 8x8 patches, 2 layers of 4 heads, width 32) and against torchvision
  // through .npy at full size.
  const ViTShape vit_small{32, 8, 2, 4, 32, 64};
  w.push_back({"vit_b16", fmt::format("ViT-B/16 inference, batch {}", rn_batch), false, 100, [=](bool s) {
                 auto tg = std::make_shared<TracedGraph>(vit_inference(s ? 2 : rn_batch, s ? vit_small : ViTShape{}));
                 return lifted_case(tg, {{"model", "vit"}, {"image", s ? 32 : 224}, {"patch", s ? 8 : 16}, {"layers", s ? 2 : 12},
                                         {"heads", s ? 4 : 12}, {"hidden", s ? 32 : 768}, {"mlp", s ? 64 : 3072}});
               }});
  w.push_back({"vit_b16_train_step", fmt::format("ViT-B/16 train step AdamW, batch {}", rn_batch), false, 100, [=](bool s) {
                 auto ts = std::make_shared<TrainStepWorkload>(vit_train_step(s ? 2 : rn_batch, s ? vit_small : ViTShape{}));
                 return train_step_case(ts, 1000, {{"model", "vit"}, {"image", s ? 32 : 224}, {"patch", s ? 8 : 16}, {"layers", s ? 2 : 12},
                                                   {"heads", s ? 4 : 12}, {"hidden", s ? 32 : 768}, {"mlp", s ? 64 : 3072}});
               }});
  // GPT-2 small (12 layers of 12 heads, width 768, vocabulary 50257) as kiln's MiniGPT, batch 8
  // x 1024; the interpreter checks MiniGPT's small configuration.
  w.push_back({"gpt2_small_train_step", fmt::format("GPT-2 small train step AdamW, batch {}, seq 1024", block_batch), false, 100,
               [=](bool s) {
                 const nn::MiniGPTConfig cfg = s ? nn::MiniGPTConfig{} : nn::MiniGPTConfig{50257, 768, 12, 12, 1024};
                 auto ts = std::make_shared<TrainStepWorkload>(minigpt_train_step(s ? 4 : block_batch, cfg));
                 return train_step_case(ts, cfg.vocab_size, {{"model", "minigpt"}, {"vocab", cfg.vocab_size}, {"d_model", cfg.d_model},
                                                             {"heads", cfg.n_heads}, {"layers", cfg.n_layers}, {"context", cfg.context}});
               }});
  // A Llama of 1.1B parameters (TinyLlama-1.1B's sizes: 22 layers, width 2048, 32 query heads
  // sharing 4 key/value heads, SwiGLU 5632, vocabulary 32000) at batch 4 x 2048 under bf16
  // autocast (issue 29's row); the interpreter checks a 2-layer one of width 32.
  // The CPU's row (d > 1) runs one sequence of 2048 / d tokens.
  const int64_t llama_batch = d > 1 ? 1 : 4, llama_seq = 2048 / d;
  w.push_back({"llama_1b_train_step_bf16",
               fmt::format("Llama 1.1B train step AdamW, bf16 autocast, batch {}, seq {}", llama_batch, llama_seq), false, 1000,
               [=](bool s) {
                 nn::LlamaConfig c{32000, 2048, 22, 32, 4, 5632, 2048, 1e-5, 10000.0};
                 if (s) c = nn::LlamaConfig{64, 32, 2, 4, 2, 48, 16, 1e-5, 10000.0};
                 auto ts = std::make_shared<TrainStepWorkload>(llama_train_step(s ? 2 : llama_batch, s ? 16 : llama_seq, c, DType::BF16));
                 // PyTorch checks 2 of the 22 layers at batch 1: the whole step's parameters,
                 // AdamW state and their updates would be a 26 GB exchange; its layers are alike.
                 nn::LlamaConfig checked = c;
                 checked.n_layers = std::min<int64_t>(c.n_layers, 2);
                 auto xs = s ? nullptr
                             : std::make_shared<TrainStepWorkload>(llama_train_step(1, llama_seq, checked, DType::BF16));
                 return train_step_case(ts, c.vocab_size,
                                        {{"model", "llama"}, {"vocab", c.vocab_size}, {"d_model", c.d_model},
                                         {"layers", checked.n_layers}, {"heads", c.n_heads}, {"kv_heads", c.n_kv_heads},
                                         {"hidden", c.hidden}, {"context", c.context}, {"rms_eps", c.rms_eps},
                                         {"autocast", "bf16"}},
                                        xs);
               }});
  const int64_t mg_batch = std::max<int64_t>(64 / d, 1);
  w.push_back({"minigpt_train_step", fmt::format("MiniGPT train step AdamW, batch {}", mg_batch), false, 100, [=](bool s) {
                 auto ts = std::make_shared<TrainStepWorkload>(minigpt_train_step(s ? 4 : mg_batch));
                 return train_step_case(ts, 600, {{"model", "minigpt"}, {"vocab", 600}, {"d_model", 64}, {"heads", 4},
                                                  {"layers", 2}, {"context", 32}});
               }});
  return w;
}

Row measure_row(const Workload& w, const std::function<void(Row&, const Case&)>& body) {
  Row r;
  r.id = w.id;
  r.name = w.name;
  r.bandwidth = w.bandwidth;
  try {
    Case full = w.build(false);
    r.traffic = traffic_bytes(full.graph);
    body(r, full);
  } catch (const std::exception& e) {
    r.check = "error";
    r.error = e.what();
    fmt::print("{}: error: {}\n", w.id, e.what());
  }
  std::fflush(stdout);
  return r;
}

std::vector<HostTensor> run_on_cpu_backend(const Graph& g, const std::vector<HostTensor>& inputs) {
  return backend::compile_cpu(g).run(inputs);
}

void check_row(Row& r, const Workload& w, const std::string& where, const RunCompiled& run_compiled) {
  if (!w.no_interpreter_check.empty()) {
    r.check = "torch";
    fmt::print("{}: no interpreter check ({}); PyTorch's .npy check judges it\n", w.id, w.no_interpreter_check);
    return;
  }
  Case small = w.build(true);
  std::vector<HostTensor> inputs = small.inputs();
  auto t0 = Clock::now();
  backend::ReferenceOutputs ref = backend::reference_outputs(small.graph, inputs);
  double interp_ms = ms_since(t0);
  // Judged as `kiln run --check` judges (backend/reference_check.h); the row's relative error is
  // the largest difference over the largest reference value, per output.
  bool ok = true;
  double abs = 0, rel = 0;
  std::vector<backend::OutputCheck> checks = backend::check_outputs(small.graph, run_compiled(small.graph, inputs), ref);
  for (size_t o = 0; o < checks.size(); ++o) {
    const backend::OutputCheck& c = checks[o];
    if (!c.ok()) fmt::print("{}: output {} {}\n", w.id, c.name, c.str());
    ok = ok && c.ok();
    double ref_max = 0;
    for (int64_t i = 0; i < ref.want[o].numel(); ++i) ref_max = std::max(ref_max, std::abs(ref.want[o].get(i)));
    abs = std::max(abs, c.max_abs);
    rel = std::max(rel, ref_max > 0 ? c.max_abs / ref_max : c.max_abs);
  }
  r.max_abs = abs;
  r.max_rel = rel;
  r.check = ok ? "pass" : "FAIL";
  const Node* largest = *std::max_element(small.graph.inputs().begin(), small.graph.inputs().end(),
                                          [](const Node* a, const Node* b) { return a->meta().nbytes() < b->meta().nbytes(); });
  fmt::print("{}: check on {} (small shape: largest input {}; interpreter {:.0f} ms): max abs err {:.3g}, max rel err {:.3g}: {}\n",
             w.id, where, shape_str(largest->meta().shape), interp_ms, abs, rel, r.check);
}

namespace {
// The floating-point work of a schedule's GEMMs: 2*m*n*k*batch summed over its matmul steps.
int64_t matmul_flops(const backend::Executable& exe) {
  int64_t flops = 0;
  for (const codegen::Step& step : exe.lowered().steps)
    if (step.kind == codegen::Step::Kind::Matmul)
      flops += 2 * step.matmul.m * step.matmul.n * step.matmul.k * step.matmul.batch;
  return flops;
}
}  // namespace

backend::CompiledGraph compile_cold_warm(Row& r, const Graph& g, backend::CompileOptions options,
                                         const std::string& cache_dir) {
  std::filesystem::remove_all(cache_dir);
  runtime::cpu::clear_in_memory_cache();
  auto t0 = Clock::now();
  backend::CompiledGraph cold = backend::compile(g, options);
  r.cold_ms = ms_since(t0);
  r.compiler = cold.report.compiler;
  options.dump_dir.clear();
  runtime::cpu::clear_in_memory_cache();
  t0 = Clock::now();
  backend::CompiledGraph warm = backend::compile(g, options);
  r.warm_ms = ms_since(t0);
  r.kernels = warm.report.kernels;
  r.blas = warm.report.blas_calls;
  r.matmul_flops = matmul_flops(warm.executable);
  fmt::print("{}: compiled: {} kernels + {} {}, cold {:.1f} ms, warm {:.1f} ms ({})\n", r.id, r.kernels, r.blas,
             options.device.kind == Device::Kind::CUDA ? "cuBLASLt" : "BLAS", r.cold_ms, r.warm_ms, r.compiler);
  std::fflush(stdout);
  return warm;
}

void set_run_figures(Row& r, double run_ms, double copy_gbps) {
  r.run_ms = run_ms;
  r.gbps = static_cast<double>(r.traffic) / (run_ms * 1e6);
  r.copy_frac = *r.gbps / copy_gbps;
  if (r.matmul_flops > 0) r.tflops = static_cast<double>(r.matmul_flops) / (run_ms * 1e9);
  fmt::print("{}: {:.3f} ms, {:.1f} MB moved at least, {:.1f} GB/s\n", r.id, run_ms, r.traffic / 1e6, *r.gbps);
}

void write_exchange(const std::string& dir, const Case& full, const RunCompiled& run) {
  auto t0 = Clock::now();
  NpyExchange x = full.exchange(run);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  nlohmann::json manifest = {{"config", x.config}};
  int64_t bytes = 0;
  auto save = [&](const char* key, const std::vector<NpyTensor>& tensors) {
    manifest[key] = nlohmann::json::array();
    for (size_t i = 0; i < tensors.size(); ++i) {
      const NpyTensor& t = tensors[i];
      std::string file = fmt::format("{}{}.npy", key == std::string("inputs") ? "in" : "out", i);
      write_npy(dir + "/" + file, t.value);
      bytes += t.value.meta().nbytes();
      manifest[key].push_back({{"name", t.name},
                               {"role", t.role},
                               {"path", t.path},
                               {"file", file},
                               {"dtype", dtype_name(t.value.dtype())},
                               {"shape", t.value.shape()}});
    }
  };
  save("inputs", x.inputs);
  save("outputs", x.outputs);
  std::ofstream f(dir + "/manifest.json");
  if (!f) fail("cannot write {}/manifest.json", dir);
  f << manifest.dump(1) << "\n";
  fmt::print("npy: {} inputs and {} outputs ({:.1f} MB) in {} ({:.1f} s)\n", x.inputs.size(), x.outputs.size(), bytes / 1e6, dir,
             ms_since(t0) / 1e3);
  std::fflush(stdout);
}

int rotation_count(int64_t rotated_bytes, int64_t l2_bytes) {
  if (rotated_bytes <= 0 || l2_bytes <= 0 || rotated_bytes > l2_bytes) return 1;
  const int64_t copies = (2 * l2_bytes + rotated_bytes - 1) / rotated_bytes;
  return copies > 64 ? 1 : static_cast<int>(copies);
}

bool parse_common_option(CommonOptions& o, int& i, int argc, char** argv) {
  std::string a = argv[i];
  if (a == "--quick") o.quick = true;
  else if (a == "--npy" && i + 1 < argc) o.npy = argv[++i];
  else if (a == "--no-block") o.no_block = true;
  else if (a == "--no-check") o.check = false;
  else if (a == "--json" && i + 1 < argc) o.json = argv[++i];
  else if (a == "--only" && i + 1 < argc) o.only = split_commas(argv[++i]);
  else return false;
  return true;
}

bool selected(const CommonOptions& o, const Workload& w) {
  if (!o.only.empty() && std::find(o.only.begin(), o.only.end(), w.id) == o.only.end()) return false;
  return !(o.no_block && w.id.rfind("gpt2_block", 0) == 0);
}

namespace {
nlohmann::json opt(std::optional<double> v) {
  return v && std::isfinite(*v) ? nlohmann::json(*v) : nlohmann::json(nullptr);
}
}  // namespace

void write_json(const std::string& path, nlohmann::json header, const std::vector<Row>& rows) {
  nlohmann::json out = std::move(header);
  out["rows"] = nlohmann::json::array();
  for (const Row& r : rows) {
    nlohmann::json pct = r.bandwidth && r.copy_frac ? nlohmann::json(100 * *r.copy_frac) : nlohmann::json(nullptr);
    out["rows"].push_back({{"id", r.id},
                           {"name", r.name},
                           {"kiln_ms", opt(r.run_ms)},
                           {"kiln_sync_ms", opt(r.sync_ms)},
                           {"gbps", r.bandwidth ? opt(r.gbps) : nlohmann::json(nullptr)},
                           {"copy_pct", pct},
                           {"matmul_flops", r.matmul_flops},
                           {"tflops", opt(r.tflops)},
                           {"traffic_bytes", r.traffic},
                           {"bandwidth_bound", r.bandwidth},
                           {"kernels", r.kernels},
                           {"blas_calls", r.blas},
                           {"cold_compile_ms", r.cold_ms},
                           {"warm_compile_ms", r.warm_ms},
                           {"max_abs_err", opt(r.max_abs)},
                           {"max_rel_err", opt(r.max_rel)},
                           {"check", r.check},
                           {"rotated_copies", r.rotated_copies},
                           {"error", r.error.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.error)}});
  }
  std::ofstream f(path);
  if (!f) fail("cannot write {}", path);
  f << out.dump(2) << "\n";
}

void print_table(const std::vector<Row>& rows) {
  const std::string head = fmt::format("{:<48} | {:>9} | {:>6} | {:>9} | {:>7} | {:>12} | {:>16} | {:>16} | {:>12}",
                                       "workload", "kiln ms", "GB/s", "% of copy", "TFLOP/s", "kernels+BLAS", "cold compile ms",
                                       "warm compile ms", "max rel err");
  fmt::print("{}\n{}\n", head, std::string(head.size(), '-'));
  auto opt_fmt = [](std::optional<double> v, const char* f) { return v ? fmt::format(fmt::runtime(f), *v) : std::string("-"); };
  for (const Row& r : rows) {
    std::string ms = opt_fmt(r.run_ms, "{:.3f}");
    std::string gb = r.bandwidth ? opt_fmt(r.gbps, "{:.0f}") : "-";
    std::string fr = r.bandwidth && r.copy_frac ? fmt::format("{:.0f}%", 100 * *r.copy_frac) : "-";
    std::string err = r.max_rel ? fmt::format("{:.2g} {}", *r.max_rel, r.check) : r.check;
    std::string tf = !r.bandwidth ? opt_fmt(r.tflops, "{:.2f}") : "-";
    fmt::print("{:<48} | {:>9} | {:>6} | {:>9} | {:>7} | {:>12} | {:>16.1f} | {:>16.1f} | {:>12}\n", r.name, ms, gb, fr, tf,
               fmt::format("{}+{}", r.kernels, r.blas), r.cold_ms, r.warm_ms, err);
  }
  for (const Row& r : rows)
    if (!r.error.empty()) fmt::print("{}: error: {}\n", r.id, r.error);
}

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t.empty() ? 0 : t[t.size() / 2];
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string part; std::getline(ss, part, ',');)
    if (!part.empty()) out.push_back(part);
  return out;
}

}  // namespace kiln::bench
