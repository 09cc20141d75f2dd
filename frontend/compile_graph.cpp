#include "frontend/compile_graph.h"


namespace kiln {

std::shared_ptr<const backend::Executable> compile_one_graph(const Graph& g, Device device, const CompileOptions& options,
                                                             backend::DebugDump& debug, const std::string& stage, CompileStats& stats) {
  backend::CompileOptions b;
  b.device = device;
  b.run = options.run;
  b.autotune = options.autotune;
  b.dump_dir = debug.compile_folder(stage);
  b.origin = options.name;
  backend::CompiledGraph c = backend::compile(g, b);
  debug.compiled(stage, c.report);
  ++stats.compiles;
  return std::make_shared<const backend::Executable>(std::move(c.executable));
}

}  // namespace kiln
