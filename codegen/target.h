#pragma once
// A Target: what the lowering and the schedule step know about the machine a graph is
// compiled for (tinygrad's renderer limits, Inductor's per-device Scheduling). The lowering
// reads the few choices that shape loop nests (one flat loop per pointwise kernel on a GPU,
// column-tile widths); the schedule step (codegen/schedule.h) reads the rest to map each loop
// to threads, vector lanes, blocks, warps or lanes. Nothing here launches anything: a CUDA
// target can be described on a machine with no GPU (kiln compile --device cuda --arch sm_90).
#include <cstdint>
#include <string>

namespace kiln::codegen {

enum class TargetKind : uint8_t { Cpu, Cuda };

struct Target {
  TargetKind kind = TargetKind::Cpu;
  std::string name = "cpu";  // "cpu", "cuda sm_90"

  // ---- the lowering
  // Pointwise kernels: the trailing dims merge into one inner loop until it has this many
  // iterations; a tensor of at most `flat_elements` elements becomes one flat loop. A GPU
  // takes every pointwise kernel as one flat loop (the grid-stride loop is the parallelism).
  int64_t inner_min = 64;
  int64_t flat_elements = 65536;
  bool always_flat = false;
  // Column reductions (kept innermost dim): tiles of at most `column_tile_max` consecutive
  // kept points, narrow enough that `column_tiles_wanted` tiles exist when the shape allows.
  int64_t column_tile_max = 256;
  // A column reduction with at least this many kept points (0: never) is a thread per kept
  // point instead, its sums in registers, the reduced dims walked in order (the same sums):
  // cuda_target asks for 1024 an SM, where the tiles' sums in memory ran at a third of the
  // bandwidth (GQA's dK/dV sums, bench/NOTES.md stop 42); the CPU's vectorized tiles stay.
  int64_t column_thread_min_points = 0;
  int64_t column_tiles_wanted = 16;

  // Arena buffers start at multiples of this many bytes (a GPU's 16-byte vector accesses and
  // cuBLASLt want 256; the CPU's cache lines 64).
  int64_t buffer_alignment = 64;

  // Matmul epilogues: a bias add and a ReLU or GELU (tanh) after a matmul are applied by the
  // GEMM itself (cuBLASLt) instead of a kernel of their own. OpenBLAS has none.
  bool matmul_epilogues = false;

  // Fusion recomputes a cheap pointwise cone from a reduction's small results (a row's mean
  // and rstd) in each group that reads it, instead of materializing the cone's full-size
  // value (a layer norm backward's x̂). Measured (bench/NOTES.md, stop 27): the H100's layer
  // norm backward 1.134 -> 0.500 ms; this 2-core CPU's 25.0-27.9 -> 28.0-29.8 ms alone, but it
  // is what lets the column partials fold the rows in (stop 30), so on there too.
  bool recompute_from_statistics = false;

  // A column reduction computes the row reductions it reads in chunks of rows, its sums as
  // per-chunk partials (passes/fusion/column_partials.h): a norm's backward in one pass over
  // x and dy. A GPU's blocks hold a chunk's partials in registers (H200: layer-norm backward
  // 0.396 -> 0.263 ms); the CPU's chunks keep theirs in cache (with recompute_from_statistics:
  // 26.8 -> 20.3 ms on this VM's [2048,4096]).
  bool column_partials_in_rows = false;

  // Online softmax: a softmax's max and sum of exp in one pass over the row. Welford: a mean
  // and the sum of squared deviations from it (a layer norm's statistics) in one pass. Both
  // trade a pass over the row for more arithmetic per element, which pays only where the row
  // no longer comes back from cache: rows of at least `one_pass_min_row` elements. Measured on
  // an H100 (bench/NOTES.md): softmax rows of 1024 run 6% slower online, cross-entropy rows of
  // 32000 15% faster; Welford on layer-norm rows of 4096 ran 6% slower. Since rows are held on
  // chip (read once however many passes), CUDA starts them past the longest row it holds
  // (cuda_target). The CPU keeps two passes (its vectorized exp would run twice).
  // Kernels whose every result is f16 or bf16 compute f32 exp and division with the hardware's
  // approximations (ex2.approx, rcp.approx: a few ulp of f32, far below the 16-bit rounding that
  // follows), as Triton's exp and division do for torch.compile; f32 and f64 results keep the
  // library's accurate forms. CUDA: a bf16 softmax of rows of 1024 was bound by its two exps and
  // one IEEE division per element (49% of copy on the H200; bench/NOTES.md, stop 31).
  bool approx_math_for_16bit_results = false;

  bool online_softmax = false;
  bool welford = false;
  int64_t one_pass_min_row = 8192;

  // ---- the CPU schedule
  int64_t parallel_work = 32768;  // element-iterations below which a loop stays on the calling thread
  int64_t flat_chunk_min = 1024;  // the fewest iterations of a flat loop's chunk on the pool

  // ---- the CUDA schedule
  std::string arch = "sm_90";     // what NVRTC compiles for
  int num_sms = 132;
  int warp_size = 32;
  int max_threads_per_block = 1024;
  int64_t shared_memory_per_block = 48 * 1024;
  int64_t shared_memory_optin = 227 * 1024;  // with cuFuncSetAttribute (attention's tiles); read off the device
  int pointwise_block = 256;      // threads per block of a grid-stride loop
  // Threads per block of a block-per-row reduction (a row held in registers grows it until what
  // each thread holds fits). 256 since stop 42: with full grids the f32 layer norm over
  // [16384,4096] ran 0.134 ms at 256, 0.138 at 512 (the tuner's times, H200).
  int reduction_block = 256;
  int warp_rows_per_block = 8;    // warps (rows) per block of a warp-per-row reduction
  int64_t warp_row_max = 1024;    // rows up to this long get a warp; longer ones a block
  int64_t thread_row_max = 16;    // rows up to this long get one thread each
  // A loop over blocks or threads (grid-stride, rows, chunks): its grid at most num_sms * this
  // many blocks, each striding over the rest (a persistent grid, capped at launch at what the
  // SMs hold); 0: a full grid, each block one step of its loop, as Triton launches. The tuner's
  // times on the H200 (bench/NOTES.md, stop 42): softmax f32 0.137 -> 0.130 ms, bf16 0.074 ->
  // 0.068, layer_norm f32 0.142 -> 0.134 (with 256-thread rows), bf16 0.076 -> 0.073; the
  // pointwise row the same either way.
  int blocks_per_sm = 0;
  // Iterations of a vectorized grid-stride loop a thread runs at once, their loads issued
  // together (Stmt::unroll). 1: one at a time. (H200: gelu(x*w+b)*sigmoid(x) over
  // [16384,4096] at stop 38 0.170 ms at 1, 0.160 at 2; at stop 42, with div.full for the
  // sigmoid and 40 registers, 0.147 at 1, 0.157 at 2 and 4: the tuner keeps 2 and 4 as
  // candidates.)
  int pointwise_unroll = 1;
  // The blocks an SM should hold at once, asked of the compiler (__launch_bounds__'s second
  // argument: registers capped at 65536 / (this * block)); 0 asks nothing, the compiler spends
  // registers as it likes and the occupancy follows. A tuning candidate (ncu, stop 40: the f32
  // layer norm ran 53 registers, 2 blocks of 512 an SM; Triton's 32 and 4).
  int min_blocks_per_sm = 0;
  // A tiled loop's (transposed reads) grid: num_sms * this many blocks. 8 blocks of 256 fill an
  // SM's 2048 threads; with 4 the tuner beat the default on every tiled kernel of the benchmark
  // rows (block 512 or 8-16 blocks an SM: bench/NOTES.md, stop 31).
  int tile_blocks_per_sm = 8;
  // Rows held in registers (codegen/schedule.cpp's rows_to_hold): the most bytes of held rows
  // one thread holds before its row's block grows; a block walking a chunk of rows (column
  // partials) is alone on its SM whatever its registers, and may hold more.
  int64_t held_bytes_per_thread = 128;
  int64_t chunk_held_bytes_per_thread = 256;
  // ...and the fewest: a row's block shrinks (to 128 threads) until each thread holds this many.
  int64_t held_min_bytes_per_thread = 32;
  // A block's or a warp's row loop loads its next row's held vectors while this row computes
  // (its reductions wait on barriers and shuffles, with no load in flight otherwise), where the
  // rows it holds take at most this many bytes a thread: the copy in flight doubles them. 0: never.
  // (H200, stop 33: f32 layer norm, 32 bytes a thread, 0.147 -> 0.142 ms; a bf16 softmax's warp
  // rows, 64 bytes, 3% slower with it: its registers cost a block an SM. Stop 40, the tuner's
  // times in one run: f32 layer norm 0.1402 with it, 0.1408 without; bf16 layer norm 0.0845
  // with it, 0.0756 without. Off by default; 32 and 256 are tuning candidates.)
  int64_t row_prefetch_bytes_per_thread = 0;
  // The tensor-core attention forward's query rows a warp: 32 (two 16-row blocks that share each
  // k and v fragment read from shared memory, FlashAttention-2's 128-row tiles) or 16.
  int attention_rows_per_warp = 32;
  int attention_key_tile = 64;  // keys (and values) of each tile the forward walks: 32 or 64
  // FFMA attention tiles (f32, f64, and 16-bit where tensor cores are not taken): the query rows
  // and keys of a tile, 16, 32 or 64 (a thread holds rows/8 x keys/16 scores, and the dK/dV pass
  // keys/8 x head/16 of each gradient). Heads past 128 take at most 32 rows; any tile shrinks
  // until its shared memory fits.
  int attention_ffma_rows = 64;
  int attention_ffma_keys = 64;

  bool is_gpu() const { return kind == TargetKind::Cuda; }
  // Thread-block clusters and distributed shared memory: sm_90 and later.
  bool supports_clusters() const;
};

// The host CPU (the values the CPU backend was tuned with; see bench/NOTES.md).
Target cpu_target();
// A CUDA GPU of architecture `arch` ("sm_90") with `num_sms` multiprocessors (the H100's 132
// by default; the CUDA backend reads the real count off the device when there is one).
Target cuda_target(const std::string& arch = "sm_90", int num_sms = 132);

}  // namespace kiln::codegen
