#pragma once
// Rows with column partials, a fusion decision: a norm's backward is two reduction groups over
// one space S = [rows, cols]: the per-row statistics (sums over each row's columns: a layer
// norm's mean, rstd and the two means of its dx formula) and, reading them, the per-column
// sums (dW, db: sums over the rows) beside the full-size dx. As two kernels, x and dy are
// read twice. On a target that asks for it (FusionOptions::column_partials_in_rows: a GPU),
// the column group computes the row group itself: each block walks a chunk of rows in order,
// takes one row's statistics, writes that row's dx and adds the row into the block's column
// partials; a second small kernel sums the partials in chunk order (deterministic, no atomics).
// x and dy are read once (Triton's layer-norm backward tutorial and QuACK do the same by hand).
//
// The row group is folded into the column group (FusionGroup::folded_into / rows_of) when:
// both reduce the same space, the column group over the leading dims and the row group over
// the others; the column group's reductions are sums; every value the row group hands on is
// a per-row value of keepdim shape read only by pointwise nodes of the column group over S
// (so each row's statistics are used in that row alone) and by nothing else. Each fold, and
// each near miss of a column group beside a row group of its space, is in the groups' reasons.
#include "ir/graph.h"
#include "passes/fusion/fusion.h"

namespace kiln::fusion {

void choose_rows_with_column_partials(const Graph& g, FusionPlan& plan);

}  // namespace kiln::fusion
