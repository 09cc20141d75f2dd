#include "tools/cli/common.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "frontend/onnx/onnx.h"
#include "ir/error.h"
#include "ir/parser.h"

namespace kiln::cli {

bool is_onnx_path(const std::string& path) {
  return std::filesystem::path(path).extension() == ".onnx";
}

void add_model_options(CLI::App* cmd, ModelOptions& o) {
  cmd->add_option("--sizes", o.sizes, "for an .onnx model: the sizes of its inputs' symbolic dims, NAME=N (comma-separated)")
      ->delimiter(',');
  cmd->add_flag("--params-as-inputs", o.params_as_inputs,
                "for an .onnx model: every floating-point weight is a graph input to give (to train it), none folded");
}

namespace {

onnx::ImportOptions import_options(const ModelOptions& o) {
  onnx::ImportOptions io;
  io.params_as_inputs = o.params_as_inputs;
  for (const std::string& s : o.sizes) {
    size_t eq = s.find('=');
    if (eq == std::string::npos || eq == 0) fail("--sizes {}: expected NAME=N", s);
    try {
      size_t used = 0;
      int64_t n = std::stoll(s.substr(eq + 1), &used);
      if (used != s.size() - eq - 1 || n < 0) throw std::invalid_argument(s);
      io.sizes[s.substr(0, eq)] = n;
    } catch (const std::exception&) {
      fail("--sizes {}: the size must be a non-negative integer", s);
    }
  }
  return io;
}

}  // namespace

Model load_model(const std::string& path, const std::string& name, const ModelOptions& options) {
  if (is_onnx_path(path)) {
    onnx::ImportedModel m = onnx::load(path, import_options(options));
    if (!name.empty() && name != m.graph.name()) fail("'{}' holds one graph, '{}'; there is no graph '{}'", path, m.graph.name(), name);
    return Model{std::move(m.graph), std::move(m.weights), std::move(m.output_names)};
  }
  Model m{load_graph(path, name), {}, {}};
  for (const Value& v : m.graph.outputs()) m.output_names.push_back(v.name());
  return m;
}

std::vector<Graph> load_graphs(const std::string& path, const ModelOptions& options) {
  if (!is_onnx_path(path)) return parse_file(path);
  std::vector<Graph> out;
  out.push_back(load_model(path, "", options).graph);
  return out;
}

Graph load_graph(const std::string& path, const std::string& name, const ModelOptions& options) {
  if (is_onnx_path(path)) return load_model(path, name, options).graph;
  std::vector<Graph> graphs = parse_file(path);
  std::string names;
  for (auto& g : graphs) names += (names.empty() ? "" : ", ") + g.name();
  if (name.empty()) {
    if (graphs.size() == 1) return std::move(graphs[0]);
    fail("'{}' holds {} graphs ({}); choose one with --graph NAME", path, graphs.size(), names);
  }
  for (auto& g : graphs)
    if (g.name() == name) return std::move(g);
  fail("'{}' has no graph named '{}' (its graphs: {})", path, name, names);
}

std::string summarize(const HostTensor& t, int head) {
  std::string out = t.meta().str();
  bool exact = !is_floating(t.dtype());
  auto num = [&](int64_t i) {
    return exact ? fmt::format("{}", t.get_int(i)) : fmt::format("{:.6g}", t.get(i));
  };
  out += " [";
  for (int64_t i = 0; i < std::min<int64_t>(head, t.numel()); ++i) out += (i ? ", " : "") + num(i);
  if (t.numel() > head) out += ", ...";
  out += "]";
  if (t.numel() == 0) return out;
  double lo = INFINITY, hi = -INFINITY, sum = 0;
  int64_t nans = 0;
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = t.get(i);
    if (std::isnan(v)) {
      ++nans;
      continue;
    }
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    sum += v;
  }
  int64_t counted = t.numel() - nans;
  if (counted > 0) out += fmt::format(" min={:.6g} max={:.6g} mean={:.6g}", lo, hi, sum / static_cast<double>(counted));
  if (nans) out += fmt::format(" nan={}", nans);
  return out;
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) fail("cannot write '{}'", path);
  f << text;
  if (!f) fail("error while writing '{}'", path);
}

void make_dirs(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) fail("cannot create the directory '{}': {}", dir, ec.message());
}

std::string file_stem(const std::string& value_name) {
  std::string s = value_name;
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  if (s.empty() || s[0] == '.') s = "_" + s;
  return s;
}

}  // namespace kiln::cli
