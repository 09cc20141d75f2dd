// The kernels kiln emits for the benchmark graphs, written to a folder: a "process replay" (as
// tinygrad's) for refactors that must not change what is generated. Run it at the commit before
// and the commit after, and diff the two folders:
//   kiln_bench_emit_kernels /tmp/before   (old build)
//   kiln_bench_emit_kernels /tmp/after    (new build)
//   diff -r /tmp/before /tmp/after
// Per workload of the comparison with PyTorch: the CPU backend's module at the CPU benchmark's
// shapes (first dimension / 8) as ID.cpp, and the CUDA backend's at the GPU's as ID.cu (NVRTC
// compiles it; no GPU is needed), with the compile report's kernel and BLAS counts in
// summary.txt. Also the decomposed and fused graphs (ID.cpu.fused.kir, ID.cuda.fused.kir).
//
// Usage: kiln_bench_emit_kernels DIR [--only ID,ID] [--no-cuda] [--no-cpu]
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/compile.h"
#include "bench/harness.h"
#include "ir/error.h"

namespace {

using namespace kiln;
namespace fs = std::filesystem;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const fs::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  if (!out) fail("cannot write {}", p.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    fmt::print(stderr, "usage: kiln_bench_emit_kernels DIR [--only ID,ID] [--no-cuda] [--no-cpu]\n");
    return 2;
  }
  const fs::path out = argv[1];
  bench::CommonOptions opt;
#if KILN_HAVE_CUDA
  bool cuda = true;
#else
  bool cuda = false;
#endif
  bool cpu = true;  // --no-cpu: the CUDA module alone (a big row's CPU graph may not fit this machine)
  for (int i = 2; i < argc; ++i) {
    if (bench::parse_common_option(opt, i, argc, argv)) continue;
    if (std::string(argv[i]) == "--no-cuda") cuda = false;
    else if (std::string(argv[i]) == "--no-cpu") cpu = false;
    else {
      fmt::print(stderr, "usage: kiln_bench_emit_kernels DIR [--only ID,ID] [--no-cuda] [--no-cpu]\n");
      return 2;
    }
  }
  fs::create_directories(out);
  const fs::path scratch = out / ".scratch";
  std::string summary;
  struct Target {
    Device device;
    int64_t divisor;
    const char* ext;
  };
  std::vector<Target> targets;
  if (cpu) targets.push_back({Device::cpu(), 8, "cpp"});
  if (cuda) targets.push_back({Device::cuda(0), 1, "cu"});
  try {
    for (const Target& t : targets) {
      for (const bench::Workload& w : bench::comparison_workloads(t.divisor)) {
        if (!bench::selected(opt, w)) continue;
        bench::Case c = w.build(false);
        backend::CompileOptions o;
        o.device = t.device;
        o.dump_dir = scratch.string();
        o.origin = "kiln_bench_emit_kernels";
        fs::remove_all(scratch);
        backend::CompiledGraph cg = backend::compile(c.graph, o);
        write_file(out / fmt::format("{}.{}", w.id, t.ext), cg.executable.source());
        write_file(out / fmt::format("{}.{}.fused.kir", w.id, t.device.kind == Device::Kind::CPU ? "cpu" : "cuda"),
                   read_file(scratch / "fused.kir"));
        summary += fmt::format("{} {}: {} nodes, {} groups, {} kernels, {} BLAS calls, arena {} bytes\n", w.id, t.device.str(),
                               cg.report.nodes, cg.report.groups, cg.report.kernels, cg.report.blas_calls, cg.report.arena_bytes);
        fmt::print("{} for {}: {} kernels + {} BLAS calls\n", w.id, t.device.str(), cg.report.kernels, cg.report.blas_calls);
        std::fflush(stdout);
      }
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "kiln_bench_emit_kernels: {}\n", e.what());
    return 1;
  }
  fs::remove_all(scratch);
  write_file(out / "summary.txt", summary);
  fmt::print("wrote {}\n", out.string());
  return 0;
}
