#pragma once
// Which GPU loops can run on 16-byte vectors: the analysis the CUDA schedule step
// (codegen/schedule.h) runs to set Stmt::vector, and whose access forms the CUDA emitter
// reads back to print the vector loads and stores. Two loop shapes qualify:
//   - a grid-stride loop whose every access is at the loop variable v (or `v % C` for a load
//     broadcast over rows, C a multiple of the width): the common pointwise kernel;
//   - a thread's or lane's share of a row whose every access is at `base + r`, base a sum of
//     multiples of the width (row * 1024), over read-only inputs and outputs the kernel never
//     reads back.
// The width is 16 bytes of the widest buffer of a row loop (of the narrowest for a
// grid-stride loop, so that a 16-bit buffer is read 8 values at a time beside f32 ones).
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

// Bytes of a buffer element the vector paths handle (4: f32, i32; 2: f16, bf16), else 0.
int element_bytes(DType t);
// The dynamic shared memory a row of `t` held in shared memory takes (Stmt::held_shared):
// `vectors` vectors of `width` elements for each of `threads` threads, in 16-byte units.
int64_t held_shared_bytes(DType t, int64_t vectors, int64_t threads, int width);
// The kernel's body as one loop (Blocks of one statement around it), or null.
StmtPtr sole_loop(const StmtPtr& s);
// The period of a load index that is `v` (0) or `v % C` (C), or -1 for any other index.
int64_t period_of(const ExprPtr& index, const std::string& v);
// Each loaded (non-constant) buffer's index period in a vectorizable grid-stride loop.
std::map<std::string, int64_t> load_periods(const Kernel& k, const StmtPtr& loop);

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
