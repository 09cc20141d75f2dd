// The tuner's candidate schedules (codegen/schedule_candidates.h): which variants each mapping
// gets, that they are distinct and valid kernels, and the knobs' names as a user writes them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <set>
#include <string>
#include <vector>

#include "codegen/cuda_emitter.h"
#include "codegen/lower.h"
#include "codegen/schedule.h"
#include "codegen/schedule_candidates.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "passes/fusion/fusion.h"
#include "tests/support/support.h"

#if KILN_HAVE_CUDA
#include "runtime/cuda/nvrtc.h"
#endif

namespace kiln::codegen {
namespace {

using kiln::testing::has;

// The graph's kernels as the lowering leaves them for `t` (unscheduled).
std::vector<Kernel> lowered_kernels(const std::string& kir, const Target& t) {
  Graph g = parse_graph(kir);
  fusion::FusionOptions fo;
  fo.column_partials_in_rows = t.column_partials_in_rows;
  fo.recompute_from_statistics = t.recompute_from_statistics;
  return lower(g, fusion::fuse(g, fo), t).kernels;
}

constexpr const char* kSoftmax = R"(
graph softmax(%x: f32[{0},{1}]) {{
  %m = amax(%x, dim=[1], keepdim=true) : f32[{0},1]
  %d = sub(%x, %m) : f32[{0},{1}]
  %e = exp(%d) : f32[{0},{1}]
  %s = sum(%e, dim=[1], keepdim=true) : f32[{0},1]
  %y = div(%e, %s) : f32[{0},{1}]
  return (%y)
}})";

constexpr const char* kPointwise = R"(
graph pw(%x: f32[{0}], %w: f32[{0}]) {{
  %a = mul(%x, %w) : f32[{0}]
  %y = gelu(%a) : f32[{0}]
  return (%y)
}})";

constexpr const char* kRmsBackward = R"(
graph rms_backward(%x: f32[{0},{1}], %w: f32[{1}], %dy: f32[{0},{1}]) {{
  %sq = mul(%x, %x) : f32[{0},{1}]
  %ss = sum(%sq, dim=[1], keepdim=true) : f32[{0},1]
  %n = full(size=[], fill_value={1}.0) : f32[]
  %ms = div(%ss, %n) : f32[{0},1]
  %r = rsqrt(%ms) : f32[{0},1]
  %xn = mul(%x, %r) : f32[{0},{1}]
  %g = mul(%dy, %xn) : f32[{0},{1}]
  %dw = sum(%g, dim=[0]) : f32[{1}]
  %dyw = mul(%dy, %w) : f32[{0},{1}]
  %dx = mul(%dyw, %r) : f32[{0},{1}]
  return (%dx, %dw)
}})";

// Every candidate: verified, scheduled differently from the others, the default first.
void expect_distinct(const std::vector<ScheduleCandidate>& cands) {
  ASSERT_FALSE(cands.empty());
  EXPECT_EQ(cands[0].knobs, "default");
  std::set<std::string> seen;
  for (const ScheduleCandidate& c : cands) {
    EXPECT_NO_THROW(verify(c.kernel)) << c.knobs;
    std::string f = fmt::format("{}|{}x{}", print_kernel(c.kernel), c.kernel.launch.grid, c.kernel.launch.block);
    EXPECT_TRUE(seen.insert(f).second) << "two candidates schedule alike: " << c.knobs;
  }
}

std::vector<std::string> knobs_of(const std::vector<ScheduleCandidate>& cands) {
  std::vector<std::string> out;
  for (const ScheduleCandidate& c : cands) out.push_back(c.knobs);
  return out;
}

TEST(ScheduleCandidates, EachMappingGetsItsOwnVariants) {
  Target t = cuda_target("sm_90", 132);
  // A flat loop: blocks and grid.
  auto pw = schedule_candidates(lowered_kernels(fmt::format(kPointwise, 1 << 22), t).at(0), t);
  expect_distinct(pw);
  EXPECT_EQ(pw[0].kernel.schedule.mapping, "grid-stride");
  EXPECT_EQ(pw.size(), 8u) << fmt::format("{}", fmt::join(knobs_of(pw), " | "));
  EXPECT_EQ(pw[1].knobs, "pointwise_block 128");
  EXPECT_EQ(pw[1].kernel.launch.block, 128);
  // The default: a full grid, one vector a thread (2^22 elements are 2^20 vectors), the launch
  // not capped at what the SMs hold.
  EXPECT_FALSE(pw[0].kernel.launch.persistent);
  EXPECT_EQ(pw[0].kernel.schedule.unroll, 0);
  EXPECT_EQ(pw[0].kernel.launch.grid * pw[0].kernel.launch.block, (1 << 22) / 4);
  // Iterations a thread runs at once: the loop's and the record's, and said where the record
  // shows; a full grid gives each thread its unrolled iterations once.
  EXPECT_EQ(pw[3].knobs, "pointwise_unroll 2");
  EXPECT_EQ(pw[3].kernel.schedule.unroll, 2);
  EXPECT_EQ(pw[3].kernel.launch.grid * pw[3].kernel.launch.block * 2, (1 << 22) / 4);
  EXPECT_NE(print_schedule(pw[4].kernel.schedule, pw[4].kernel.launch).find("4 iterations at once"), std::string::npos)
      << print_schedule(pw[4].kernel.schedule, pw[4].kernel.launch);
  // A persistent grid: at most 8 blocks an SM, striding over the rest.
  EXPECT_EQ(pw[5].knobs, "blocks_per_sm 8");
  EXPECT_TRUE(pw[5].kernel.launch.persistent);
  EXPECT_EQ(pw[5].kernel.launch.grid, 132 * 8);

  // Rows of 1024 (a warp per row): rows per block, or a block per row.
  auto sm = schedule_candidates(lowered_kernels(fmt::format(kSoftmax, 4096, 1024), t).at(0), t);
  expect_distinct(sm);
  EXPECT_EQ(sm[0].kernel.schedule.mapping, "warp per row");
  bool block_per_row = false;
  for (const ScheduleCandidate& c : sm) block_per_row |= c.kernel.schedule.mapping == "block per row";
  EXPECT_TRUE(block_per_row) << fmt::format("{}", fmt::join(knobs_of(sm), " | "));
  // Rows of 4096 (a block per row): its block and what a thread holds.
  auto big = schedule_candidates(lowered_kernels(fmt::format(kSoftmax, 1024, 4096), t).at(0), t);
  expect_distinct(big);
  EXPECT_EQ(big[0].kernel.schedule.mapping, "block per row");
  EXPECT_GE(big.size(), 3u);
  // A norm backward's chunks: the bytes a thread holds (so the block's size).
  auto chunks = schedule_candidates(lowered_kernels(fmt::format(kRmsBackward, 512, 4096), t).at(0), t);
  expect_distinct(chunks);
  EXPECT_EQ(chunks[0].kernel.schedule.mapping, "block per chunk of rows");
  ASSERT_EQ(chunks.size(), 3u) << fmt::format("{}", fmt::join(knobs_of(chunks), " | "));
  EXPECT_NE(chunks[1].kernel.launch.block, chunks[0].kernel.launch.block);
  EXPECT_NE(chunks[2].kernel.launch.block, chunks[0].kernel.launch.block);
}

// A knob the kernel's schedule does not read gives the same kernel: dropped, so a short row's
// block-per-row variants collapse, and a CPU target has its default alone.
// An unrolled flat loop: each iteration's loads a grid stride apart, a row vector's index taken
// modulo its length after the stride is added, then the iterations left one at a time.
TEST(ScheduleCandidates, AnUnrolledLoopLoadsEachIterationAGridStrideApart) {
  Target t = with_knobs(cuda_target("sm_90", 132), "pointwise_unroll 2");
  const std::string src = emit_cuda_kernel(schedule_candidates(lowered_kernels(R"(
graph pw(%x: f32[4096,1024], %w: f32[1024]) {
  %y = mul(%x, %w) : f32[4096,1024]
  return (%y)
})", t).at(0), t).at(0).kernel);
  EXPECT_NE(src.find("for (; i_vec_base + 1 * kiln_stride < 1048576; i_vec_base += 2 * kiln_stride) {"), std::string::npos) << src;
  EXPECT_NE(src.find("((const kiln_vec<float, 4>*)b2)[(i_vec_base + 1 * kiln_stride) % 256]"), std::string::npos) << src;
  EXPECT_NE(src.find("for (int i_vec = i_vec_base; i_vec < 1048576; i_vec += kiln_stride) {"), std::string::npos) << src;
}

TEST(ScheduleCandidates, VariantsThatChangeNothingAreDropped) {
  Target t = cuda_target("sm_90", 132);
  auto tiny = schedule_candidates(lowered_kernels(fmt::format(kPointwise, 40), t).at(0), t);
  expect_distinct(tiny);
  EXPECT_LT(tiny.size(), 6u) << "a 40-element loop has one block of 64 whatever pointwise_block says above it";
  Target cpu = cpu_target();
  auto on_cpu = schedule_candidates(lowered_kernels(fmt::format(kSoftmax, 64, 1024), cpu).at(0), cpu);
  EXPECT_EQ(on_cpu.size(), 1u);
}

TEST(ScheduleCandidates, KnobsParseAsTheyPrint) {
  Target t = with_knobs(cuda_target("sm_90", 132), "reduction_block 128, held_bytes_per_thread 64");
  EXPECT_EQ(t.reduction_block, 128);
  EXPECT_EQ(t.held_bytes_per_thread, 64);
  EXPECT_EQ(with_knobs(t, "default").reduction_block, 128);
  try {
    with_knobs(t, "reduction_blok 128");
    ADD_FAILURE() << "an unknown knob was accepted";
  } catch (const kiln::Error& e) {
    EXPECT_TRUE(has(e.what(), "'reduction_blok 128' is not a knob the schedule reads")) << e.what();
    EXPECT_TRUE(has(e.what(), "reduction_block")) << "lists the knobs: " << e.what();
  }
  EXPECT_THROW(with_knobs(t, "reduction_block 12x"), kiln::Error);
  EXPECT_THROW(with_knobs(t, "reduction_block 0"), kiln::Error);
  EXPECT_THROW(with_knobs(t, "reduction_block"), kiln::Error);
  EXPECT_THROW(with_knobs(t, "pointwise_block 2048"), kiln::Error);
  EXPECT_THROW(with_knobs(t, "reduction_block 100"), kiln::Error);
  EXPECT_EQ(with_knobs(t, "attention_rows_per_warp 16").attention_rows_per_warp, 16);
  EXPECT_THROW(with_knobs(t, "attention_rows_per_warp 24"), kiln::Error);
  EXPECT_THROW(with_knobs(t, "attention_key_tile 128"), kiln::Error);
}

constexpr const char* kAttention = R"(
graph attention(%q: bf16[2,{0},{1}], %k: bf16[2,{0},{1}], %v: bf16[2,{0},{1}]) {{
  %y, %lse = flash_attention(%q, %k, %v, is_causal=true) : bf16[2,{0},{1}], f32[2,{0}]
  return (%y, %lse)
}})";

// The tensor-core forward: 32 query rows a warp by default (128-row tiles; past head 64 q from
// shared memory), walking 64-key tiles; its variants: 16 rows (64-row tiles, q in registers)
// and 32-key tiles.
TEST(ScheduleCandidates, AttentionsForwardVariesItsRowsAWarp) {
  Target t = cuda_target("sm_90", 132);
  for (int64_t head : {64, 128}) {
    auto c = schedule_candidates(lowered_kernels(fmt::format(kAttention, 1000, head), t).at(0), t);
    ASSERT_EQ(c.size(), 3u) << head;
    ASSERT_TRUE(c[0].kernel.attention.has_value());
    const AttentionKernel &a = *c[0].kernel.attention, &b = *c[1].kernel.attention;
    EXPECT_EQ(c[1].knobs, "attention_rows_per_warp 16");
    EXPECT_EQ(c[2].knobs, "attention_key_tile 32");
    EXPECT_EQ(a.block_m, 128);
    EXPECT_EQ(b.block_m, 64);
    EXPECT_EQ(a.block_n, 64);
    EXPECT_EQ(b.block_n, 64);
    EXPECT_EQ(c[2].kernel.attention->block_n, 32);
    EXPECT_EQ(a.q_in_registers, head <= 64);
    EXPECT_TRUE(b.q_in_registers);
    EXPECT_EQ(c[0].kernel.launch.grid, 2 * 8);  // 1000 queries in tiles of 128
    EXPECT_EQ(c[1].kernel.launch.grid, 2 * 16);
    EXPECT_TRUE(has(c[0].kernel.schedule.why, "4 warps of 32 query rows")) << c[0].kernel.schedule.why;
  }
  // An sm_86 gives 99 KB: 32 rows' q tile beside the key buffers (102 KB at head 128) does not
  // fit, and the forward takes 16 rows on tensor cores rather than FFMA tiles.
  Target ampere = cuda_target("sm_86", 84);
  Kernel k = schedule_candidates(lowered_kernels(fmt::format(kAttention, 1000, 128), ampere).at(0), ampere).at(0).kernel;
  EXPECT_TRUE(k.attention->tensor_cores);
  EXPECT_EQ(k.attention->block_m, 64);
  EXPECT_LE(k.launch.dynamic_shared_bytes, ampere.shared_memory_optin);
}

#if KILN_HAVE_CUDA
// Every candidate of every kind compiles with NVRTC, with no warning.
TEST(ScheduleCandidates, EveryCandidateCompilesWithNvrtc) {
  Target t = cuda_target("sm_90", 132);
  std::string module(cuda_prelude());
  int n = 0;
  for (const std::string& kir : {fmt::format(kPointwise, 1 << 20), fmt::format(kSoftmax, 4096, 1024), fmt::format(kSoftmax, 1024, 4096),
                                 fmt::format(kRmsBackward, 512, 4096), fmt::format(kAttention, 300, 64), fmt::format(kAttention, 300, 128)})
    for (const Kernel& k : lowered_kernels(kir, t))
      for (ScheduleCandidate& c : schedule_candidates(k, t)) {
        c.kernel.name = fmt::format("c{}", n++);
        module += "\n" + emit_cuda_kernel(c.kernel);
      }
  runtime::cuda::NvrtcOptions o;
  o.use_cache = false;
  o.arch = "sm_90";
  runtime::cuda::NvrtcOutput out;
  ASSERT_NO_THROW(out = runtime::cuda::compile_cuda(module, "candidates", o));
  EXPECT_FALSE(has(out.log, "warning")) << out.log;
  EXPECT_GE(n, 15);
}

constexpr const char* kAttentionPasses = R"(
graph attention_passes(%q: {0}[2,300,{1}], %k: {0}[2,200,{1}], %v: {0}[2,200,{1}], %dy: {0}[2,300,{1}]) {{
  %y, %lse = flash_attention(%q, %k, %v, is_causal=true) : {0}[2,300,{1}], {2}[2,300]
  %dq, %dk, %dv = flash_attention_backward(%dy, %q, %k, %v, %lse, %lse, is_causal=true) : {0}[2,300,{1}], {0}[2,200,{1}], {0}[2,200,{1}]
  return (%y, %dq, %dk, %dv)
}})";

// The FFMA attention passes (f32 and f64, and 16-bit storage where tensor cores are not
// taken: head 256, or a GPU before sm_80) compile for every architecture the backend meets:
// their tiles come by cp.async on sm_80 and later, by plain loads before.
TEST(ScheduleCandidates, FfmaAttentionCompilesWithNvrtcOnEveryArchitecture) {
  for (const char* arch : {"sm_75", "sm_80", "sm_90"}) {
    Target t = cuda_target(arch, 80);
    std::string module(cuda_prelude());
    int n = 0;
    for (const std::string& kir : {fmt::format(kAttentionPasses, "f32", 64, "f32"), fmt::format(kAttentionPasses, "f32", 40, "f32"),
                                   fmt::format(kAttentionPasses, "f64", 64, "f64"), fmt::format(kAttentionPasses, "bf16", 256, "f32")})
      for (const Kernel& lowered : lowered_kernels(kir, t)) {
        if (!lowered.attention) continue;
        std::vector<ScheduleCandidate> c = schedule_candidates(lowered, t);
        // The tiles' variants: 32 query rows, 32 keys, both (fewer where shrinking the tiles to
        // fit the shared memory, or a head past 128, makes two of them one).
        if (lowered.attention->dtype == DType::F32 && lowered.attention->E == 64 && std::string(arch) != "sm_75") {
          EXPECT_EQ(c.size(), 4u) << arch << " " << kir;
        }
        for (ScheduleCandidate& one : c) {
          EXPECT_FALSE(one.kernel.attention->tensor_cores) << arch << " " << kir;
          one.kernel.name = fmt::format("a{}", n++);
          module += "\n" + emit_cuda_kernel(one.kernel);
        }
      }
    EXPECT_GE(n, 24) << arch;
    runtime::cuda::NvrtcOptions o;
    o.use_cache = false;
    o.arch = arch;
    runtime::cuda::NvrtcOutput out;
    ASSERT_NO_THROW(out = runtime::cuda::compile_cuda(module, "ffma_attention", o)) << arch;
    EXPECT_FALSE(has(out.log, "warning")) << arch << ":\n" << out.log;
    if (out.ptx.empty()) continue;  // this NVRTC gives no PTX for a real architecture
    EXPECT_EQ(has(out.ptx, "cp.async"), std::string(arch) != "sm_75") << arch;
  }
}
#endif

}  // namespace
}  // namespace kiln::codegen
