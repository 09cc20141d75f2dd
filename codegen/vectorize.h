#pragma once
// Which GPU loops can run on 16-byte vectors: the analysis the CUDA schedule step
// (codegen/schedule.h) runs to set Stmt::vector, and whose access forms the CUDA emitter
// reads back to print the vector loads and stores. Two loop shapes qualify:
//   - a grid-stride loop whose every store is at the loop variable v and whose every load
//     reads W consecutive elements for W consecutive v (lane_contiguous: v, `v % C` for a
//     bias broadcast over rows, a permuted copy's index): the common pointwise kernel;
//   - a thread's or lane's share of a row whose every access is at `base + r`, base a sum of
//     multiples of the width (row * 1024), over read-only inputs and outputs the kernel never
//     reads back.
// The width is 16 bytes of the widest buffer of a row loop (of the narrowest for a
// grid-stride loop, so that a 16-bit buffer is read 8 values at a time beside f32 ones).
#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

// Bytes of a buffer element the vector paths handle (4: f32, i32; 2: f16, bf16), else 0.
int element_bytes(DType t);
// The dynamic shared memory a row of `t` held in shared memory takes (Stmt::held_shared):
// `vectors` vectors of `width` elements for each of `threads` threads, in 16-byte units.
int64_t held_shared_bytes(DType t, int64_t vectors, int64_t threads, int width);
// The kernel's body as one loop (Blocks of one statement around it), or null.
StmtPtr sole_loop(const StmtPtr& s);
// Whether `index`, over loop variable v, reads W consecutive elements for each W consecutive
// values of v from a multiple of W: index(W*u + l) = index(W*u) + l for l < W, with index(W*u)
// a multiple of W. `v`, `v % C` (a bias broadcast over rows) and a permutation's index whose
// innermost run is a multiple of W long all are; a gather is not.
// `varying` names values computed per element (the loop's lets): an index using one is not.
bool lane_contiguous(const ExprPtr& index, const std::string& v, int w, const std::set<std::string>& varying = {});
// The names the loop's body binds (its lets).
std::set<std::string> loop_lets(const StmtPtr& loop);
// A condition a load is under: a select's, taking the load's branch when it is `when_true`.
struct LoadGuard {
  ExprPtr condition;
  bool when_true;
};
// Every load of a loop's lets and stores, with the select conditions it is under, outermost first.
void each_guarded_load(const StmtPtr& loop, const std::function<void(const Expr&, const std::vector<LoadGuard>&)>& fn);
// The guards as text (equal lists, equal text).
std::string guards_key(const std::vector<LoadGuard>& guards);
// A load of a vectorized grid-stride loop that reads its W elements as one 16-byte vector:
// the buffer, the load's index over the loop variable, the select conditions it is read under
// (each the same over a vector's W elements: the vector is read only where they hold), and the
// vector's name (`<name>_v`).
struct VectorLoad {
  std::string buffer;
  ExprPtr index;
  std::vector<LoadGuard> guards;
  std::string name;
};
// The distinct loads (buffer, index, guards) of a loop that grid_stride_vector_width
// vectorized at `width`, by buffer name: a buffer's first form is named after it, its others
// `<buffer>_f1`, `<buffer>_f2`, ... A load under a condition that varies within a vector is
// not one of them: it stays a scalar load.
std::vector<VectorLoad> grid_stride_vector_loads(const Kernel& k, const StmtPtr& loop, int width);
// The vector load that gives `load` (read under `guards`), or null.
const VectorLoad* find_vector_load(const std::vector<VectorLoad>& loads, const Expr& load, const std::vector<LoadGuard>& guards);
// The index of the vector a VectorLoad reads at vector iteration `q` (v = q * w).
ExprPtr vector_index(const ExprPtr& index, const std::string& v, const ExprPtr& q, int w);

// Elements per thread per iteration if the grid-stride `loop` (mapped GpuGridStride) can run
// on 16-byte vectors, else 0. The emitter finishes the last extent % width elements scalar.
int grid_stride_vector_width(const Kernel& k, const StmtPtr& loop);

// `index` as base + v with base a sum of multiples of `w`; the base, or null.
ExprPtr aligned_base(const ExprPtr& index, const std::string& v, int w);
// Elements per vector for a share of a row (`loop` mapped GpuThreads or GpuLanes), or 0;
// `bases` gets each accessed buffer's base. A row whose length is no multiple of the width
// gives 0, or 1 with `scalar_ok` (the same access form one element at a time: what a row held
// in registers needs of every loop that reads it). Buffers in `carried` (outputs whose row a
// loop holds in registers and stores back once: a chunk's column partials, Stmt::held_written)
// may be loaded and stored by the loop: every loop touching them walks the held row alike.
int row_vector_width(const Kernel& k, const StmtPtr& loop, std::map<std::string, ExprPtr>& bases, bool scalar_ok = false,
                     const std::set<std::string>& carried = {});

}  // namespace kiln::codegen
