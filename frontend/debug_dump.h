#pragma once
// The debug folder of one compiled graph (kiln::compile with debug_dir or KILN_DEBUG_DIR):
//
//   <root>/003_mlp/
//     00_traced.kir  00_traced.svg       the graph as traced
//     01_joint.kir   01_joint.svg        forward + backward (when gradients are asked for)
//     02_forward.kir 03_backward.kir     the partition (+ .svg)
//     04_compile_forward/                the compile driver's own dump of that graph: passes/,
//       decomposed.kir, fused.kir, fused.svg (fusion groups as clusters), kernels.txt (the
//       kernel IR), kernels.cpp or kernels.cu, report.txt
//     05_compile_backward/
//     report.json                        time per stage, kernels and planned memory per graph
//
// Stages are numbered in the order they ran. Folders are numbered across the process and
// across processes sharing the root (a number is taken by creating its folder). Where Graphviz
// is not installed, or a graph has more than 400 nodes (Graphviz takes minutes on those), the
// drawings stay .dot text.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "backend/compile.h"
#include "ir/graph.h"

namespace kiln {

class DebugDump {
 public:
  DebugDump() = default;  // inactive: every call does nothing
  // The next numbered folder under `root` for a graph named `name`; inactive when root is empty.
  static DebugDump open(const std::string& root, const std::string& name);
  // The root from a compile option, else $KILN_DEBUG_DIR, else empty.
  static std::string root_from(const std::string& option);

  bool active() const { return !folder_.empty(); }
  const std::filesystem::path& folder() const { return folder_; }

  // NN_<stage>.kir and its drawing.
  void graph(const std::string& stage, const Graph& g);
  // NN_compile_<graph>/, for backend::CompileOptions::dump_dir ("" when inactive).
  std::string compile_folder(const std::string& graph);
  // After a compile into compile_folder(graph): draws fused.dot and records the report.
  void compiled(const std::string& graph, const backend::CompileReport& report);
  // A stage's time that no file records (trace, joint, partition).
  void time(const std::string& stage, double ms);
  // Writes report.json.
  void finish();

 private:
  std::string next_stage(const std::string& stage);

  std::filesystem::path folder_;
  int stage_ = 0;
  nlohmann::json report_;
};

}  // namespace kiln
