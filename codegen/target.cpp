#include "codegen/target.h"

#include <cstdlib>

namespace kiln::codegen {

Target cpu_target() {
  Target t;
  // Together, not apart: a norm's backward in one pass over x and dy needs the row group to hand
  // on per-row statistics only (this 2-core VM, `kiln_bench_cpu --quick`: layer_norm bwd
  // [2048,4096] 26.8 ms as before, 29.7 recomputing alone, 20.3 both; the GPT-2 block train step
  // 456 -> 435 ms; bench/NOTES.md, stop 30).
  t.recompute_from_statistics = true;
  t.column_partials_in_rows = true;
  return t;
}

bool Target::supports_clusters() const {
  return is_gpu() && arch.rfind("sm_", 0) == 0 && std::atoi(arch.c_str() + 3) >= 90;
}

Target cuda_target(const std::string& arch, int num_sms) {
  Target t;
  t.kind = TargetKind::Cuda;
  t.name = "cuda " + arch;
  t.arch = arch;
  t.num_sms = num_sms;
  const int cc = std::atoi(arch.c_str() + 3);  // "sm_90" -> 90, "sm_100" -> 100
  t.always_flat = true;
  t.buffer_alignment = 256;
  t.matmul_epilogues = true;
  t.recompute_from_statistics = true;
  t.column_partials_in_rows = true;
  t.approx_math_for_16bit_results = true;
  t.online_softmax = true;
  t.welford = true;
  // A row the schedule holds on chip is read from memory once whatever the passes over it, so
  // the one-pass forms only add arithmetic there (online softmax's exp of each new maximum in
  // divergent warps; Welford's division per element): measured on the H200, a 50257-word
  // softmax ran 0.95 ms online whether its row was held in registers, in shared memory or not
  // at all (bench/NOTES.md, stop 29). They start past the longest row held in registers:
  // a cluster's 8 x 1024 threads of 32 words on sm_90, a block's 1024 before.
  t.one_pass_min_row = (cc >= 90 ? 8 : 1) * 1024 * 32 + 1;
  // One thread per column of a tile: a tile is a block of threads reading consecutive
  // columns (coalesced); enough tiles to give every multiprocessor a few blocks.
  t.column_tile_max = 256;
  t.column_tiles_wanted = 2 * num_sms;
  t.column_thread_min_points = int64_t(num_sms) * 1024;
  // Opt-in shared memory per block by architecture (the CUDA guide's table); the backend reads
  // the device's own figure when there is one.
  t.shared_memory_optin = cc >= 90 ? 227 * 1024 : cc == 80 || cc == 87 ? 163 * 1024 : cc >= 70 ? 99 * 1024 : 48 * 1024;
  return t;
}

}  // namespace kiln::codegen
