#include "codegen/attention.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/error.h"

namespace kiln::codegen {

namespace {

int64_t round_up(int64_t x, int64_t m) { return (x + m - 1) / m * m; }
int64_t ceil_div(int64_t x, int64_t m) { return (x + m - 1) / m; }

// Shared memory of a CUDA routine's tiles (codegen/attention_prelude.cpp lays them out): the
// forward holds q, k, v and the weights; a backward pass q, dO, k, v, P and dS, lse and delta.
// Rows are padded by 16 bytes of elements (the prelude's KILN_ATTN_W).
int64_t cuda_shared_bytes(AttentionKernel::Pass pass, int64_t bm, int64_t bn, int64_t head, int64_t elem) {
  const int64_t pad = 16 / elem;
  if (pass == AttentionKernel::Pass::Forward) return ((bm + 2 * bn) * (head + pad) + bm * (bn + pad)) * elem;
  return ((2 * bm + 2 * bn) * (head + pad) + 2 * bm * (bn + pad) + 2 * bm) * elem;
}

// The tensor-core routines' shared memory (codegen/attention_prelude_mma.cpp lays it out), 16-bit
// tiles with rows padded by 8 elements: the forward holds two buffers of a k and a v tile (and
// its q tile, unless q's fragments stay in registers); the dK/dV pass its k and v tiles and two
// buffers of a query tile (q, dO, lse and delta); the dQ pass its q and dO tiles and two buffers
// of a k and a v tile.
int64_t tensor_core_shared_bytes(AttentionKernel::Pass pass, int64_t own, int64_t walked, int64_t head, bool q_in_registers) {
  const int64_t row = (head + 8) * 2;
  switch (pass) {
    case AttentionKernel::Pass::Forward: return (q_in_registers ? 0 : own * row) + 2 * 2 * walked * row;
    case AttentionKernel::Pass::BackwardKV: return 2 * own * row + 2 * (2 * walked * row + 2 * walked * 4);
    case AttentionKernel::Pass::BackwardQ: return 2 * own * row + 2 * 2 * walked * row;
  }
  return 0;
}

}  // namespace

int attention_dtype_code(DType dt) {
  switch (dt) {
    case DType::F32: return 0;
    case DType::F64: return 1;
    case DType::F16: return 2;
    case DType::BF16: return 3;
    default: fail("attention has no kernel for {}", dtype_name(dt));
  }
}

void schedule_attention(Kernel& k, const Target& t) {
  KILN_INTERNAL_ASSERT(k.attention.has_value(), "schedule_attention is given an attention kernel");
  AttentionKernel& a = *k.attention;
  const bool kv = a.pass == AttentionKernel::Pass::BackwardKV;
  const int64_t rows = kv ? a.S : a.L;  // what the tiles of the grid (or the pool's tasks) split
  ScheduleRecord rec;
  rec.mapping = "block per tile";
  if (!t.is_gpu()) {
    a.block_m = a.block_n = 32;
    a.head = std::max(a.E, a.Ev);
    int64_t tasks = a.batch * ceil_div(rows, 32);
    int64_t work = a.batch * a.L * a.S * std::max<int64_t>(a.E + a.Ev, 1);
    a.grain = work < t.parallel_work * 64 ? std::max<int64_t>(tasks, 1) : 1;
    rec.mapping = a.grain >= tasks ? "serial" : "thread pool";
    rec.rows_per_block = 32;
    rec.tiles = fmt::format("tiles of 32 {} x 32 {}", kv ? "keys" : "queries", kv ? "queries" : "keys");
    rec.why = a.grain >= tasks ? "a small call: on the calling thread" : fmt::format("{} tasks, one per (batch, tile)", tasks);
    k.schedule = rec;
    k.index_bits = 64;
    return;
  }
  a.head = round_up(std::max<int64_t>({a.E, a.Ev, 1}), 16);
  // f16 and bf16 on tensor cores (mma.sync m16n8k16: sm_80 and later), heads up to 128 (a
  // thread's accumulators: head/8 x 4 floats per output) where the double-buffered tiles fit
  // the opt-in shared memory (the dQ pass at head 128 takes 102 KB: an sm_86's 99 KB runs it on
  // FFMA tiles); everything else on FFMA tiles.
  const int cc = std::stoi(t.arch.substr(3, 2));
  // The forward: 4 warps of Target::attention_rows_per_warp queries (32: each k and v fragment
  // feeds two 16-row blocks) walking tiles of Target::attention_key_tile keys; q's fragments in
  // registers, except at 32 rows past head 64, where q is read from shared memory so that the
  // output (head/2 floats a thread a 16-row block) and the scores fit in registers.
  // dK and dV take head/2 floats a thread each: at wide heads their pass walks 32-query tiles.
  const bool fwd = a.pass == AttentionKernel::Pass::Forward, wide = a.head > 64;
  const int64_t tc_walked = fwd ? t.attention_key_tile : wide && a.pass == AttentionKernel::Pass::BackwardKV ? 32 : 64;
  auto forward_bytes = [&](int rows) {
    return tensor_core_shared_bytes(a.pass, 4 * rows, tc_walked, a.head, /*q_in_registers=*/!(wide && rows == 32));
  };
  // Where 32 rows' q tile does not fit beside the key buffers (a 99 KB sm_86 at head 128), 16.
  const int warp_rows =
      fwd && t.attention_rows_per_warp == 32 && forward_bytes(32) > t.shared_memory_optin ? 16 : t.attention_rows_per_warp;
  const int64_t tc_own = fwd ? 4 * warp_rows : 64;
  const bool q_in_registers = fwd && !(wide && warp_rows == 32);
  const int64_t tc_bytes = tensor_core_shared_bytes(a.pass, tc_own, tc_walked, a.head, q_in_registers);
  a.tensor_cores = (a.dtype == DType::F16 || a.dtype == DType::BF16) && a.head <= 128 && cc >= 80 && tc_bytes <= t.shared_memory_optin;
  a.q_in_registers = q_in_registers && a.tensor_cores;
  int64_t bytes = 0;
  if (a.tensor_cores) {
    a.block_m = kv ? tc_walked : tc_own;
    a.block_n = kv ? tc_own : tc_walked;
    bytes = tc_bytes;
    rec.threads_per_row = 4;
    rec.why = fmt::format(
        "{} on tensor cores: mma.sync m16n8k16 with f32 accumulators, 4 warps of {} {} rows{}; fragments by ldmatrix, the walked "
        "tiles by cp.async into two buffers, exp2 on the MUFU",
        dtype_name(a.dtype), fwd ? warp_rows : 16, kv ? "key" : "query", a.q_in_registers ? ", q in registers" : "");
  } else {
    const int64_t elem = a.dtype == DType::F64 ? 8 : 4;
    // Wide heads take smaller tiles: a thread's accumulators grow with the head (rows/8 x head/16).
    int64_t bm = a.head > 128 ? std::min(32, t.attention_ffma_rows) : t.attention_ffma_rows, bn = t.attention_ffma_keys;
    while (bm > 16 && cuda_shared_bytes(a.pass, bm, bn, a.head, elem) > t.shared_memory_optin) {
      bm /= 2;
      bn = std::min<int64_t>(bn, std::max<int64_t>(bm, 16));
    }
    a.block_m = bm;
    a.block_n = bn;
    bytes = cuda_shared_bytes(a.pass, bm, bn, a.head, elem);
    rec.threads_per_row = 16;
    rec.why = fmt::format("{} FFMA tiles, 128 threads as 8 row groups x 16 columns; tiles by cp.async{}; the attention_ffma_rows x "
                          "attention_ffma_keys tiles, halved until their shared memory fits {} KB",
                          a.dtype == DType::F64 ? "f64" : "f32", fwd ? ", the next k and v tiles copied a half-step ahead" : "",
                          t.shared_memory_optin / 1024);
  }
  if (bytes > t.shared_memory_optin)
    fail("attention {} of head {} in {} needs {} bytes of shared memory at its smallest tiles; this GPU gives {}", attention_pass_name(a.pass),
         a.head, dtype_name(a.dtype), bytes, t.shared_memory_optin);
  const int64_t own = kv ? a.block_n : a.block_m, other = kv ? a.block_m : a.block_n;  // the grid's tiles, the walked ones
  k.launch.block = 128;
  k.launch.grid = std::max<int64_t>(1, a.batch * ceil_div(rows, own));  // an empty call: one block that returns
  k.launch.shared_bytes = 0;
  k.launch.dynamic_shared_bytes = bytes;
  k.index_bits = 64;
  rec.rows_per_block = own;
  rec.tiles = fmt::format("tiles of {} {} x {} {}, head padded to {}, {:.1f} KB shared", own, kv ? "keys" : "queries", other,
                          kv ? "queries" : "keys", a.head, static_cast<double>(bytes) / 1024);
  k.schedule = rec;
}

}  // namespace kiln::codegen
