// Lowering and schedule of sort and topk kernels (codegen/sort.h): a kernel of its own per node,
// where a CUDA block sorts its row (shared memory, the outputs, or scratch for a long topk row),
// what the schedule record says, and the routine call each emitter prints. The kernels run
// against the reference in tests/backend/test_backend_sort.cpp.
#include <gtest/gtest.h>

#include "codegen/cpp_emitter.h"
#include "codegen/cuda_emitter.h"
#include "codegen/lower.h"
#include "codegen/schedule.h"
#include "ir/parser.h"
#include "passes/fusion/fusion.h"
#include "tests/support/support.h"

namespace kiln::codegen {
namespace {

using kiln::testing::has;

LoweredGraph lowered(const std::string& text, const Target& t) {
  Graph g = parse_graph(text);
  LoweredGraph lg = lower(g, fusion::fuse(g, {}), t);
  schedule(lg, t);
  return lg;
}

const Kernel& sort_kernel(const LoweredGraph& lg, size_t nth) {
  size_t seen = 0;
  for (const Kernel& k : lg.kernels)
    if (k.sort && seen++ == nth) return k;
  throw Error("no such sort kernel");
}

TEST(SortKernels, CudaRowsInSharedMemoryInTheOutputsOrInScratch) {
  LoweredGraph lg = lowered(R"(
graph s(%x: f32[6,3000], %y: f32[2,40000], %z: bf16[3,50,4]) {
  %a, %ai = sort(%x) : f32[6,3000], i64[6,3000]
  %b, %bi = sort(%y, descending=true) : f32[2,40000], i64[2,40000]
  %c, %ci = topk(%y, k=7) : f32[2,7], i64[2,7]
  %d, %di = topk(%z, k=2, dim=1, largest=false) : bf16[3,2,4], i64[3,2,4]
  return (%a, %ai, %b, %bi, %c, %ci, %d, %di)
})",
                            cuda_target());
  const Kernel &a = sort_kernel(lg, 0), &b = sort_kernel(lg, 1), &c = sort_kernel(lg, 2), &d = sort_kernel(lg, 3);
  // 3000 pairs of f32 and int: 24000 B of shared memory, 2048 pairs a network stage: 1024 threads.
  EXPECT_TRUE(a.sort->in_shared);
  EXPECT_EQ(a.launch.dynamic_shared_bytes, 24000);
  EXPECT_EQ(a.launch.block, 1024);
  EXPECT_EQ(a.launch.grid, 6);
  EXPECT_TRUE(has(print_schedule(a.schedule, a.launch), "bitonic network over the row's 3000 pairs in shared memory")) << print_schedule(a.schedule, a.launch);
  std::string cu = emit_cuda_kernel(a);
  EXPECT_TRUE(has(cu, "kiln_sort_rows<0>(b0, b1, b2, 0, 0, 6LL, 3000LL, 1LL, 3000LL, false, true);")) << cu;
  // 40000 pairs do not fit: the sort runs in its outputs, the topk in scratch it was given.
  EXPECT_FALSE(b.sort->in_shared);
  EXPECT_FALSE(b.sort->scratch);
  EXPECT_EQ(b.launch.dynamic_shared_bytes, 0);
  EXPECT_TRUE(has(emit_cuda_kernel(b), "kiln_sort_rows<0>(b0, b1, b2, 0, 0, 2LL, 40000LL, 1LL, 40000LL, true, false);")) << emit_cuda_kernel(b);
  EXPECT_TRUE(c.sort->scratch);
  ASSERT_EQ(c.buffers.size(), 5u);
  EXPECT_EQ(c.buffers[3].role, BufferRole::Temp);
  EXPECT_EQ(c.buffers[3].numel, 80000);
  EXPECT_EQ(c.buffers[4].dtype, DType::I64);
  EXPECT_TRUE(has(emit_cuda_kernel(c), "kiln_sort_rows<0>(b0, b1, b2, b3, b4, 2LL, 40000LL, 1LL, 7LL, true, false);")) << emit_cuda_kernel(c);
  EXPECT_TRUE(has(print_schedule(c.schedule, c.launch), "in scratch (too long for shared memory), the first 7 copied out"));
  // Along dim 1 of [3, 50, 4]: 12 rows of 50, a stride of 4; bf16 is routine 3.
  EXPECT_EQ(d.sort->rows(), 12);
  EXPECT_EQ(d.sort->inner, 4);
  EXPECT_TRUE(has(emit_cuda_kernel(d), "kiln_sort_rows<3>(b0, b1, b2, 0, 0, 3LL, 50LL, 4LL, 2LL, false, true);")) << emit_cuda_kernel(d);
  EXPECT_TRUE(has(print_kernel(d), "sort bf16: 12 rows of 50 (stride 4), 2 smallest kept")) << print_kernel(d);
}

TEST(SortKernels, CpuHeapsInTheOutputsOnThePool) {
  LoweredGraph lg = lowered(R"(
graph s(%x: i64[512,300], %y: f32[2,9]) {
  %a, %ai = sort(%x, dim=0) : i64[512,300], i64[512,300]
  %b, %bi = topk(%y, k=3) : f32[2,3], i64[2,3]
  return (%a, %ai, %b, %bi)
})",
                            cpu_target());
  const Kernel &a = sort_kernel(lg, 0), &b = sort_kernel(lg, 1);
  EXPECT_FALSE(a.sort->scratch);  // no scratch on the CPU: the heaps live in the outputs
  EXPECT_EQ(a.schedule.mapping, "thread pool");
  EXPECT_EQ(b.schedule.mapping, "serial");
  std::string cpp = emit_cpp_kernel(a);
  EXPECT_TRUE(has(cpp, fmt::format("kiln_sort_cpu<4>(b0, b1, b2, 1, 512, 300, 512, false, {});", a.sort->grain))) << cpp;
  EXPECT_TRUE(has(emit_cpp_kernel(b), "kiln_sort_cpu<0>(b0, b1, b2, 2, 9, 1, 3, true, ")) << emit_cpp_kernel(b);
}

}  // namespace
}  // namespace kiln::codegen
