// kiln export mlp|block|minigpt|resnet18|resnet50 [--out FILE.kir] [--save-inputs DIR] [--dtype f32|f64] ...:
// traces one of kiln's built-in models (frontend/nn) with a cross-entropy loss and writes
// the graph as .kir, with its example inputs and its initial parameters as .npy files, so
// the same model and the same numbers can be fed to `kiln grad`, `kiln run` or PyTorch
// (tools/torch_check/grad_compare.py does exactly that).
#include <fmt/format.h>

#include <filesystem>
#include <optional>

#include "frontend/autocast.h"
#include "frontend/nn/block.h"
#include "frontend/nn/minigpt.h"
#include "frontend/nn/mlp.h"
#include "frontend/nn/resnet.h"
#include "frontend/ops.h"
#include "frontend/trace.h"
#include "ir/error.h"
#include "ir/npy.h"
#include "ir/printer.h"
#include "passes/autograd/gradcheck.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"

namespace kiln::cli {

namespace {

struct ExportOpts {
  std::string model, out, save_inputs, dtype = "f32", autocast;
  int64_t batch = 2, seq = 8, d_model = 32, heads = 4, vocab = 50, layers = 2, image = 224, classes = 1000;
  uint64_t seed = 0;
  bool no_loss = false;
};

// The traced loss (or forward) of the chosen model, and its example inputs.
TracedGraph trace_model(const ExportOpts& o, std::vector<HostTensor>& example) {
  const int64_t B = o.batch, T = o.seq, C = o.d_model;
  if (B <= 0 || T <= 0 || C <= 0) fail("--batch, --seq and --d-model must be positive");
  if (o.model == "mlp") {
    auto mlp = std::make_shared<nn::MLP>(C, 0, o.seed);
    Tensor x = randn({B, C}, o.seed + 1), t = randint(0, C, {B}, o.seed + 2);
    x.set_name("x"), t.set_name("targets");
    example = o.no_loss ? std::vector<HostTensor>{x.data()} : std::vector<HostTensor>{x.data(), t.data()};  // the forward takes no targets
    if (o.no_loss) return trace([mlp](const Tensor& in) { return mlp->forward(in); }, x, "mlp");
    return trace([mlp](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(mlp->forward(in[0]), in[1])}; },
                 {x, t}, "mlp_loss");
  }
  if (o.model == "block") {
    auto block = std::make_shared<nn::Block>(C, o.heads, T, o.seed);
    Tensor x = randn({B, T, C}, o.seed + 1), t = randint(0, C, {B * T}, o.seed + 2);
    x.set_name("x"), t.set_name("targets");
    example = o.no_loss ? std::vector<HostTensor>{x.data()} : std::vector<HostTensor>{x.data(), t.data()};
    if (o.no_loss) return trace([block](const Tensor& in) { return block->forward(in); }, x, "block");
    // The block's output rows read as class scores over d_model classes: a loss that
    // reaches every parameter through softmax and cross-entropy.
    return trace(
        [block, B, T, C](const std::vector<Tensor>& in) {
          return std::vector<Tensor>{cross_entropy(block->forward(in[0]).reshape({B * T, C}), in[1])};
        },
        {x, t}, "block_loss");
  }
  if (o.model == "minigpt") {
    nn::MiniGPTConfig cfg{o.vocab, C, o.heads, o.layers, T};
    auto gpt = std::make_shared<nn::MiniGPT>(cfg, o.seed);
    Tensor tokens = randint(0, o.vocab, {B, T}, o.seed + 1), t = randint(0, o.vocab, {B, T}, o.seed + 2);
    tokens.set_name("tokens"), t.set_name("targets");
    example = o.no_loss ? std::vector<HostTensor>{tokens.data()} : std::vector<HostTensor>{tokens.data(), t.data()};
    if (o.no_loss) return trace([gpt](const Tensor& in) { return gpt->forward(in); }, tokens, "minigpt");
    return trace([gpt](const std::vector<Tensor>& in) { return std::vector<Tensor>{gpt->loss(in[0], in[1])}; },
                 {tokens, t}, "minigpt_loss");
  }
  if (o.model == "resnet18" || o.model == "resnet50") {
    // torchvision's ResNet at --image pixels square and --classes classes; the forward in eval
    // mode (running statistics), the loss in training mode (its graph also returns the running
    // statistics it updates: TracedGraph::written).
    if (o.image <= 0 || o.classes <= 0) fail("--image and --classes must be positive");
    auto net = o.model == "resnet18" ? nn::resnet18(o.classes, 64, o.seed) : nn::resnet50(o.classes, 64, o.seed);
    net->train(!o.no_loss);
    Tensor x = randn({B, 3, o.image, o.image}, o.seed + 1), t = randint(0, o.classes, {B}, o.seed + 2);
    x.set_name("x"), t.set_name("targets");
    example = o.no_loss ? std::vector<HostTensor>{x.data()} : std::vector<HostTensor>{x.data(), t.data()};
    if (o.no_loss) return trace([net](const Tensor& in) { return net->forward(in); }, x, o.model);
    return trace([net](const std::vector<Tensor>& in) { return std::vector<Tensor>{cross_entropy(net->forward(in[0]), in[1])}; },
                 {x, t}, o.model + "_loss");
  }
  fail("unknown model '{}' (expected mlp, block, minigpt, resnet18 or resnet50)", o.model);
}

}  // namespace

void add_export_command(CLI::App& app) {
  auto o = std::make_shared<ExportOpts>();
  auto* cmd = app.add_subcommand("export", "Trace a built-in model (mlp, block, minigpt, resnet18, resnet50) with its loss and write it as .kir");
  cmd->add_option("model", o->model, "mlp, block, minigpt, resnet18 or resnet50")->required();
  cmd->add_option("--out", o->out, "write the graph here (default: print it)");
  cmd->add_option("--save-inputs", o->save_inputs, "write every graph input (examples, then parameters) as DIR/NAME.npy");
  cmd->add_option("--dtype", o->dtype, "f32, or f64 for a float64 copy of the graph and its parameters")->capture_default_str();
  cmd->add_option("--batch", o->batch, "batch size")->capture_default_str();
  cmd->add_option("--seq", o->seq, "sequence length (block, minigpt)")->capture_default_str();
  cmd->add_option("--d-model", o->d_model, "model width")->capture_default_str();
  cmd->add_option("--heads", o->heads, "attention heads")->capture_default_str();
  cmd->add_option("--vocab", o->vocab, "vocabulary size (minigpt)")->capture_default_str();
  cmd->add_option("--layers", o->layers, "blocks (minigpt)")->capture_default_str();
  cmd->add_option("--image", o->image, "image height and width (resnet18, resnet50)")->capture_default_str();
  cmd->add_option("--classes", o->classes, "classes (resnet18, resnet50)")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the parameters and example inputs")->capture_default_str();
  cmd->add_flag("--no-loss", o->no_loss, "export the forward pass only");
  cmd->add_option("--autocast", o->autocast, "bf16 or f16: trace under kiln::Autocast (the casts it inserts are in the graph)");
  cmd->callback([o] {
    if (o->dtype != "f32" && o->dtype != "f64") fail("--dtype must be f32 or f64, got '{}'", o->dtype);
    if (!o->autocast.empty() && o->autocast != "bf16" && o->autocast != "f16")
      fail("--autocast must be bf16 or f16, got '{}'", o->autocast);
    if (!o->autocast.empty() && o->dtype == "f64") fail("--autocast and --dtype f64 do not go together");
    std::vector<HostTensor> example;
    std::optional<DType> cast;
    if (!o->autocast.empty()) cast = o->autocast == "bf16" ? DType::BF16 : DType::F16;
    TracedGraph tg = [&] {
      Autocast scope(cast);
      return trace_model(*o, example);
    }();
    std::vector<HostTensor> inputs = tg.graph_inputs(example);  // before tg.graph may be moved from
    Graph g = o->dtype == "f64" ? autograd::to_float64(tg.graph) : std::move(tg.graph);
    std::string text = print_graph(g);
    if (o->out.empty()) fmt::print("{}", text);
    else write_text(o->out, text), fmt::print("wrote {} ({} nodes, {} inputs)\n", o->out, g.num_nodes(), g.inputs().size());
    if (!o->save_inputs.empty()) {
      make_dirs(o->save_inputs);
      for (size_t i = 0; i < inputs.size(); ++i) {
        const TensorMeta& want = g.inputs()[i]->meta();
        HostTensor t = inputs[i].dtype() == want.dtype ? inputs[i] : inputs[i].to(want.dtype);
        std::string path = (std::filesystem::path(o->save_inputs) / (file_stem(g.inputs()[i]->name()) + ".npy")).string();
        write_npy(path, t);
      }
      fmt::print("wrote {} inputs to {}\n", inputs.size(), o->save_inputs);
    }
  });
}

}  // namespace kiln::cli
