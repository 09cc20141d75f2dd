// Memory planning: intervals placed in one arena (overlap, alignment, peak), and the
// buffers of fused graphs (aliases extend lifetimes, graph outputs never share).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "ir/bytes.h"
#include "ir/parser.h"
#include "passes/fusion/fusion.h"
#include "passes/memory_plan.h"
#include "tests/passes/arena_of.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using kiln::testing::has;

bool disjoint(int64_t a, int64_t asize, int64_t b, int64_t bsize) { return a + asize <= b || b + bsize <= a; }

// Buffers live at the same time never share bytes.
void check_no_overlap(const std::vector<BufferInterval>& iv, const MemoryPlan& plan, int64_t alignment) {
  ASSERT_EQ(plan.offsets.size(), iv.size());
  for (size_t i = 0; i < iv.size(); ++i) {
    EXPECT_EQ(plan.offsets[i] % alignment, 0) << "buffer " << i;
    EXPECT_LE(plan.offsets[i] + iv[i].bytes, plan.peak_bytes);
    for (size_t j = i + 1; j < iv.size(); ++j) {
      bool together = iv[i].first <= iv[j].last && iv[j].first <= iv[i].last;
      if (together) {
        EXPECT_TRUE(disjoint(plan.offsets[i], iv[i].bytes, plan.offsets[j], iv[j].bytes)) << i << " and " << j;
      }
    }
  }
}

TEST(MemoryPlan, OverlappingLifetimesGetSeparateMemory) {
  std::vector<BufferInterval> iv = {{100, 0, 1}, {100, 1, 2}};
  MemoryPlan p = plan_memory(iv);
  check_no_overlap(iv, p, 64);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.peak_bytes, 256);
  EXPECT_EQ(p.naive_bytes, 256);
}

TEST(MemoryPlan, DisjointLifetimesShareMemory) {
  std::vector<BufferInterval> iv = {{1000, 0, 0}, {800, 1, 1}, {1000, 2, 3}};
  MemoryPlan p = plan_memory(iv);
  check_no_overlap(iv, p, 64);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 0, 0}));
  EXPECT_EQ(p.peak_bytes, 1024);
  EXPECT_EQ(p.naive_bytes, 1024 + 832 + 1024);
}

TEST(MemoryPlan, SmallBufferFillsTheBestGap) {
  // 0 and 2 are live while 3 is; 1 dies before 3 starts, leaving a 512-byte hole.
  std::vector<BufferInterval> iv = {{1024, 0, 4}, {512, 0, 1}, {1024, 0, 4}, {256, 2, 3}};
  MemoryPlan p = plan_memory(iv);
  check_no_overlap(iv, p, 64);
  EXPECT_EQ(p.peak_bytes, 2048 + 512);
  EXPECT_EQ(p.offsets[3], p.offsets[1]);
}

TEST(MemoryPlan, Alignment) {
  std::vector<BufferInterval> iv = {{1, 0, 2}, {3, 1, 2}, {70, 2, 2}};
  MemoryPlan p = plan_memory(iv, 64);
  check_no_overlap(iv, p, 64);
  EXPECT_EQ(p.peak_bytes, 64 + 64 + 128);
  MemoryPlan q = plan_memory(iv, 8);
  check_no_overlap(iv, q, 8);
  EXPECT_EQ(q.peak_bytes, 8 + 8 + 72);
  EXPECT_TRUE(has(kiln::testing::error_of([&] { plan_memory(iv, 48); }), "power of two"));
  EXPECT_TRUE(has(kiln::testing::error_of([&] { plan_memory(iv, 0); }), "power of two"));
  std::vector<BufferInterval> bad = {{64, 3, 1}};
  EXPECT_TRUE(has(kiln::testing::error_of([&] { plan_memory(bad); }), "before it is written"));
  std::vector<BufferInterval> negative = {{-1, 0, 1}};
  EXPECT_TRUE(has(kiln::testing::error_of([&] { plan_memory(negative); }), "negative size"));
}

TEST(MemoryPlan, PeakOfAChainIsTheLargestLivePair) {
  // Group i writes buffer i and group i+1 reads it: neighbours live together, nothing else.
  std::mt19937 rng(7);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<BufferInterval> iv;
    for (int i = 0; i < 12; ++i) iv.push_back({64 * static_cast<int64_t>(1 + rng() % 50), i, i + 1});
    MemoryPlan p = plan_memory(iv);
    check_no_overlap(iv, p, 64);
    int64_t live_max = iv[0].bytes;
    for (size_t i = 1; i < iv.size(); ++i) live_max = std::max(live_max, iv[i - 1].bytes + iv[i].bytes);
    EXPECT_EQ(p.peak_bytes, live_max) << "trial " << trial;
  }
}

TEST(MemoryPlan, Empty) {
  MemoryPlan p = plan_memory({});
  EXPECT_EQ(p.peak_bytes, 0);
  EXPECT_TRUE(p.offsets.empty());
}

// A chain of matmuls: each result is materialized, read by the next group and then dead.
const char* kMatmulChain = R"(
graph chain(%x: f32[16,16], %w: f32[16,16]) {
  %m1 = matmul(%x, %w) : f32[16,16]
  %m2 = matmul(%m1, %w) : f32[16,16]
  %m3 = matmul(%m2, %w) : f32[16,16]
  %m4 = matmul(%m3, %w) : f32[16,16]
  %y = relu(%m4) : f32[16,16]
  return (%y)
})";

TEST(ArenaPlan, ChainReusesMemory) {
  Graph g = parse_graph(kMatmulChain);
  fusion::FusionPlan plan = fusion::fuse(g);
  testing::Arena mem = testing::arena_of(g, plan);
  ASSERT_EQ(mem.buffers.size(), 4u);  // m1..m4; %y is returned
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(mem.buffers[i].bytes, 1024);
    EXPECT_EQ(mem.buffers[i].first_step, static_cast<int>(i));
    EXPECT_EQ(mem.buffers[i].last_step, static_cast<int>(i) + 1);
  }
  EXPECT_EQ(mem.plan.naive_bytes, 4096);
  EXPECT_EQ(mem.plan.arena_bytes, 2048);
  EXPECT_EQ(mem.plan.report(), "memory: 4 buffers, 4.0 KB unplanned -> 2.0 KB planned peak");
}

TEST(ArenaPlan, AliasesExtendTheBaseLifetime) {
  Graph g = parse_graph(R"(
graph alias(%x: f32[16,16], %w: f32[16,16]) {
  %a = exp(%x) : f32[16,16]
  %m1 = matmul(%x, %w) : f32[16,16]
  %m2 = matmul(%m1, %w) : f32[16,16]
  %at = transpose(%a, dim0=0, dim1=1) : f32[16,16]{1,16}
  %m3 = matmul(%m2, %at) : f32[16,16]
  return (%m3)
})");
  fusion::FusionPlan plan = fusion::fuse(g);
  testing::Arena mem = testing::arena_of(g, plan);
  EXPECT_EQ(plan.group(g.find("at").node).kind, fusion::KernelKind::Alias);
  const testing::ArenaBuffer* a = mem.find("a");
  const testing::ArenaBuffer* m1 = mem.find("m1");
  ASSERT_TRUE(a && m1) << print_fused(g, plan);
  EXPECT_EQ(a->last_step, mem.step_of_group.at(plan.group(g.find("m3").node).id)) << print_fused(g, plan);
  // %a lives across %m1 and %m2, so neither may share its memory.
  EXPECT_TRUE(disjoint(a->offset, a->bytes, m1->offset, m1->bytes));
}

TEST(ArenaPlan, GraphOutputsNeverShare) {
  Graph g = parse_graph(R"(
graph outs(%x: f32[16,16], %w: f32[16,16]) {
  %m1 = matmul(%x, %w) : f32[16,16]
  %m2 = matmul(%m1, %w) : f32[16,16]
  %r = reshape(%m2, shape=[256]) : f32[256]
  %m3 = matmul(%m2, %w) : f32[16,16]
  %m4 = matmul(%m3, %w) : f32[16,16]
  return (%m1, %r, %m4)
})");
  fusion::FusionPlan plan = fusion::fuse(g);
  testing::Arena mem = testing::arena_of(g, plan);
  // m1 and m4 are returned; %r, a view of m2, is returned as a copy of its own, so m2 and m3
  // are the arena's, each live from its GEMM to its last reader.
  ASSERT_TRUE(mem.find("m2") && mem.find("m3")) << print_fused(g, plan);
  EXPECT_EQ(mem.find("m1"), nullptr);
  EXPECT_EQ(mem.find("m4"), nullptr);
}

TEST(FormatBytes, PowersOf1024) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(3 * 1024 * 1024 + 100 * 1024), "3.1 MB");
  EXPECT_EQ(format_bytes(1536), "1.5 KB");
}

}  // namespace
}  // namespace kiln
