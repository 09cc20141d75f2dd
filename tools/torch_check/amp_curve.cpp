// kiln's side of the mixed-precision comparison with PyTorch (tools/torch_check/amp_curve.py):
// MiniGPT (vocab 600, d_model 64, 4 heads, 2 layers, context 32) trained for N steps on the
// demo's verb-conjugation corpus, batches of 16 x 32, AdamW (lr 3e-3), compiled with
// kiln::compile, three ways from the same initial weights and on the same batches:
//   f32                 plain f32
//   f16 + GradScaler    under Autocast(f16), with CompileOptions::grad_scaler (init 2^16,
//                       growth interval --growth-interval), as torch.cuda.amp.GradScaler
//   bf16                under Autocast(bf16), no scaler (bf16 has f32's range)
// Writes to --out: the initial parameters by path (param.PATH.npy), the batches
// (tokens.npy, targets.npy: i64 [N,16,32]), every curve (loss_f32.npy, loss_f16.npy,
// loss_bf16.npy: f64 [N]) and manifest.json (config, parameter paths, the scaler's final scale
// and skipped steps). amp_curve.py then trains PyTorch's mirror of the model the same three
// ways (torch.autocast + torch.amp.GradScaler) and compares the curves.
//
//   kiln_amp_curve --out DIR [--steps 50] [--device cuda|cpu] [--growth-interval 2000]
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "backend/cuda_backend.h"
#include "frontend/kiln.h"
#include "ir/npy.h"

using namespace kiln;

namespace {

constexpr int64_t kBatch = 16, kContext = 32;

struct Curve {
  std::vector<double> losses;
  std::optional<GradScalerState> scaler;
};

// One run from the initial weights (seed 0) over `batches`, under `cast` (none: f32).
Curve train_curve(const Device& device, std::optional<DType> cast, std::optional<GradScalerConfig> scaler,
                  const std::vector<std::pair<Tensor, Tensor>>& batches) {
  nn::MiniGPT model(nn::MiniGPTConfig{}, /*seed=*/0);
  model.to(device);
  CompileOptions o;
  o.device = device;
  o.grad_scaler = scaler;
  CompiledTrainStep step = compile(
      model, [&](const std::vector<Tensor>& b) { return model.loss(b[0], b[1]); }, AdamWConfig{.lr = 3e-3}, o);
  Autocast scope(cast);
  Curve c;
  for (const auto& [tokens, targets] : batches) c.losses.push_back(step({tokens, targets}));
  c.scaler = step.grad_scaler();
  return c;
}

void write_curve(const std::filesystem::path& path, const std::vector<double>& v) {
  write_npy(path.string(), HostTensor::from_doubles(DType::F64, {static_cast<int64_t>(v.size())}, v));
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"kiln's MiniGPT loss curves in f32, f16 + GradScaler and bf16, for amp_curve.py"};
  std::string out, device_name = backend::cuda_device_present() ? "cuda" : "cpu";
  int steps = 50;
  int64_t growth_interval = 2000;
  app.add_option("--out", out, "the folder to write")->required();
  app.add_option("--steps", steps, "training steps")->check(CLI::Range(1, 100000));
  app.add_option("--device", device_name, "cuda or cpu (default: cuda where there is one)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--growth-interval", growth_interval, "the GradScaler's growth interval")->check(CLI::Range(1, 1000000));
  CLI11_PARSE(app, argc, argv);
  try {
    const Device device = device_name == "cuda" ? Device::cuda() : Device::cpu();
    std::filesystem::create_directories(out);
    const std::filesystem::path dir(out);

    data::Corpus corpus = data::conjugation_corpus(/*seed=*/0);
    data::Tokenizer tok = data::Tokenizer::train(corpus.train, 600);
    std::vector<int64_t> stream = data::encode_lines(tok, corpus.train);
    std::vector<std::pair<Tensor, Tensor>> batches;
    std::vector<int64_t> all_tokens, all_targets;
    for (int i = 0; i < steps; ++i) {
      data::Batch b = data::sample_batch(stream, kBatch, kContext, static_cast<uint64_t>(i));
      all_tokens.insert(all_tokens.end(), b.tokens.begin(), b.tokens.end());
      all_targets.insert(all_targets.end(), b.targets.begin(), b.targets.end());
      batches.emplace_back(tensor_of_ints(b.tokens, {kBatch, kContext}).to(device),
                           tensor_of_ints(b.targets, {kBatch, kContext}).to(device));
    }
    const Shape batch_shape{steps, kBatch, kContext};
    write_npy((dir / "tokens.npy").string(), HostTensor::from_ints(DType::I64, batch_shape, all_tokens));
    write_npy((dir / "targets.npy").string(), HostTensor::from_ints(DType::I64, batch_shape, all_targets));

    nlohmann::json manifest;
    manifest["model"] = {{"vocab", 600}, {"d_model", 64}, {"heads", 4}, {"layers", 2}, {"context", kContext}};
    manifest["optimizer"] = {{"kind", "adamw"}, {"lr", 3e-3}, {"betas", {0.9, 0.999}}, {"eps", 1e-8}, {"weight_decay", 1e-2}};
    manifest["steps"] = steps;
    manifest["device"] = device.str();
    nn::MiniGPT init(nn::MiniGPTConfig{}, /*seed=*/0);
    for (const auto& [path, p] : init.named_parameters()) {
      write_npy((dir / fmt::format("param.{}.npy", path)).string(), p.host_data());
      manifest["params"].push_back(path);
    }

    GradScalerConfig scaler;
    scaler.growth_interval = growth_interval;
    manifest["grad_scaler"] = {{"init_scale", scaler.init_scale},
                               {"growth_factor", scaler.growth_factor},
                               {"backoff_factor", scaler.backoff_factor},
                               {"growth_interval", scaler.growth_interval}};
    Curve f32 = train_curve(device, std::nullopt, std::nullopt, batches);
    Curve f16 = train_curve(device, DType::F16, scaler, batches);
    Curve bf16 = train_curve(device, DType::BF16, std::nullopt, batches);
    write_curve(dir / "loss_f32.npy", f32.losses);
    write_curve(dir / "loss_f16.npy", f16.losses);
    write_curve(dir / "loss_bf16.npy", bf16.losses);
    manifest["f16_scaler"] = {{"scale", f16.scaler->scale}, {"skipped_steps", f16.scaler->skipped_steps}};
    std::ofstream(dir / "manifest.json") << manifest.dump(2) << "\n";

    fmt::print("kiln MiniGPT on {}, {} steps: loss f32 {:.4f} -> {:.4f}, f16 + GradScaler {:.4f} -> {:.4f} "
               "(scale {}, {} skipped), bf16 {:.4f} -> {:.4f}\n",
               device.str(), steps, f32.losses.front(), f32.losses.back(), f16.losses.front(), f16.losses.back(),
               f16.scaler->scale, f16.scaler->skipped_steps, bf16.losses.front(), bf16.losses.back());
    fmt::print("written to {}\n", out);
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln_amp_curve: {}\n", e.what());
    return 1;
  }
  return 0;
}
