#pragma once
// The debug folder of one compiled graph: every compile gets one when KILN_DEBUG_DIR (or
// kiln::compile's debug_dir) names a root, whoever asked for the compile (kiln::compile, a
// compiled training step, the Trainer, compiled_executor, the eager CUDA ops, the kiln program).
//
// kiln::compile of a function with gradients:
//   <root>/003_mlp/
//     00_traced.kir  00_traced.dot       the graph as traced
//     01_joint.kir   01_joint.dot        forward + backward (when gradients are asked for)
//     02_forward.kir 03_backward.kir     the partition (+ .dot)
//     04_compile_forward/                the compile driver's own dump of that graph: passes/,
//       decomposed.kir, fused.kir, fused.dot (fusion groups as clusters), kernels.txt (the
//       kernel IR), kernels.cpp or kernels.cu, report.txt
//     05_compile_backward/
//     report.json                        time per stage, kernels and planned memory per graph
// Any other compile (backend::compile called directly):
//   <root>/004_add/
//     00_graph.kir 00_graph.dot          the graph as given
//     01_compile_graph/                  the compile driver's dump, as above
//     report.json                        who asked ("eager cuda op", "Trainer", ...) and the figures
//
// Stages are numbered in the order they ran. Folders are numbered across the process and
// across processes sharing the root (a number is taken by creating its folder). Writing a folder
// costs a few printed graphs; drawings are .dot text, and SVGs only on request (KILN_DEBUG_SVG=1,
// or kiln::compile's debug_svg): Graphviz takes about a second on a graph of a few hundred nodes
// and minutes on thousands, so even then graphs over 400 nodes stay .dot text.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ir/graph.h"

namespace kiln::backend {

struct CompileReport;

class DebugDump {
 public:
  DebugDump() = default;  // inactive: every call does nothing
  // The next numbered folder under `root` for a graph named `name`; inactive when root is empty.
  // `svg`: draw every graph as an SVG beside its .dot (also on with KILN_DEBUG_SVG=1).
  static DebugDump open(const std::string& root, const std::string& name, bool svg = false);
  // The root from a compile option, else $KILN_DEBUG_DIR, else empty.
  static std::string root_from(const std::string& option);

  bool active() const { return !folder_.empty(); }
  const std::filesystem::path& folder() const { return folder_; }

  // NN_<stage>.kir and its drawing.
  void graph(const std::string& stage, const Graph& g);
  // Who asked for the compile, in report.json ("kiln::compile 'mlp'", "eager cuda op", ...).
  void origin(const std::string& who);
  // NN_compile_<graph>/, for backend::CompileOptions::dump_dir ("" when inactive).
  std::string compile_folder(const std::string& graph);
  // After a compile into compile_folder(graph): draws fused.dot and records the report.
  void compiled(const std::string& graph, const CompileReport& report);
  // A stage's time that no file records (trace, joint, partition).
  void time(const std::string& stage, double ms);
  // Writes report.json.
  void finish();

 private:
  std::string next_stage(const std::string& stage);

  std::filesystem::path folder_;
  bool svg_ = false;
  int stage_ = 0;
  nlohmann::json report_;
};

}  // namespace kiln::backend
