#include "frontend/compile_graph.h"

#include <fmt/format.h>

#include "ir/log.h"

namespace kiln {

std::shared_ptr<const backend::Executable> compile_one_graph(const Graph& g, Device device, const CompileOptions& options,
                                                             DebugDump& debug, const std::string& stage, CompileStats& stats) {
  backend::CompileOptions b;
  b.device = device;
  b.cuda_graphs = options.cuda_graphs;
  b.allow_tf32 = options.allow_tf32;
  b.dump_dir = debug.compile_folder(stage);
  backend::CompiledGraph c = backend::compile(g, b);
  debug.compiled(stage, c.report);
  ++stats.compiles;
  if (log_enabled("output_code"))
    log_line("output_code",
             fmt::format("{} '{}' for {}:\n{}", options.name, g.name(), c.report.device, c.executable.source()));
  if (log_enabled("perf")) log_line("perf", fmt::format("{}: {}", options.name, c.report.str()));
  return std::make_shared<const backend::Executable>(std::move(c.executable));
}

}  // namespace kiln
