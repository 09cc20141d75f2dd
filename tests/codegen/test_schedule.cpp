// The schedule step (codegen/schedule.h) on hand-built kernels: which map each loop gets on the
// CPU and on a GPU by row length, the combines it inserts; and verify(Kernel) rejecting kernels
// that would race or use what they never declared.
#include <gtest/gtest.h>

#include "codegen/kernel_ir.h"
#include "codegen/cuda_emitter.h"
#include "codegen/schedule.h"
#include "ir/error.h"
#include "tests/support/support.h"

namespace kiln::codegen {
namespace {

using kiln::testing::has;

Buffer buf(const std::string& name, int64_t numel, BufferRole role) {
  Buffer b;
  b.name = name;
  b.numel = numel;
  b.role = role;
  return b;
}

// out[row] = sum over r of in[row * len + r], rows x len.
Kernel row_sum(int64_t rows, int64_t len) {
  Kernel k;
  k.name = "k0";
  k.buffers = {buf("b0", rows, BufferRole::Output), buf("b1", rows * len, BufferRole::Input)};
  ExprPtr row = var("row", 0, rows - 1), r = var("r", 0, len - 1);
  k.body = block({for_loop("row", rows, LoopKind::Parallel,
                           {decl_acc("acc", DType::F32, CombineOp::Sum),
                            for_loop("r", len, LoopKind::Reduction,
                                     {accumulate("acc", CombineOp::Sum, load("b1", DType::F32, add(mul(row, imm(len)), r)))}),
                            store("b0", row, value_var("acc", DType::F32))})});
  return k;
}

Kernel pointwise(int64_t n) {
  Kernel k;
  k.name = "k0";
  k.buffers = {buf("b0", n, BufferRole::Output), buf("b1", n, BufferRole::Input)};
  ExprPtr i = var("i", 0, n - 1);
  k.body = block({for_loop("i", n, LoopKind::Parallel, {store("b0", i, call("exp", DType::F32, {load("b1", DType::F32, i)}))})});
  return k;
}

std::string scheduled(Kernel k, const Target& t) {
  schedule(k, t);
  return print_kernel(k);
}

TEST(Schedule, PointwiseIsAGridStrideLoopOnAGpuAndChunksOnTheCpu) {
  std::string gpu = scheduled(pointwise(1 << 20), cuda_target());
  EXPECT_TRUE(has(gpu, "parallel for i in 0..1048576 @gpu_grid_stride")) << gpu;
  // 2^20 elements in 4-element vectors: 2^18 iterations of work, 1024 blocks of 256.
  EXPECT_TRUE(has(gpu, "launch grid 1024 x block 256")) << gpu;
  EXPECT_TRUE(has(gpu, "i32 indices")) << gpu;
  // 2^16 elements: 16384 iterations; blocks of 256 would leave 68 of the 132 SMs idle.
  std::string small = scheduled(pointwise(1 << 16), cuda_target());
  EXPECT_TRUE(has(small, "launch grid 128 x block 128")) << small;
  // A grid-stride loop is correct at any grid: a persistent one (blocks_per_sm N) may launch
  // fewer blocks (what the SMs hold at once for the compiled code), and kernels.txt says so; the
  // default grid covers the work.
  EXPECT_FALSE(has(gpu, "the grid at most what the SMs hold at once")) << gpu;
  Target persistent = cuda_target();
  persistent.blocks_per_sm = 8;
  std::string capped = scheduled(pointwise(1 << 24), persistent);
  EXPECT_TRUE(has(capped, "the grid at most what the SMs hold at once")) << capped;
  EXPECT_TRUE(has(capped, "launch grid 1056 x block 256")) << capped;
  EXPECT_FALSE(has(scheduled(pointwise(1 << 20), cpu_target()), "the grid at most"));
  std::string cpu = scheduled(pointwise(1 << 20), cpu_target());
  EXPECT_TRUE(has(cpu, "@cpu_threads(grain 32768)")) << cpu;
  EXPECT_TRUE(has(scheduled(pointwise(100), cpu_target()), "@cpu_vector"));
}

// Target::min_blocks_per_sm asks the compiler to fit that many blocks an SM (the tuner's
// candidate): the launch records it, the record says it, the emitter prints it; a block count
// the SM cannot hold is not asked.
TEST(Schedule, MinBlocksPerSmReachesLaunchBounds) {
  Target t = cuda_target();
  t.min_blocks_per_sm = 4;
  Kernel k = pointwise(1 << 20);
  schedule(k, t);
  EXPECT_EQ(k.launch.min_blocks_per_sm, 4);
  EXPECT_TRUE(has(print_kernel(k), "registers capped for 4 blocks an SM")) << print_kernel(k);
  EXPECT_TRUE(has(emit_cuda_kernel(k), "__launch_bounds__(256, 4)")) << emit_cuda_kernel(k);
  t.min_blocks_per_sm = 16;  // 16 blocks of 256 threads: twice what an SM holds
  Kernel too_many = pointwise(1 << 20);
  schedule(too_many, t);
  EXPECT_EQ(too_many.launch.min_blocks_per_sm, 0);
  EXPECT_TRUE(has(emit_cuda_kernel(too_many), "__launch_bounds__(256)")) << emit_cuda_kernel(too_many);
}

TEST(Schedule, RowReductionsMapByRowLength) {
  // Short rows: a thread walks each.
  std::string t = scheduled(row_sum(4096, 8), cuda_target());
  EXPECT_TRUE(has(t, "parallel for row in 0..4096 @gpu_grid_stride")) << t;
  EXPECT_TRUE(has(t, "reduction for r in 0..8 @serial")) << t;
  EXPECT_FALSE(has(t, "combine")) << t;
  // Medium rows: a warp each, lanes combine through shuffles.
  std::string w = scheduled(row_sum(4096, 500), cuda_target());
  EXPECT_TRUE(has(w, "@gpu_warps") && has(w, "@gpu_lanes") && has(w, "combine acc <sum> across warp")) << w;
  // Long rows: a block each, threads combine through shared memory.
  std::string b = scheduled(row_sum(64, 5000), cuda_target());
  EXPECT_TRUE(has(b, "@gpu_blocks") && has(b, "@gpu_threads") && has(b, "combine acc <sum> across block")) << b;
  EXPECT_TRUE(has(b, "block 256")) << b;
  // The CPU: rows to the pool, each row's loop plain.
  std::string c = scheduled(row_sum(64, 5000), cpu_target());
  EXPECT_TRUE(has(c, "@cpu_threads") && has(c, "reduction for r in 0..5000 @serial")) << c;
}

// out[row, r] = in[row, r] - max over r of in[row, r]: two passes over one input row, as a
// softmax or a layer norm reads it.
Kernel two_pass(int64_t rows, int64_t len) {
  Kernel k;
  k.name = "k0";
  k.buffers = {buf("b0", rows * len, BufferRole::Output), buf("b1", rows * len, BufferRole::Input)};
  ExprPtr row = var("row", 0, rows - 1), r = var("r", 0, len - 1), at = add(mul(row, imm(len)), r);
  k.body = block({for_loop("row", rows, LoopKind::Parallel,
                           {decl_acc("m", DType::F32, CombineOp::Max),
                            for_loop("r", len, LoopKind::Reduction, {accumulate("m", CombineOp::Max, load("b1", DType::F32, at))}),
                            for_loop("r", len, LoopKind::Parallel,
                                     {store("b0", at, call("sub", DType::F32, {load("b1", DType::F32, at), value_var("m", DType::F32)}))})})});
  return k;
}

// The schedule record says how each kernel maps and why; a row read twice is held in
// registers where 32 of its f32 values per thread hold it (a block per row grows to 1024
// threads for it), and stays in memory where they do not.
TEST(Schedule, RecordsItsMappingAndHoldsRowsThatFitInRegisters) {
  Kernel pw = pointwise(1 << 20);
  schedule(pw, cuda_target());
  EXPECT_EQ(pw.schedule.mapping, "grid-stride");
  EXPECT_EQ(pw.schedule.vector, 4);
  EXPECT_TRUE(has(print_kernel(pw), "# schedule: grid-stride, block 256, 4-element vectors")) << print_kernel(pw);

  Kernel warp = two_pass(64, 1024);
  schedule(warp, cuda_target());
  EXPECT_EQ(warp.schedule.mapping, "warp per row");
  EXPECT_EQ(warp.schedule.rows_per_block, 8);
  EXPECT_EQ(warp.schedule.held, std::vector<std::string>{"b1"});
  EXPECT_EQ(warp.schedule.held_elements, 32);
  EXPECT_TRUE(has(print_kernel(warp), "@gpu_warps hold(b1: 8 vectors per thread)")) << print_kernel(warp);
  EXPECT_TRUE(has(print_kernel(warp), "row of b1 held in registers (32 elements per thread)")) << print_kernel(warp);

  Kernel block = two_pass(64, 4096);
  schedule(block, cuda_target());
  EXPECT_EQ(block.schedule.mapping, "block per row");
  EXPECT_EQ(block.launch.block, 256);
  EXPECT_EQ(block.schedule.held_elements, 16);

  Kernel grown = two_pass(64, 32000);
  schedule(grown, cuda_target());
  EXPECT_EQ(grown.launch.block, 1024) << "32000 / 256 threads is 125 values a thread; at 1024, 32";
  EXPECT_EQ(grown.schedule.threads_per_row, 1024);
  EXPECT_EQ(grown.schedule.held_elements, 32);

  // 50 a thread at 1024 threads is too many registers. On sm_90: a cluster of blocks shares the
  // row, the smallest blocks that hold it in registers (8 of 256 threads: 25 words a thread),
  // as many clusters as the SMs run at once.
  Kernel odd = two_pass(200, 50257);
  schedule(odd, cuda_target());
  EXPECT_EQ(odd.schedule.mapping, "cluster per row");
  EXPECT_EQ(odd.schedule.held, std::vector<std::string>{"b1"});
  EXPECT_FALSE(odd.schedule.held_shared);
  EXPECT_EQ(odd.schedule.held_elements, 25);
  EXPECT_EQ(odd.schedule.cluster, 8);
  EXPECT_EQ(odd.schedule.threads_per_row, 2048);
  EXPECT_EQ(odd.launch.block, 256);
  EXPECT_EQ(odd.launch.cluster, 8);
  EXPECT_EQ(odd.launch.grid, 132 * 8) << "132 SMs of 8 blocks of 256 threads: 132 clusters of 8";
  EXPECT_TRUE(has(print_kernel(odd), "cluster per row, 2048 threads per row in a cluster of 8 blocks")) << print_kernel(odd);
  EXPECT_TRUE(has(print_kernel(odd), "hold(b1: 25 vectors per thread) cluster(8 blocks per row)")) << print_kernel(odd);
  // A block a row by default (full grids); blocks that stride over their rows (blocks_per_sm N)
  // take any grid; a cluster's grid is whole clusters placed together, launched as scheduled.
  EXPECT_FALSE(block.launch.persistent);
  EXPECT_EQ(block.launch.grid, 64);
  Target persistent = cuda_target();
  persistent.blocks_per_sm = 8;
  Kernel strided = two_pass(64, 32000);
  schedule(strided, persistent);
  EXPECT_TRUE(strided.launch.persistent);
  EXPECT_FALSE(odd.launch.persistent);
  // 100000 words: clusters of 8 blocks of 512.
  Kernel longer = two_pass(64, 100000);
  schedule(longer, cuda_target());
  EXPECT_EQ(longer.launch.cluster, 8);
  EXPECT_EQ(longer.launch.block, 512);
  EXPECT_EQ(longer.launch.grid, 64 * 8) << "64 rows: a cluster each";
  // Before sm_90 (no clusters): the block's own shared memory (163 KB on an A100), each
  // thread's 40 words in slots of its own (the row is odd: one element per access), one block
  // per SM.
  Kernel ampere = two_pass(200, 40001);
  schedule(ampere, cuda_target("sm_80", 108));
  EXPECT_EQ(ampere.schedule.held, std::vector<std::string>{"b1"});
  EXPECT_TRUE(ampere.schedule.held_shared);
  EXPECT_EQ(ampere.launch.block, 1024);
  EXPECT_EQ(ampere.launch.cluster, 1);
  EXPECT_EQ(ampere.schedule.vector, 1);
  EXPECT_EQ(ampere.launch.dynamic_shared_bytes, 40 * 1024 * 4);
  EXPECT_EQ(ampere.launch.grid, 108) << "as many blocks as the SMs hold at once";
  EXPECT_TRUE(has(print_kernel(ampere), "row of b1 held in shared memory (40 elements per thread)")) << print_kernel(ampere);
  // Longer than both (300000 words: 37 a thread in a cluster of 8 x 1024; 1.2 MB): read twice.
  for (const char* arch : {"sm_90", "sm_80"}) {
    Kernel too_long = two_pass(64, 300000);
    schedule(too_long, cuda_target(arch));
    EXPECT_TRUE(too_long.schedule.held.empty()) << arch;
    EXPECT_EQ(too_long.launch.block, 256) << arch;
    EXPECT_EQ(too_long.launch.cluster, 1) << arch;
    EXPECT_EQ(too_long.launch.dynamic_shared_bytes, 0) << arch;
  }

  // The CPU's record: its rows to the pool in chunks, or a small kernel on the calling thread.
  Kernel cpu = two_pass(64, 1024);
  schedule(cpu, cpu_target());
  EXPECT_TRUE(cpu.schedule.held.empty());
  EXPECT_EQ(cpu.schedule.mapping, "thread pool");
  EXPECT_TRUE(has(cpu.schedule.why, "64 iterations of 2049 element-iterations each, in chunks of at least 15")) << cpu.schedule.why;
  Kernel small = pointwise(100);
  schedule(small, cpu_target());
  EXPECT_EQ(small.schedule.mapping, "calling thread");
  EXPECT_TRUE(has(print_kernel(small), "# schedule: calling thread (")) << print_kernel(small);
}

TEST(Schedule, HugeTensorsKeep64BitIndices) {
  Kernel k = pointwise(int64_t(3) << 30);
  schedule(k, cuda_target());
  EXPECT_EQ(k.index_bits, 64);
  Kernel s = pointwise(1000);
  schedule(s, cuda_target());
  EXPECT_EQ(s.index_bits, 32);
}

// y[i] = x[c * rows + r] * w[c] over [rows, cols] (i = r * cols + c): x read through its
// transpose, w broadcast down the rows. `guarded`: x's load sits in a select's branch;
// `in_place`: the kernel also stores to x.
Kernel transposed(int64_t rows, int64_t cols, bool guarded = false, bool in_place = false) {
  Kernel k;
  k.name = "k0";
  int64_t n = rows * cols;
  k.buffers = {buf("b0", n, BufferRole::Output), buf("b1", n, in_place ? BufferRole::Output : BufferRole::Input),
               buf("b2", cols, BufferRole::Input)};
  ExprPtr i = var("i", 0, n - 1);
  ExprPtr xt = load("b1", DType::F32, add(mul(mod(i, imm(cols)), imm(rows)), floordiv(i, imm(cols))));
  ExprPtr w = load("b2", DType::F32, mod(i, imm(cols)));
  if (guarded) xt = select(load("b2", DType::F32, mod(i, imm(cols))), xt, imm(DType::F32, 0));
  std::vector<StmtPtr> body{let("xw", call("mul", DType::F32, {xt, w})), store("b0", i, value_var("xw", DType::F32))};
  if (in_place) body.push_back(store("b1", i, imm(DType::F32, 0)));
  k.body = block({for_loop("i", n, LoopKind::Parallel, std::move(body))});
  return k;
}

TEST(Schedule, TransposedReadsRunInSharedMemoryTiles) {
  Kernel k = transposed(1024, 4096);
  schedule(k, cuda_target());
  std::string text = print_kernel(k);
  EXPECT_TRUE(has(text, "@gpu_tiles as [1024, 4096] in 64x64 tiles, through shared memory: b1[(i % 4096)*1024 + i / 4096]")) << text;
  EXPECT_EQ(k.schedule.mapping, "block per tile");
  EXPECT_TRUE(has(k.schedule.why, "b1 read down the output's columns")) << k.schedule.why;
  EXPECT_TRUE(has(k.schedule.tiles, "tiles of 64 x 64 of the loop as [1024, 4096], 16.2 KB shared")) << k.schedule.tiles;
  EXPECT_EQ(k.launch.block, 256);
  EXPECT_EQ(k.launch.shared_bytes, 64 * 65 * 4);
  EXPECT_EQ(k.launch.grid, 1024) << "a block per tile: 8 blocks an SM would be 1056";
  Kernel big = transposed(4096, 4096);
  schedule(big, cuda_target());
  EXPECT_EQ(big.launch.grid, 132 * 8) << "8 blocks an SM, each walking several of the 4096 tiles";

  // Odd sizes tile too (the emitter guards the edges); the plan covers the loop exactly. A
  // view under 64 on a side takes the small tiles.
  Kernel odd = transposed(37, 45);
  schedule(odd, cuda_target());
  EXPECT_TRUE(has(print_kernel(odd), "@gpu_tiles as [37, 45] in 32x32 tiles")) << print_kernel(odd);
  Kernel flat = transposed(40, 4096);
  schedule(flat, cuda_target());
  EXPECT_TRUE(has(print_kernel(flat), "@gpu_tiles as [40, 4096] in 32x32 tiles")) << print_kernel(flat);

  // Near misses stay grid-stride loops: a load under a select's branch (the tile's first phase
  // would run it unconditionally), a buffer the loop also writes, rows too short to fill a
  // warp's tile (16 columns at least), and the CPU.
  for (Kernel miss : {transposed(1024, 4096, /*guarded=*/true), transposed(1024, 4096, false, /*in_place=*/true), transposed(4096, 3)}) {
    schedule(miss, cuda_target());
    EXPECT_EQ(miss.schedule.mapping, "grid-stride") << print_kernel(miss);
  }
  Kernel cpu = transposed(1024, 4096);
  schedule(cpu, cpu_target());
  EXPECT_EQ(cpu.schedule.mapping, "thread pool");
  // A contiguous loop keeps its vectors.
  Kernel pw = pointwise(1 << 20);
  schedule(pw, cuda_target());
  EXPECT_EQ(pw.schedule.mapping, "grid-stride");
}

std::string verify_error(const Kernel& k) {
  try {
    verify(k);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(VerifyKernel, RejectsRacesAndUndeclaredNames) {
  EXPECT_EQ(verify_error(row_sum(8, 8)), "");
  // An accumulator declared outside a parallel loop, accumulated in it: a race.
  Kernel race = row_sum(8, 8);
  race.body = block({decl_acc("acc", DType::F32, CombineOp::Sum),
                     for_loop("r", 8, LoopKind::Parallel, {accumulate("acc", CombineOp::Sum, load("b1", DType::F32, var("r", 0, 7)))})});
  EXPECT_TRUE(has(verify_error(race), "accumulator 'acc' declared outside a parallel loop")) << verify_error(race);
  // A variable nobody declared.
  Kernel undeclared = pointwise(8);
  undeclared.body = block({store("b0", var("q", 0, 7), imm(DType::F32, 1))});
  EXPECT_TRUE(has(verify_error(undeclared), "undeclared variable 'q'"));
  // A store to an input.
  Kernel to_input = pointwise(8);
  to_input.body = block({store("b1", imm(0), imm(DType::F32, 1))});
  EXPECT_TRUE(has(verify_error(to_input), "store to input buffer 'b1'"));
  // Threads outside a block loop; a combine inside a thread loop; an ordered loop on threads.
  Kernel k = row_sum(64, 5000);
  schedule(k, cuda_target());
  auto with_top_map = [&](LoopMap m) {
    Kernel c = k;
    c.body = block({with_map(c.body->body[0], m)});
    return c;
  };
  EXPECT_TRUE(has(verify_error(with_top_map(LoopMap::GpuThreads)), "outside a block-mapped loop"));
  Kernel combine_inside = row_sum(64, 64);
  combine_inside.body = block({with_map(for_loop("row", 64, LoopKind::Parallel,
                                                 {decl_acc("acc", DType::F32, CombineOp::Sum),
                                                  with_map(for_loop("r", 64, LoopKind::Reduction,
                                                                    {combine_across("acc", DType::F32, CombineOp::Sum, LoopMap::GpuThreads)}),
                                                           LoopMap::GpuThreads)}),
                                        LoopMap::GpuBlocks)});
  EXPECT_TRUE(has(verify_error(combine_inside), "inside a thread-mapped loop")) << verify_error(combine_inside);
  Kernel ordered = pointwise(8);
  ordered.body = block({with_map(for_loop("i", 8, LoopKind::Ordered, {store("b0", var("i", 0, 7), imm(DType::F32, 1))}),
                                 LoopMap::GpuGridStride)});
  EXPECT_TRUE(has(verify_error(ordered), "an ordered loop spread over GPU threads"));
  // A float atomic add is refused (not deterministic run to run).
  Kernel atomic = pointwise(8);
  atomic.body = block({atomic_add("b0", imm(0), imm(DType::F32, 1))});
  EXPECT_TRUE(has(verify_error(atomic), "atomic add of a float"));
  // A tiled loop's plan covers its extent and stages loads of its own buffers.
  Kernel tiled = transposed(64, 64);
  schedule(tiled, cuda_target());
  ASSERT_EQ(tiled.schedule.mapping, "block per tile");
  auto loop = std::make_shared<Stmt>(*tiled.body->body[0]);
  loop->tiles.rows = 63;
  Kernel uncovered = tiled;
  uncovered.body = block({loop});
  EXPECT_TRUE(has(verify_error(uncovered), "a tiled loop whose plan does not cover its extent")) << verify_error(uncovered);
}

// out[row, r] = in[row, r] / divisor, where the divisor is the row's sum (the same across the
// row's loop), the running sum itself (it changes in the loop), a load, or a constant.
Kernel divide_rows(int64_t rows, int64_t len, const std::string& divisor) {
  Kernel k;
  k.name = "k0";
  k.buffers = {buf("b0", rows * len, BufferRole::Output), buf("b1", rows * len, BufferRole::Input),
               buf("b2", rows, BufferRole::Input)};
  ExprPtr row = var("row", 0, rows - 1), r = var("r", 0, len - 1), r2 = var("r2", 0, len - 1);
  ExprPtr at = add(mul(row, imm(len)), r2);
  ExprPtr d = divisor == "sum"        ? value_var("total", DType::F32)
              : divisor == "running" ? value_var("acc", DType::F32)
              : divisor == "load"    ? load("b2", DType::F32, row)
                                     : imm(DType::F32, 3.0);
  std::vector<StmtPtr> per_row{decl_acc("acc", DType::F32, CombineOp::Sum),
                               for_loop("r", len, LoopKind::Reduction,
                                        {accumulate("acc", CombineOp::Sum, load("b1", DType::F32, add(mul(row, imm(len)), r)))})};
  if (divisor == "running") per_row.pop_back();  // the divisor changes inside the element loop
  per_row.push_back(let("total", value_var("acc", DType::F32)));
  std::vector<StmtPtr> element;
  if (divisor == "running") element.push_back(accumulate("acc", CombineOp::Sum, load("b1", DType::F32, at)));
  element.push_back(store("b0", at, call("div", DType::F32, {load("b1", DType::F32, at), d})));
  per_row.push_back(for_loop("r2", len, divisor == "running" ? LoopKind::Ordered : LoopKind::Parallel, element));
  k.body = block({for_loop("row", rows, LoopKind::Parallel, per_row)});
  return k;
}

TEST(Schedule, ADivisionByARowInvariantBecomesAReciprocalTakenOnceARow) {
  for (const Target& t : {cpu_target(), cuda_target()}) {
    SCOPED_TRACE(t.name);
    std::string k = scheduled(divide_rows(64, 5000, "sum"), t);
    // The reciprocal and its scale are let-bound before the element loop, which multiplies.
    size_t rcp = k.find("total_rcp: f32 = rcp_scaled(total)"), loop = k.find("for r2");
    ASSERT_NE(rcp, std::string::npos) << k;
    ASSERT_NE(loop, std::string::npos) << k;
    EXPECT_LT(rcp, loop) << k;
    EXPECT_FALSE(has(k.substr(loop), "div(")) << k;
    // Not hoisted: a divisor the loop changes, one read from memory, a constant.
    for (const char* kept : {"running", "load", "constant"})
      EXPECT_TRUE(has(scheduled(divide_rows(64, 5000, kept), t), "div(")) << kept;
  }
}

}  // namespace
}  // namespace kiln::codegen
