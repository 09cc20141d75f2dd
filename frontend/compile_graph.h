#pragma once
// Internal to kiln::compile's two forms (compile.cpp, compile_train_step.cpp): one graph through
// the compile driver with the user's options, recorded in the debug folder and the stats (the
// driver itself writes the logs: output_code, perf).
#include <memory>
#include <string>

#include "backend/compile.h"
#include "frontend/compile.h"
#include "backend/debug_dump.h"

namespace kiln {

std::shared_ptr<const backend::Executable> compile_one_graph(const Graph& g, Device device, const CompileOptions& options,
                                                             backend::DebugDump& debug, const std::string& stage, CompileStats& stats);

}  // namespace kiln
