// kiln grad FILE.kir [--partition default|mincut] [--wrt a,b] [--check] [--graph NAME]
//                    [--inputs a.npy,...] [--seed N] [--save-grads DIR] [--dump DIR]
// Derives the backward of a graph: prints the joint graph, the forward and backward graphs of
// the chosen partitioner and the tensors saved between them (name, type, bytes; total).
// --check runs gradcheck (float64 central differences; fast random directions when the
// inputs have many elements) and exits 1 if it fails. --save-grads runs the joint graph on the
// reference interpreter and writes DIR/grad_<input>.npy per gradient and DIR/<output>.npy per
// forward output. The gradients are of one output (--output NAME, default the first scalar
// output): ones as its tangent, zeros for the others; with no scalar output and no --output,
// ones on every output (the gradients of the sum of all). The tangents used are printed.
#include <fmt/format.h>

#include <filesystem>

#include "ir/error.h"
#include "ir/npy.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/autograd/gradcheck.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/inputs.h"

namespace kiln::cli {
namespace {

// Checks --wrt names before build_joint, to name the flag and list what would have been valid.
void check_wrt(const Graph& g, const std::vector<std::string>& wrt) {
  std::vector<std::string> floating;
  for (const Node* in : g.inputs())
    if (is_floating(in->meta().dtype)) floating.push_back(in->name());
  for (const std::string& name : wrt) {
    Value v = g.find(name);
    if (!v || !v.node->is_input())
      fail("--wrt: graph '{}' has no input named '{}' (floating inputs: {})", g.name(), name,
           floating.empty() ? "none" : fmt::format("{}", fmt::join(floating, ", ")));
    if (!is_floating(v.meta().dtype))
      fail("--wrt: input '{}' of graph '{}' is {}, not floating point: it has no gradient", name, g.name(),
           v.meta().str());
  }
}

std::string saved_table(const autograd::Partition& p, autograd::PartitionKind kind) {
  size_t width = 5;
  for (const auto& s : p.saved) width = std::max(width, s.name.size() + 1);
  size_t type_width = 4;
  for (const auto& s : p.saved) type_width = std::max(type_width, s.meta.str().size());
  std::string out = fmt::format("saved tensors ({} partition): {}, recomputed nodes: {}\n", autograd::partition_kind_name(kind),
                                p.saved.size(), p.recomputed_nodes);
  out += fmt::format("  {:<{}}  {:<{}}  {:>10}\n", "name", width, "type", type_width, "bytes");
  for (const auto& s : p.saved)
    out += fmt::format("  {:<{}}  {:<{}}  {:>10}\n", "%" + s.name, width, s.meta.str(), type_width, s.bytes);
  out += fmt::format("  {:<{}}  {:<{}}  {:>10}\n", "total", width, "", type_width, p.saved_bytes);
  return out;
}

// Which forward output the gradients are of: the one --output names, else the first scalar
// floating output, else every output (the gradients of the sum of all). -1: every output.
int differentiated_output(const Graph& g, const autograd::JointGraph& joint, const std::string& name) {
  const auto& outs = g.outputs();
  if (!name.empty()) {
    std::string known;
    for (size_t i = 0; i < outs.size(); ++i) {
      if (outs[i].name() == name || "%" + outs[i].name() == name) {
        if (joint.tangent_for_output[i] < 0) fail("--output {}: the output is not floating, so it has no gradient", name);
        return static_cast<int>(i);
      }
      known += fmt::format("{}%{}", known.empty() ? "" : ", ", outs[i].name());
    }
    fail("--output {}: graph '{}' has no such output (its outputs: {})", name, g.name(), known);
  }
  for (size_t i = 0; i < outs.size(); ++i)
    if (joint.tangent_for_output[i] >= 0 && outs[i].meta().numel() == 1) return static_cast<int>(i);
  return -1;
}

// Joint inputs: the primals given, then the tangents: ones on the differentiated output (all
// outputs for -1), zeros on the others. Says which were used.
std::vector<HostTensor> joint_inputs(const Graph& g, const autograd::JointGraph& joint, const std::vector<HostTensor>& primals,
                                     int output) {
  std::vector<HostTensor> in = primals;
  std::string said;
  for (size_t o = 0; o < joint.tangent_for_output.size(); ++o) {
    if (joint.tangent_for_output[o] < 0) continue;
    const Node* t_in = joint.graph.inputs()[static_cast<size_t>(joint.tangent_for_output[o])];
    const bool on = output < 0 || static_cast<int>(o) == output;
    HostTensor t = HostTensor::empty(t_in->meta());
    for (int64_t k = 0; k < t.numel(); ++k) t.set(k, on ? 1.0 : 0.0);
    in.push_back(std::move(t));
    said += fmt::format("{}%{}: {}", said.empty() ? "" : ", ", g.outputs()[o].name(), on ? "ones" : "zeros");
  }
  fmt::print("tangents: {} ({})\n", said,
             output < 0 ? "no scalar output: the gradients are of the sum of every output; --output picks one"
                        : fmt::format("the gradients are of %{}", g.outputs()[static_cast<size_t>(output)].name()));
  return in;
}

}  // namespace

void add_grad_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, graph, partition = "default", save_grads, dump, output;
    std::vector<std::string> wrt, inputs;
    bool check = false;
    uint64_t seed = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("grad", "Derive a graph's backward: joint, forward and backward graphs, saved tensors");
  cmd->add_option("file", o->file, "the .kir or .onnx file")->required();
  add_model_options(cmd, o->model);
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--partition", o->partition, "partitioner: default | mincut")->capture_default_str();
  cmd->add_option("--wrt", o->wrt, "inputs to differentiate with respect to (comma-separated; default: every floating input)")
      ->delimiter(',');
  cmd->add_flag("--check", o->check, "run gradcheck (float64 finite differences); exit 1 on failure");
  cmd->add_option("--inputs", o->inputs, "one .npy file per graph input, in order (comma-separated), or a folder of NAME.npy per input (default: random)")
      ->delimiter(',');
  cmd->add_option("--seed", o->seed, "seed of the random inputs")->capture_default_str();
  cmd->add_option("--save-grads", o->save_grads,
                  "write DIR/grad_<input>.npy per gradient and DIR/<output>.npy per output");
  cmd->add_option("--output", o->output,
                  "with --save-grads: the output whose gradients to take (default: the first scalar output; else the sum of all)");
  cmd->add_option("--dump", o->dump, "write joint.kir, forward.kir, backward.kir and saved.txt into DIR");
  cmd->callback([o] {
    autograd::PartitionKind kind = autograd::parse_partition_kind(o->partition);
    Model m = load_model(o->file, o->graph, o->model);
    const Graph& g = m.graph;
    check_wrt(g, o->wrt);
    autograd::JointOptions options;
    options.wrt = o->wrt;
    autograd::JointGraph joint = autograd::build_joint(g, options);
    autograd::Partition p = autograd::partition(joint, kind);
    std::string table = saved_table(p, kind);
    fmt::print("== joint graph ==\n{}\n== forward graph ({}) ==\n{}\n== backward graph ({}) ==\n{}\n{}",
               print_graph(joint.graph), o->partition, print_graph(p.forward), o->partition, print_graph(p.backward), table);

    if (!o->dump.empty()) {
      make_dirs(o->dump);
      namespace fs = std::filesystem;
      write_text((fs::path(o->dump) / "joint.kir").string(), print_graph(joint.graph));
      write_text((fs::path(o->dump) / "forward.kir").string(), print_graph(p.forward));
      write_text((fs::path(o->dump) / "backward.kir").string(), print_graph(p.backward));
      write_text((fs::path(o->dump) / "saved.txt").string(), table);
      fmt::print("wrote {}/{{joint,forward,backward}}.kir and saved.txt\n", o->dump);
    }

    bool need_inputs = o->check || !o->save_grads.empty();
    if (!need_inputs) return;
    std::vector<HostTensor> inputs = model_inputs(m, o->inputs, o->seed);

    if (!o->save_grads.empty()) {
      const int output = differentiated_output(g, joint, o->output);
      std::vector<HostTensor> outs = interpret(joint.graph, joint_inputs(g, joint, inputs, output));
      make_dirs(o->save_grads);
      for (size_t i = 0; i < outs.size(); ++i) {
        std::string path =
            (std::filesystem::path(o->save_grads) / (file_stem(joint.graph.outputs()[i].name()) + ".npy")).string();
        write_npy(path, outs[i]);
        fmt::print("wrote {}\n", path);
      }
    }

    if (o->check) {
      autograd::GradcheckOptions gc;
      gc.wrt = o->wrt;
      gc.seed = o->seed;
      int64_t elements = 0;
      for (const HostTensor& t : inputs)
        if (is_floating(t.dtype())) elements += t.numel();
      // Full mode runs the graph twice per input element: past a few thousand, check directions.
      gc.fast = elements > 4096;
      fmt::print("gradcheck ({} mode, float64):\n", gc.fast ? "fast" : "full");
      autograd::GradcheckResult r = autograd::gradcheck(g, inputs, gc);
      fmt::print("{}", autograd::format_gradcheck(r));
      if (!r.ok) fail("gradcheck failed for graph '{}': {}", g.name(), r.failure);
    }
  });
}

}  // namespace kiln::cli
