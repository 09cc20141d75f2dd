// Kernels that are the same but for their names (a model's repeated layers) compile once for
// CUDA: the report counts them distinct, each launches the function of the first, and the
// results still match the reference (the GPU runs them where there is one; NVRTC compiles them
// everywhere).
#include <gtest/gtest.h>

#include "ir/parser.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class KernelDedup : public DeviceTest {};
KILN_DEVICE_TESTS(KernelDedup);

TEST_P(KernelDedup, RepeatedLayersCompileOnce) {
  if (!on_cuda()) GTEST_SKIP() << "the CPU's kernels are one module of clang's";
  // Three layers of the same shapes (a product, then a softmax and a tanh: one kernel), and a
  // softmax of another shape: its three layer kernels are one distinct kernel.
  Graph g = parse_graph(R"(
graph layers(%x: f32[48,200], %w1: f32[200,200], %w2: f32[200,200], %w3: f32[200,200], %v: f32[48,100]) {
  %a1 = matmul(%x, %w1) : f32[48,200]
  %s1 = softmax(%a1, dim=1) : f32[48,200]
  %t1 = tanh(%s1) : f32[48,200]
  %a2 = matmul(%t1, %w2) : f32[48,200]
  %s2 = softmax(%a2, dim=1) : f32[48,200]
  %t2 = tanh(%s2) : f32[48,200]
  %a3 = matmul(%t2, %w3) : f32[48,200]
  %s3 = softmax(%a3, dim=1) : f32[48,200]
  %t3 = tanh(%s3) : f32[48,200]
  %o = softmax(%v, dim=1) : f32[48,100]
  return (%t3, %o)
})");
  backend::CompiledGraph c = compile_for_test(g);
  EXPECT_NE(c.report.compiler.find("4 kernels for sm_90 (2 distinct,"), std::string::npos) << c.report.compiler;
  std::string why;
  if (!device_can_run(&why)) GTEST_SKIP() << why;
  expect_matches_reference(g, inputs_for(g, 7));
}

}  // namespace
}  // namespace kiln::testing
