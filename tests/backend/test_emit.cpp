// The emit stage: one source per kernel, each emitted once; the module is the prelude, then each
// kernel after a newline, and a line of the module names the kernel it belongs to (how a CPU
// compile error names its kernel).
#include <gtest/gtest.h>

#include "backend/backend.h"
#include "backend/compile.h"
#include "backend/executable_state.h"
#include "ir/parser.h"
#include "runtime/cpu/jit.h"

namespace kiln::backend {
namespace {

TEST(EmittedModule, TheModuleIsThePreludeThenEachKernelAndALineNamesItsKernel) {
  EmittedModule m;
  m.prelude = "p1\np2\n";
  m.kernels = {"// k0\nvoid k0() {}\n", "// k1\nvoid k1() {\n}\n"};
  EXPECT_EQ(m.text(), "p1\np2\n\n// k0\nvoid k0() {}\n\n// k1\nvoid k1() {\n}\n");
  // Lines: 1 p1, 2 p2, 3 (separator), 4 // k0, 5 void k0, 6 (separator), 7 // k1, 8-9 k1's body.
  for (int line : {1, 2}) EXPECT_EQ(m.kernel_at_line(line), -1) << line;
  for (int line : {4, 5}) EXPECT_EQ(m.kernel_at_line(line), 0) << line;
  for (int line : {7, 8, 9}) EXPECT_EQ(m.kernel_at_line(line), 1) << line;
  EmittedModule prelude_only{"only\n", {}};
  EXPECT_EQ(prelude_only.kernel_at_line(1), -1);
}

TEST(EmittedModule, ACompiledGraphKeepsEachKernelsSourceOnce) {
  Graph g = parse_graph(R"(
graph two(%x: f32[8,16]) {
  %e = exp(%x) : f32[8,16]
  %s = sum(%e, dim=[1]) : f32[8]
  %m = amax(%x, dim=[0]) : f32[16]
  return (%s, %m)
})");
  for (Device d : {Device::cpu(), Device::cuda(0)}) {
#if !KILN_HAVE_CUDA
    if (d.kind == Device::Kind::CUDA) continue;
#endif
    if (d.kind == Device::Kind::CPU && !runtime::cpu::jit_available()) continue;
    CompileOptions o;
    o.device = d;
    CompiledGraph c = compile(g, o);
    const ExecutableState& s = c.executable.state();
    ASSERT_EQ(s.emitted.kernels.size(), s.lowered.kernels.size());
    EXPECT_EQ(s.source, s.emitted.text());
    for (size_t k = 0; k < s.lowered.kernels.size(); ++k)
      EXPECT_NE(s.emitted.kernels[k].find(s.lowered.kernels[k].name), std::string::npos) << d.str() << " kernel " << k;
  }
}

}  // namespace
}  // namespace kiln::backend
