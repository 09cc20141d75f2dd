#include "backend/debug_dump.h"

#include <fmt/format.h>

#include <cstdlib>
#include <fstream>

#include "backend/compile.h"
#include "ir/dot.h"
#include "ir/error.h"
#include "ir/printer.h"

namespace kiln::backend {

namespace fs = std::filesystem;

namespace {
void write_text(const fs::path& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
  if (!f) fail("cannot write the debug file {}", path.string());
}

// The number of a folder named "NNN_...", or -1.
int folder_number(const std::string& name) {
  if (name.size() < 4 || name[3] != '_') return -1;
  int n = 0;
  for (int i = 0; i < 3; ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    n = n * 10 + (name[i] - '0');
  }
  return n;
}

// Graphviz lays out a graph of a few hundred nodes in about a second, and one of thousands (a
// MiniGPT training step) in minutes, or fails: past this size the drawing stays .dot text,
// for `dot -Tsvg` by hand.
constexpr size_t kMaxDrawnNodes = 400;

bool svg_from_environment() {
  const char* env = std::getenv("KILN_DEBUG_SVG");
  return env && *env && std::string(env) != "0";
}

// The .dot text always (cheap); the SVG beside it when asked for and Graphviz can draw it.
void draw(const fs::path& kir_path, const std::string& dot_text, size_t nodes, bool svg) {
  write_text(fs::path(kir_path).replace_extension(".dot"), dot_text);
  if (svg && nodes <= kMaxDrawnNodes && find_dot_program())
    render_dot(dot_text, fs::path(kir_path).replace_extension(".svg").string(), "svg");
}
}  // namespace

std::string DebugDump::root_from(const std::string& option) {
  if (!option.empty()) return option;
  const char* env = std::getenv("KILN_DEBUG_DIR");
  return env ? env : "";
}

DebugDump DebugDump::open(const std::string& root, const std::string& name, bool svg) {
  DebugDump d;
  if (root.empty()) return d;
  d.svg_ = svg || svg_from_environment();
  std::error_code ec;
  fs::create_directories(root, ec);
  if (ec) fail("KILN_DEBUG_DIR: cannot create {}: {}", root, ec.message());
  int next = 0;
  for (const auto& e : fs::directory_iterator(root)) next = std::max(next, folder_number(e.path().filename().string()) + 1);
  // create_directory is atomic: a number another process took first is skipped.
  for (;; ++next) {
    fs::path folder = fs::path(root) / fmt::format("{:03}_{}", next, name);
    if (fs::create_directory(folder, ec)) {
      d.folder_ = folder;
      break;
    }
    if (ec) fail("KILN_DEBUG_DIR: cannot create {}: {}", folder.string(), ec.message());
  }
  d.report_["graph"] = name;
  d.report_["stages"] = nlohmann::json::array();
  d.report_["compiled"] = nlohmann::json::object();
  return d;
}

std::string DebugDump::next_stage(const std::string& stage) { return fmt::format("{:02}_{}", stage_++, stage); }

void DebugDump::graph(const std::string& stage, const Graph& g) {
  if (!active()) return;
  fs::path path = folder_ / (next_stage(stage) + ".kir");
  write_text(path, print_graph(g));
  draw(path, to_dot(g), g.num_nodes(), svg_);
  report_["stages"].push_back({{"stage", stage}, {"file", path.filename().string()}});
}

void DebugDump::origin(const std::string& who) {
  if (!active()) return;
  report_["origin"] = who;
}

std::string DebugDump::compile_folder(const std::string& graph) {
  if (!active()) return "";
  fs::path dir = folder_ / next_stage("compile_" + graph);
  report_["stages"].push_back({{"stage", "compile " + graph}, {"file", dir.filename().string() + "/"}});
  return dir.string();
}

void DebugDump::compiled(const std::string& graph, const CompileReport& r) {
  if (!active()) return;
  for (auto it = report_["stages"].rbegin(); svg_ && it != report_["stages"].rend(); ++it) {
    if ((*it)["stage"] != "compile " + graph) continue;
    fs::path dir = folder_ / std::string((*it)["file"]);
    if (fs::exists(dir / "fused.dot") && static_cast<size_t>(r.nodes) <= kMaxDrawnNodes && find_dot_program()) {
      std::ifstream f(dir / "fused.dot");
      std::string dot((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      render_dot(dot, (dir / "fused.svg").string(), "svg");
    }
    break;
  }
  nlohmann::json stages = nlohmann::json::array();
  double total = 0;
  for (const auto& [stage, ms] : r.stage_ms) {
    stages.push_back({{"stage", stage}, {"ms", ms}});
    total += ms;
  }
  report_["compiled"][graph] = {
      {"device", r.device},           {"nodes", r.nodes},          {"fusion_groups", r.groups},
      {"kernels", r.kernels},         {"blas_calls", r.blas_calls}, {"opaque_calls", r.opaque_calls},
      {"arena_buffers", r.buffers},   {"planned_bytes", r.arena_bytes}, {"unplanned_bytes", r.naive_bytes},
      {"stages", stages},             {"total_ms", total},          {"compiler", r.compiler},
  };
}

void DebugDump::time(const std::string& stage, double ms) {
  if (!active()) return;
  report_["frontend_ms"][stage] = ms;
}

void DebugDump::finish() {
  if (!active()) return;
  write_text(folder_ / "report.json", report_.dump(2) + "\n");
}

}  // namespace kiln::backend
