#include "codegen/target.h"

namespace kiln::codegen {

Target cpu_target() { return Target{}; }

Target cuda_target(const std::string& arch, int num_sms) {
  Target t;
  t.kind = TargetKind::Cuda;
  t.name = "cuda " + arch;
  t.arch = arch;
  t.num_sms = num_sms;
  t.always_flat = true;
  t.buffer_alignment = 256;
  t.matmul_epilogues = true;
  t.recompute_from_statistics = true;
  t.online_softmax = true;
  t.welford = true;
  // One thread per column of a tile: a tile is a block of threads reading consecutive
  // columns (coalesced); enough tiles to give every multiprocessor a few blocks.
  t.column_tile_max = 256;
  t.column_tiles_wanted = 2 * num_sms;
  return t;
}

}  // namespace kiln::codegen
