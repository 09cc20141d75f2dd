// kiln compile FILE.kir --device cpu|cuda [--arch sm_90] [--dump DIR] [--graph NAME] [--autotune]:
// compiles a graph for a device and prints the compile report (stages and their times,
// kernels, buffers, planned peak). --dump writes every stage: passes/*.kir, decomposed.kir,
// fused.kir, fused.dot, kernels.txt (scheduled kernel IR), kernels.cpp or kernels.cu (+
// kernels.ptx, kernels.cubin), report.txt. CUDA needs no GPU to compile: NVRTC alone.
#include <fmt/format.h>

#include "backend/compile.h"
#include "backend/cuda_backend.h"
#include "runtime/cpu/jit.h"
#if KILN_HAVE_CUDA
#include "runtime/cuda/driver.h"
#endif
#include "ir/error.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/device.h"

namespace kiln::cli {

Device parse_device(const std::string& device) {
  if (std::optional<Device> d = kiln::parse_device(device)) return *d;
  fail("unknown device '{}' (known: {})", device, device_kind_names());
}

void require_runnable(const Device& device, const std::string& command) {
  if (device.kind == Device::Kind::CPU) {
    if (!runtime::cpu::jit_available())
      fail("{} on the CPU needs the CPU backend, and this kiln was built without LLVM (-DKILN_ENABLE_LLVM=OFF); "
           "without --device, {} uses the reference interpreter",
           command, command);
    return;
  }
  std::string why;
  if (!backend::cuda_device_present(&why)) {
    const std::string_view said = "no CUDA device: ";
    if (why.rfind(said, 0) == 0) why.erase(0, said.size());
    fail("{} --device {} needs a CUDA GPU, and none can be used here ({}); `kiln compile --device cuda` compiles "
         "for one without it",
         command, device.str(), why);
  }
#if KILN_HAVE_CUDA
  if (device.index >= runtime::cuda::device_count())
    fail("{}: device {} does not exist: this machine has {} CUDA device{}", command, device.str(), runtime::cuda::device_count(),
         runtime::cuda::device_count() == 1 ? "" : "s");
#endif
}

void add_compile_command(CLI::App& app) {
  struct Opts {
    ModelOptions model;
    std::string file, graph, device = "cpu", dump, arch, schedule;
    bool unfused = false, unoptimized = false, remarks = false, autotune = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("compile", "Compile a graph for a device and print the compile report");
  cmd->add_option("file", o->file, "the .kir or .onnx file")->required();
  add_model_options(cmd, o->model);
  cmd->add_option("--graph", o->graph, "which graph, when the file holds several");
  cmd->add_option("--device", o->device, "cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--arch", o->arch, "CUDA: the GPU architecture to compile for (sm_80, sm_90, ...; default: the device's, else sm_90)");
  cmd->add_option("--dump", o->dump, "write every stage of the compilation to DIR");
  cmd->add_flag("--unfused", o->unfused, "one kernel per node (no fusion)");
  cmd->add_flag("--unoptimized", o->unoptimized, "skip the graph optimizations (canonicalize, CSE, DCE) before fusion, as kiln fuzz's unoptimized config");
  cmd->add_flag("--autotune", o->autotune, "time each kernel's candidate schedules on the device and keep the fastest (also KILN_AUTOTUNE=1; the choice is kept in the kernel cache)");
  cmd->add_option("--schedule", o->schedule, "CUDA: the schedule knobs of every kernel, as --autotune names its candidates ('reduction_block 128, held_bytes_per_thread 64')");
  cmd->add_flag("--vectorizer-remarks", o->remarks, "print clang's loop-vectorizer remarks (what vectorized, what did not)");
  cmd->callback([o] {
    backend::CompileOptions options;
    options.device = parse_device(o->device);
    if (!o->arch.empty() && options.device.kind != Device::Kind::CUDA) fail("--arch is for --device cuda");
    options.arch = o->arch;
    Graph g = load_graph(o->file, o->graph, o->model);
    options.dump_dir = o->dump;
    options.fuse = !o->unfused;
    options.optimize = !o->unoptimized;
    options.jit.vectorizer_remarks = o->remarks;
    options.jit.use_cache = !o->remarks;  // remarks come from clang, which a cache hit skips
    options.autotune = o->autotune;
    options.schedule_knobs = o->schedule;
    options.origin = "kiln compile";
    backend::CompiledGraph cg = backend::compile(g, options);
    fmt::print("{}", cg.report.str());
    for (const std::string& r : cg.report.jit.remarks) fmt::print("remark: {}\n", r);
    if (!o->dump.empty()) {
      bool cuda = options.device.kind == Device::Kind::CUDA;
      fmt::print("wrote passes/, decomposed.kir, fused.kir, fused.dot, kernels.txt, {}, report.txt to {}\n",
                 cuda ? "kernels.cu, kernels.ptx, kernels.cubin" : "kernels.cpp", o->dump);
    }
    if (!cg.report.debug_folder.empty()) fmt::print("debug folder (KILN_DEBUG_DIR): {}\n", cg.report.debug_folder);
  });
}

}  // namespace kiln::cli
