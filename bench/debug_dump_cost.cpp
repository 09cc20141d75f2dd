// What a debug folder costs: the first call of a compiled MiniGPT training step (trace, joint
// graph, partition-free step assembly, compile with a warm kernel cache) without a debug folder,
// with one (KILN_DEBUG_DIR: .kir and .dot per stage, the compile driver's dump), and with SVGs
// drawn too (KILN_DEBUG_SVG=1). Each variant runs in a fresh compiled step, median of a few.
//
// Usage: kiln_bench_debug_dump_cost [--reps N]
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "bench/harness.h"
#include "frontend/compile.h"
#include "frontend/nn/minigpt.h"
#include "frontend/ops.h"
#include "runtime/cpu/jit.h"

namespace {

using namespace kiln;
namespace fs = std::filesystem;

double first_call_ms(const std::string& debug_dir, bool svg) {
  nn::MiniGPT model(nn::MiniGPTConfig{}, 0);
  const int64_t T = model.config().context, V = model.config().vocab_size;
  Tensor tokens = randint(0, V, {32, T}, 1), targets = randint(0, V, {32, T}, 2);
  CompileOptions options;
  options.debug_dir = debug_dir;
  options.debug_svg = svg;
  options.name = "train_step";
  CompiledTrainStep step = compile(
      model, [&](const std::vector<Tensor>& b) { return model.loss(b[0], b[1]); }, AdamWConfig{}, options);
  auto t0 = bench::Clock::now();
  step({tokens, targets});
  return bench::ms_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--reps" && i + 1 < argc) reps = std::stoi(argv[++i]);
    else {
      fmt::print(stderr, "usage: kiln_bench_debug_dump_cost [--reps N]\n");
      return 2;
    }
  }
  if (!runtime::cpu::jit_available()) {
    fmt::print("kiln was built without the LLVM CPU path: nothing to benchmark\n");
    return 0;
  }
  ::unsetenv("KILN_DEBUG_DIR");
  ::unsetenv("KILN_DEBUG_SVG");
  const fs::path root = fs::temp_directory_path() / fmt::format("kiln-debug-cost-{}", ::getpid());
  first_call_ms("", false);  // fills the kernel cache: every variant below compiles warm
  struct Variant {
    std::string name;
    std::string dir;
    bool svg;
    std::vector<double> ms;
  };
  std::vector<Variant> variants{{"no debug folder", "", false, {}},
                                {"KILN_DEBUG_DIR (.kir, .dot, the driver's dump)", (root / "plain").string(), false, {}},
                                {"KILN_DEBUG_DIR + KILN_DEBUG_SVG=1", (root / "svg").string(), true, {}}};
  for (int r = 0; r < reps; ++r)
    for (Variant& v : variants) v.ms.push_back(first_call_ms(v.dir, v.svg));
  fs::remove_all(root);
  fmt::print("\nMiniGPT training step (batch 32), first call with a warm kernel cache; median of {}\n\n", reps);
  fmt::print("| debug folder | first call ms |\n| --- | --- |\n");
  for (const Variant& v : variants) fmt::print("| {} | {:.1f} |\n", v.name, bench::median(v.ms));
  return 0;
}
