#pragma once
// The kernel IR: a loop-level program shared by the CPU (C++) emitter and the CUDA emitter.
// Every node kind is listed once, in the X-macros below; nodes are uniform records (a kind,
// a dtype, child lists and a few scalars), as tinygrad's UOps, so one generic walker
// (visit / rewrite) serves every pass instead of per-kind tree walks.
//
// Expressions are pure: int64 index arithmetic (vars, constants, + - *, floordiv, mod,
// min, max) and value math (loads, constants, casts, named math calls, select) share one
// node type, so an index may contain a load (a gather) and a value may contain an index.
// Statements are loops, lets, stores, reduction accumulators, blocks, and what a GPU needs:
// a combine of accumulators across the threads of a block or warp, a barrier and an atomic
// add.
//
// Loops say two things. What the loop IS, which the lowering decides (LoopKind): parallel
// (iterations independent), reduction (iterations only combine into accumulators, in any
// grouping) or ordered (iterations depend on each other through memory and run in order).
// And how it MAPS to the machine, which the per-target schedule step decides
// (codegen/schedule.h) and the emitters obey (LoopMap): on the CPU a parallel loop goes to
// the thread pool or becomes a contiguous loop for clang's vectorizer; on CUDA it goes to
// the grid (blocks, warps, or a grid-stride loop) and an inner loop to the threads of a
// block or the lanes of a warp, a reduction loop there being followed by a CombineAcross.
//
// Value dtypes are semantic: an f16 load has dtype f16 even though emitters compute in f32;
// Cast(f16, x) means "round x to f16". Integer index expressions are i64 and, by
// construction of the lowering, never negative, so floordiv and mod are C's / and %.
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace kiln::codegen {

// X(Enum, "text")
#define KILN_KIR_EXPRS(X)   \
  X(Var, "var")             \
  X(IntImm, "int")          \
  X(FloatImm, "float")      \
  X(Add, "+")               \
  X(Sub, "-")               \
  X(Mul, "*")               \
  X(FloorDiv, "floordiv")   \
  X(Mod, "mod")             \
  X(Min, "min")             \
  X(Max, "max")             \
  X(Load, "load")           \
  X(Cast, "cast")           \
  X(Call, "call")           \
  X(Select, "select")

#define KILN_KIR_STMTS(X)     \
  X(Block, "block")           \
  X(For, "for")               \
  X(Let, "let")               \
  X(Store, "store")           \
  X(DeclAcc, "acc")           \
  X(Accumulate, "accumulate") \
  X(CombineAcross, "combine") \
  X(Barrier, "barrier")       \
  X(AtomicAdd, "atomic_add")

enum class ExprKind : uint8_t {
#define X(E, s) E,
  KILN_KIR_EXPRS(X)
#undef X
};
enum class StmtKind : uint8_t {
#define X(E, s) E,
  KILN_KIR_STMTS(X)
#undef X
};
std::string_view expr_kind_name(ExprKind k);
std::string_view stmt_kind_name(StmtKind k);

// What a loop is (set by the lowering).
enum class LoopKind : uint8_t {
  Parallel,   // independent iterations
  Reduction,  // iterations only Accumulate into accumulators declared outside the loop
  Ordered,    // iterations run in order, on one thread (a scatter's accumulation, memory-carried
              // partial sums, an accumulation whose order is fixed)
};
// How a loop runs (set by the schedule step; Unmapped until then).
enum class LoopMap : uint8_t {
  Unmapped,
  Serial,         // a plain loop on one thread
  CpuThreads,     // chunks of [0, extent) on the CPU thread pool (Stmt::grain iterations at least)
  CpuVector,      // a plain counted loop over contiguous indices, for clang's vectorizer
  GpuGridStride,  // one iteration per thread of the whole grid, grid-stride
  GpuBlocks,      // one iteration per block, block-stride (the block's threads share it)
  GpuWarps,       // one iteration per warp, warp-stride over the grid's warps
  GpuThreads,     // iterations spread over the threads of the block (inside GpuBlocks)
  GpuLanes,       // iterations spread over the lanes of the warp (inside GpuWarps)
  GpuTiles,       // a flat loop as [rows, cols] tiles, one per block, its transposed loads staged
                  // through shared memory (Stmt::tiles; codegen/tiling.h)
};
bool is_gpu_map(LoopMap m);
// SumExp is online softmax's accumulator (Milakov & Gimelshein): the running max `<name>_max`
// and the sum of exp(x - max) `<name>`, rescaled whenever the max grows, so one pass over a
// row gives both. Welford is the mean and variance's accumulator (Welford; Chan et al. to
// merge): the count `<name>_n`, the running mean `<name>_mean` and the sum of squared
// deviations from it `<name>` (M2), so one pass gives both statistics of a layer norm.
enum class CombineOp : uint8_t { Sum, Prod, Max, Min, Argmax, SumExp, Welford };
std::string_view loop_kind_name(LoopKind k);
std::string_view loop_map_name(LoopMap m);
std::string_view combine_op_name(CombineOp c);

struct Expr;
using ExprPtr = std::shared_ptr<const Expr>;

// One expression node. Which fields matter depends on the kind:
//   Var: name, [lo, hi] (the range the simplifier may assume); IntImm: i; FloatImm: f;
//   arithmetic: args (2); Load: name (buffer), args {index}; Cast: args {x}, dtype = target;
//   Call: name (a math op of codegen/pointwise_exprs.def or a prelude helper), args;
//   Select: args {cond, a, b}.
struct Expr {
  ExprKind kind = ExprKind::IntImm;
  DType dtype = DType::I64;
  std::vector<ExprPtr> args;
  int64_t i = 0;
  double f = 0;
  std::string name;
  int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
};

// Constructors (no simplification; see codegen/simplify.h).
ExprPtr var(const std::string& name, int64_t lo, int64_t hi);  // an i64 index var in [lo, hi]
ExprPtr value_var(const std::string& name, DType dt);         // a let or accumulator
ExprPtr imm(int64_t v);
ExprPtr imm(DType dt, double v);  // a constant of any dtype (ints exactly when integral)
ExprPtr add(ExprPtr a, ExprPtr b);
ExprPtr sub(ExprPtr a, ExprPtr b);
ExprPtr mul(ExprPtr a, ExprPtr b);
ExprPtr floordiv(ExprPtr a, ExprPtr b);
ExprPtr mod(ExprPtr a, ExprPtr b);
ExprPtr min(ExprPtr a, ExprPtr b);
ExprPtr max(ExprPtr a, ExprPtr b);
ExprPtr load(const std::string& buffer, DType dt, ExprPtr index);
ExprPtr cast(DType dt, ExprPtr x);  // x itself when it already has dtype dt
ExprPtr call(const std::string& fn, DType dt, std::vector<ExprPtr> args);
ExprPtr select(ExprPtr cond, ExprPtr a, ExprPtr b);
ExprPtr with_args(const Expr& e, std::vector<ExprPtr> args);  // a copy of e with new children

// How a loop mapped GpuTiles runs (codegen/tiling.h): its extent seen as [rows, cols]
// (i = r * cols + c), tile x tile blocks of it, and the loads read along r through shared memory.
struct TilePlan {
  int64_t rows = 0, cols = 0;
  int tile = 0;
  std::vector<ExprPtr> loads;
};

struct Stmt;
using StmtPtr = std::shared_ptr<const Stmt>;

// One statement. For: name (loop var), extent, loop, map, grain, body, comment (the graph
// nodes it computes). Let: name, dtype, exprs {value}. Store: name (buffer), exprs {index,
// value}. DeclAcc: name, dtype, combine (starts at the combine op's identity; argmax also
// declares `<name>_idx`, sumexp `<name>_max`, welford `<name>_mean` and `<name>_n`). Accumulate: name, combine, exprs {value} (argmax: {value,
// position}). Block: body.
// GPU only (the CUDA schedule inserts them): CombineAcross: name (an accumulator), combine,
// dtype, map (GpuThreads: across the block, through shared memory; GpuLanes: across the
// warp, through shuffles) — afterwards every thread holds the combined value; it follows
// the reduction loop whose partial accumulations it combines and is reached by every thread
// of the block or warp. Barrier: every thread of the block waits (never inside a
// thread-mapped loop). AtomicAdd: name (buffer), exprs {index, value}, an integer add.
struct Stmt {
  StmtKind kind = StmtKind::Block;
  std::string name;
  DType dtype = DType::F32;
  LoopKind loop = LoopKind::Parallel;
  LoopMap map = LoopMap::Unmapped;
  CombineOp combine = CombineOp::Sum;
  int64_t extent = 0;
  int64_t grain = 1;  // CpuThreads: the fewest iterations a chunk gets
  // Set by the CUDA schedule (0 until then). A thread's or lane's share of a row, or a
  // grid-stride loop: `vector` consecutive elements per iteration, one access of
  // vector * element size bytes per buffer (codegen/vectorize.h says which loops can).
  int vector = 0;
  // A vectorized grid-stride loop whose thread runs `unroll` of its iterations at once (their
  // loads first, so that more bytes are in flight while it computes), then the rest one by one.
  // 0: one at a time.
  int unroll = 0;
  // A row loop (GpuWarps, GpuBlocks) whose row of each buffer in `held` is read from memory
  // once, into `held_vectors` vectors per thread (registers, or with `held_shared` the
  // thread's own slots of dynamic shared memory for rows too long for registers), which every
  // share loop of the row then reads instead of memory.
  std::vector<std::string> held;
  // Rows of outputs the loop holds in registers (the same walk) from its first store to the
  // end of each iteration, when they are stored back once: a chunk's column partials, read
  // and written by every row of the chunk (codegen/lower_column_partials.cpp).
  std::vector<std::string> held_written;
  int64_t held_vectors = 0;
  bool held_shared = false;
  // A serial loop holding rows in registers loads the next iteration's rows at the top of
  // this one (the first before the loop), so that they arrive while this one computes.
  bool prefetch = false;
  // A row loop mapped GpuBlocks whose every row is shared by `cluster` blocks (a thread-block
  // cluster, sm_90): its share loops spread over all their threads, its combines go across the
  // cluster through distributed shared memory. 0: one block per row.
  int cluster = 0;
  TilePlan tiles;  // GpuTiles only
  std::vector<ExprPtr> exprs;
  std::vector<StmtPtr> body;
  std::string comment;
};

StmtPtr block(std::vector<StmtPtr> body);
StmtPtr for_loop(const std::string& var, int64_t extent, LoopKind kind, std::vector<StmtPtr> body,
                 std::string comment = "");
StmtPtr let(const std::string& name, ExprPtr value);
StmtPtr store(const std::string& buffer, ExprPtr index, ExprPtr value);
StmtPtr decl_acc(const std::string& name, DType dt, CombineOp op);
StmtPtr accumulate(const std::string& name, CombineOp op, ExprPtr value, ExprPtr position = nullptr);
StmtPtr combine_across(const std::string& acc, DType dt, CombineOp op, LoopMap across);
StmtPtr barrier();
StmtPtr atomic_add(const std::string& buffer, ExprPtr index, ExprPtr value);
// A copy of loop `s` with a map (and grain) set.
StmtPtr with_map(const StmtPtr& s, LoopMap map, int64_t grain = 1);

// ---- generic walkers (the only tree walks: passes and emitters build on these)
// Pre-order visit of every expression node.
void visit(const ExprPtr& e, const std::function<void(const Expr&)>& fn);
// Bottom-up rewrite: children first, then fn on the node rebuilt with the new children;
// fn returns the replacement (or its argument unchanged).
ExprPtr rewrite(const ExprPtr& e, const std::function<ExprPtr(const ExprPtr&)>& fn);
// Pre-order visit of statements.
void visit(const StmtPtr& s, const std::function<void(const Stmt&)>& fn);
// Rewrites every expression of every statement (each tree with `rewrite`).
StmtPtr rewrite_exprs(const StmtPtr& s, const std::function<ExprPtr(const ExprPtr&)>& fn);

// ---- kernels
enum class BufferRole : uint8_t { Input, Output, Temp, Constant };
std::string_view buffer_role_name(BufferRole r);

struct Buffer {
  std::string name;         // b0, b1, ... in argument order
  DType dtype = DType::F32;
  BufferRole role = BufferRole::Input;
  int64_t numel = 0;        // elements the kernel may address
  std::vector<double> data; // Constant: the values, emitted as a table in the kernel
  std::string what;         // the graph value it holds (for comments)
};

// How a GPU kernel is launched (set by the CUDA schedule): a 1-D grid of 1-D blocks.
struct LaunchConfig {
  int64_t grid = 1;
  int64_t block = 1;
  int64_t shared_bytes = 0;  // static shared memory the kernel's CombineAcross uses
  int64_t dynamic_shared_bytes = 0;  // shared memory given at launch (attention's tiles)
  int cluster = 1;                   // blocks per thread-block cluster (sm_90; compiled into the kernel)
  // The blocks stride over the work by gridDim.x (a grid-stride loop; rows, chunks or tiles
  // strided over the grid), so any grid of 1 to `grid` blocks computes the same: the launch takes
  // at most as many as the SMs hold at once for the compiled code (its registers, known only
  // after NVRTC: cuOccupancyMaxActiveBlocksPerMultiprocessor at load). A grid sized for 8 blocks
  // an SM whose code fits 6 ran 1.33 waves, the last third of the blocks alone at a quarter of
  // the occupancy (ncu, bench/NOTES.md stop 40).
  bool persistent = false;
  int min_blocks_per_sm = 0;  // __launch_bounds__'s second argument (Target::min_blocks_per_sm); 0: none
};

// How the schedule step mapped a kernel, in words a user reads (kernels.txt, kiln explain,
// the profiler's table): which mapping, its sizes, and why.
struct ScheduleRecord {
  std::string mapping;          // "grid-stride", "warp per row", "block per row", "thread per row",
                                // "block per tile", "one thread", "serial" (CPU: "thread pool", "vector loop")
  int64_t rows_per_block = 0;   // rows (or outer iterations) one block runs at once
  int64_t threads_per_row = 0;  // threads sharing one row (1: a thread walks its row)
  int vector = 0;               // elements per access of the widest vectorized loop (0: scalar)
  std::vector<std::string> held;  // buffers whose row is read once and held in registers
  int64_t held_elements = 0;      // elements of each held row one thread holds
  std::string why;                // the rule that chose it
  std::string tiles;              // tiled kernels (attention): the tile shapes and shared memory
  bool held_shared = false;       // `held` is in shared memory (rows too long for registers)
  std::vector<std::string> carried = {};  // output rows held in registers and stored back once (Stmt::held_written)
  int cluster = 0;                // blocks sharing a row (a thread-block cluster), 0: one
  bool approx_f32_math = false;   // f32 exp and division approximate (Target::approx_math_for_16bit_results)
  std::string tuned = {};         // set by the tuner (backend/autotune.h): which candidate won, its time and the default's
  int unroll = 0;                 // a vectorized grid-stride loop's iterations a thread runs at once (Stmt::unroll)
};
std::string print_schedule(const ScheduleRecord& r, const LaunchConfig& launch);

// A kernel that is one of the targets' tiled attention routines (codegen/attention.h), not a
// loop nest: FlashAttention's forward, or one of its backward passes. The lowering says which
// and on what sizes (batch dims flattened); the schedule step picks the tiles; the emitters
// print a call of the prelude's routine. Its buffers, in order: forward q, k, v, out, lse;
// backward (dK/dV) dout, q, k, v, lse, delta, dk, dv; backward (dQ) dout, q, k, v, lse, delta, dq.
struct AttentionKernel {
  enum class Pass : uint8_t { Forward, BackwardKV, BackwardQ };
  Pass pass = Pass::Forward;
  DType dtype = DType::F32;
  int64_t batch = 1, L = 0, S = 0, E = 0, Ev = 0;
  bool causal = false;
  double scale = 1.0;
  // The schedule's choice: query rows and key rows per tile, the head dims padded (CUDA: to
  // 16, a thread's column stride), the grain of the CPU's tasks.
  int64_t block_m = 0, block_n = 0, head = 0, grain = 1;
  bool tensor_cores = false;    // CUDA f16/bf16: mma.sync tiles instead of FFMA
  bool q_in_registers = false;  // the tensor-core forward: q's fragments held for the whole walk
};
std::string_view attention_pass_name(AttentionKernel::Pass p);

// A sort or topk kernel (codegen/sort.h): rows of `n` elements, row (o, i) at (o * n + j) * inner
// + i of a contiguous input, each ordered by value (stable: equal values by index), the first
// `k` values and their int64 indices written in the same layout with k in place of n.
struct SortKernel {
  DType dtype = DType::F32;
  int64_t outer = 0, n = 0, inner = 1, k = 0;
  bool descending = false;
  // Where the rows are sorted, set by the lowering for its buffers: in scratch buffers (b3, b4:
  // a GPU topk whose row is too long for shared memory), else in the kernel's own memory.
  bool scratch = false;
  // The schedule's choice. CUDA: a block per row, the row's pairs in shared memory (else sorted
  // where `scratch` says, or in place in the outputs); CPU: rows per task of the pool.
  bool in_shared = false;
  int64_t grain = 1;
  int64_t rows() const { return outer * inner; }
};

// scatter_add by sorted index on a GPU (codegen/sorted_scatter.h): the destination rows of a
// scatter whose index is the same across the other dims (an embedding's gradient), added to
// by one thread per run of equal sorted indices and column, in index order. Buffers: b0 the
// sums (in `acc`, read and written), b1 the sorted indices, b2 their positions, b3 the source.
struct SortedScatterKernel {
  DType src = DType::F32;  // the source's storage type
  DType acc = DType::F32;  // the sums' (f32 for f16/bf16 sources)
  // The source is [outer, n, inner], the sums [outer, rows, inner]: row j of the source goes
  // to row index[j].
  int64_t outer = 1, n = 0, rows = 0, inner = 1;
};

struct Kernel {
  std::string name;             // k0, k1, ... (the extern "C" symbol)
  std::vector<Buffer> buffers;  // argument order: the runtime passes buffers[i] as buffers[i]
  std::vector<Buffer> constants;  // tables compiled into the kernel (role Constant)
  StmtPtr body;
  std::string comment;          // the fusion group it came from
  // Set by the schedule step: the integer type of index arithmetic (32 when every buffer
  // and loop extent fits in 2^31 elements: cheaper on a GPU), and the GPU launch.
  int index_bits = 64;
  LaunchConfig launch;
  ScheduleRecord schedule;
  std::optional<AttentionKernel> attention;  // set: the body is empty, the routine is the kernel
  std::optional<SortKernel> sort;            // set: the body is empty, the routine is the kernel
  std::optional<SortedScatterKernel> sorted_scatter;  // likewise
  const Buffer* find_buffer(const std::string& name) const;
};

// Checks the structural invariants of a kernel: every buffer and variable used is declared
// (a loop var, a let or an accumulator in an enclosing scope), every Accumulate names an
// accumulator declared outside its reduction loop, loop kinds hold (a parallel loop
// accumulates into no accumulator declared outside it; reduction and ordered loops may), GPU maps nest (threads inside
// blocks, lanes inside warps, nothing mapped to the grid inside a thread-mapped loop), and
// CombineAcross and Barrier sit where every thread of their block or warp reaches them.
// kiln::Error (an internal error naming the kernel and the statement) when one is broken.
void verify(const Kernel& k);

std::string print_expr(const ExprPtr& e);
std::string print_stmt(const StmtPtr& s, int indent = 0);
// The kernel as text:
//   kernel k0(b0: f32[231] input %x, b1: f32[231] output %y)  # k0 pointwise [exp]
//     parallel for p in 0..7 { ... }
std::string print_kernel(const Kernel& k);

}  // namespace kiln::codegen
