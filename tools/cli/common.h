#pragma once
// Helpers shared by the subcommands: loading a .kir or .onnx file, choosing one of its graphs,
// summarizing a tensor in one line, writing files.
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::cli {

// How an .onnx file is imported (a .kir is read as it is): the sizes of its symbolic dims,
// and whether its weights are graph inputs (frontend/onnx/onnx.h).
struct ModelOptions {
  std::vector<std::string> sizes;  // "batch_size=8"
  bool params_as_inputs = false;
};
// --sizes NAME=N,... and --params-as-inputs on a command that reads a model.
void add_model_options(CLI::App* cmd, ModelOptions& o);

// A graph read from a file, with the values of the inputs that come with it (an ONNX model's
// weights) and the names its outputs are saved under.
struct Model {
  Graph graph;
  std::map<std::string, HostTensor> weights;  // by graph input name
  std::vector<std::string> output_names;      // ONNX's names; a .kir graph's output values' names
};

// The graph named `name` in `path`; with an empty name, the file's only graph (a file with
// several graphs needs --graph). A path ending in .onnx is imported. Parse and verification
// errors carry file:line:column; import errors name the node.
Model load_model(const std::string& path, const std::string& name, const ModelOptions& options = {});
Graph load_graph(const std::string& path, const std::string& name, const ModelOptions& options = {});
// Every graph of a .kir file, or the one graph of an .onnx model.
std::vector<Graph> load_graphs(const std::string& path, const ModelOptions& options = {});
bool is_onnx_path(const std::string& path);

// "f32[2,3] [0.12, -0.5, 0.33, ...] min=-0.5 max=0.9 mean=0.1" (first `head` values).
std::string summarize(const HostTensor& t, int head = 6);

// Writes text to a file (replacing it); a kiln::Error names the file if that fails.
void write_text(const std::string& path, const std::string& text);

// Creates a directory (and its parents) for outputs; a kiln::Error if that is impossible.
void make_dirs(const std::string& dir);

// A file name made from a value name: characters other than [A-Za-z0-9_.-] become '_'.
std::string file_stem(const std::string& value_name);

}  // namespace kiln::cli
