#pragma once
// Transposed reads through shared-memory tiles: the analysis the CUDA schedule step runs on a
// flat pointwise loop, and whose plan the CUDA emitter prints.
//
// A grid-stride loop over the output's elements is coalesced on every buffer read at the
// loop variable (32 neighbouring threads, 32 neighbouring elements). A buffer read through a
// transposed or permuted view is not: `b1[(i % 4096) * 1024 + i / 4096]` puts neighbouring
// threads 1024 elements apart, one 32-byte sector fetched per 4 bytes used (27% of copy on
// the H100). Seen as a matrix of R rows of C output elements (i = r * C + c), such a buffer is
// contiguous down a column instead (one step of r moves its index by 1). A block then takes a
// tile of 64 rows x 64 columns (32 x 32 when the view or shared memory is too small) in two
// phases: first each warp reads 32 consecutive rows of one column of every transposed buffer
// (contiguous in that buffer) into shared memory; after a barrier each warp computes 32
// consecutive columns of one row, reading the transposed values from shared memory and every
// other buffer, and writing the output, coalesced as before
// (the transpose kernels of the CUDA samples; Triton does it in its layout conversions).
//
// Which loads qualify: a load of an input or temporary buffer the loop never stores, not under
// a select's branch (it runs in the first phase, unconditionally), whose index depends on the
// loop variable alone and, probed at a few points of the [R, C] view, steps by 1 with r and by
// more than one sector with c. C is the divisor of the loop variable in those indices under
// which the most loads qualify; stores are at the loop variable itself (a contiguous output).
// Correctness never rests on the probe: each element is still loaded at its own index, the
// tiling only changes which thread loads it.
#include <cstdint>
#include <optional>
#include <string>

#include "codegen/kernel_ir.h"

namespace kiln::codegen {

// The tiling plan for a flat parallel loop of `k` (its sole statement), or nothing when no
// load is transposed or the loop does not have the form above. The plan (TilePlan, in
// kernel_ir.h) is what the schedule writes into the loop, mapped GpuTiles.
std::optional<TilePlan> transposed_reads(const Kernel& k, const StmtPtr& loop);

// The shared-memory tile a transposed load is staged in: `<buffer>_tile<n>` (n its position
// in TilePlan::loads), tile x (tile + 1) elements of the buffer's storage type (the extra
// column keeps a warp's column reads on distinct banks).
std::string tile_array_name(const TilePlan& t, size_t n);
int64_t tile_array_elements(const TilePlan& t);
// The shared memory all of a plan's tiles take.
int64_t tile_shared_bytes(const TilePlan& t);

}  // namespace kiln::codegen
