// kiln compile FILE.kir --device cpu [--dump DIR] [--graph NAME]: compiles a graph with the
// CPU backend and prints the compile report (stages and their times, kernels, buffers,
// planned peak). --dump writes every stage: decomposed.kir, fused.kir, fused.dot,
// kernels.txt (kernel IR), kernels.cpp, report.txt.
#include <fmt/format.h>

#include "backend/cpu_compile.h"
#include "ir/error.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/device.h"

namespace kiln::cli {

void check_device(const std::string& device) {
  if (device == "cpu") return;
  if (device == "cuda") fail("--device cuda: the CUDA backend is not built yet (it arrives with a later issue); use --device cpu");
  fail("unknown device '{}' (known: cpu, cuda)", device);
}

void add_compile_command(CLI::App& app) {
  struct Opts {
    std::string file, graph, device = "cpu", dump;
    bool unfused = false, remarks = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("compile", "Compile a graph for a device and print the compile report");
  cmd->add_option("file", o->file, "the .kir file")->required();
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--device", o->device, "cpu (cuda arrives later)")->capture_default_str();
  cmd->add_option("--dump", o->dump, "write every stage of the compilation to DIR");
  cmd->add_flag("--unfused", o->unfused, "one kernel per node (no fusion)");
  cmd->add_flag("--vectorizer-remarks", o->remarks, "print clang's loop-vectorizer remarks (what vectorized, what did not)");
  cmd->callback([o] {
    check_device(o->device);
    Graph g = load_graph(o->file, o->graph);
    backend::CpuCompileOptions options;
    options.dump_dir = o->dump;
    options.fuse = !o->unfused;
    options.jit.vectorizer_remarks = o->remarks;
    options.jit.use_cache = !o->remarks;  // remarks come from clang, which a cache hit skips
    backend::CompiledGraph cg = backend::compile_cpu(g, options);
    fmt::print("{}", cg.report.str());
    for (const std::string& r : cg.report.jit.remarks) fmt::print("remark: {}\n", r);
    if (!o->dump.empty()) fmt::print("wrote decomposed.kir, fused.kir, fused.dot, kernels.txt, kernels.cpp, report.txt to {}\n", o->dump);
  });
}

}  // namespace kiln::cli
