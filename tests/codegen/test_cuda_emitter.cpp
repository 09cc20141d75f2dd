// The CUDA emitter on kernels built by hand (maps, launch and index width set here, not by the
// schedule step; only the vector widths come from the schedule's choose_vectors): the shape of the emitted code for each loop map and GPU statement, and —
// where the CUDA path is built — that every module compiles with NVRTC for sm_80 and sm_90
// with no warnings. (Running them is the GPU backend tests' job.)
#include <gtest/gtest.h>

#include <cmath>

#include <fmt/format.h>

#include <string>
#include <vector>

#include "codegen/cpp_emitter.h"
#include "codegen/cuda_emitter.h"
#include "codegen/kernel_ir.h"
#include "codegen/schedule.h"
#include "codegen/vectorize.h"
#include "ir/error.h"
#include "tests/support/support.h"

#if KILN_HAVE_CUDA
#include "runtime/cuda/nvrtc.h"
#endif

namespace kiln::codegen {
namespace {

using kiln::testing::has;

Buffer buf(const std::string& name, DType dt, BufferRole role, int64_t numel, const std::string& what = "") {
  Buffer b;
  b.name = name;
  b.dtype = dt;
  b.role = role;
  b.numel = numel;
  b.what = what.empty() ? "%" + name : what;
  return b;
}

// A target whose choose_vectors may use `shared_limit` bytes of dynamic shared memory beside
// the kernel's own `static_shared` (0: none) and clusters only when `clusters` (sm_90). Its flat
// loops run two iterations at once (the tuner's `pointwise_unroll 2`; the default is one), so
// that the unrolled form's emission is what these tests read.
Target vectors_target(int64_t shared_limit, int64_t static_shared, bool clusters = false) {
  Target t = cuda_target(clusters ? "sm_90" : "sm_80");
  t.shared_memory_optin = shared_limit + static_shared;
  t.pointwise_unroll = 2;
  return t;
}

Kernel kernel(const std::string& name, std::vector<Buffer> buffers, StmtPtr body, int64_t block, int index_bits = 32) {
  Kernel k;
  k.name = name;
  k.comment = "test " + name;
  k.buffers = std::move(buffers);
  k.body = std::move(body);
  k.index_bits = index_bits;
  k.launch = {.grid = 4, .block = block, .shared_bytes = 0};
  verify(k);  // the hand-built kernels keep the IR's invariants
  k.launch.shared_bytes = cuda_shared_bytes(k);
  choose_vectors(k, /*max_row_threads=*/0, vectors_target(0, k.launch.shared_bytes));  // vector widths as the schedule picks them; no rows held
  return k;
}

ExprPtr f32(const std::string& b, ExprPtr i) { return load(b, DType::F32, std::move(i)); }

// y = exp(x * h) over 1030 elements: f32 and f16 inputs, contiguous -> 16-byte vectors + a tail.
Kernel pointwise_kernel() {
  ExprPtr i = var("i", 0, 1029);
  ExprPtr x = mul(f32("b1", i), load("b2", DType::F16, i));
  return kernel("pw", {buf("b0", DType::F32, BufferRole::Output, 1030), buf("b1", DType::F32, BufferRole::Input, 1030),
                       buf("b2", DType::F16, BufferRole::Input, 1030)},
                block({with_map(for_loop("i", 1030, LoopKind::Parallel,
                                         {let("x", x), store("b0", i, call("exp", DType::F32, {value_var("x", DType::F32)}))}, "computes %b0"),
                                LoopMap::GpuGridStride)}),
                256);
}

// out[i] = table[clamp(idx[i])]: a gather stays scalar (and reports bad indices).
Kernel gather_kernel() {
  ExprPtr i = var("i", 0, 99);
  ExprPtr at = call("check_index", DType::I64, {load("b2", DType::I64, i), imm(10), imm(0)});
  return kernel("gather", {buf("b0", DType::F32, BufferRole::Output, 100), buf("b1", DType::F32, BufferRole::Input, 10),
                           buf("b2", DType::I64, BufferRole::Input, 100)},
                with_map(for_loop("i", 100, LoopKind::Parallel, {store("b0", i, f32("b1", at))}), LoopMap::GpuGridStride), 256, 64);
}

// out[i] = bf16(i) + x[i]: only 2-byte buffers (8 elements per vector), the index as a value.
Kernel iota_kernel() {
  ExprPtr i = var("i", 0, 4095);
  return kernel("iota", {buf("b0", DType::BF16, BufferRole::Output, 4096), buf("b1", DType::BF16, BufferRole::Input, 4096)},
                with_map(for_loop("i", 4096, LoopKind::Parallel,
                                  {store("b0", i, cast(DType::BF16, add(cast(DType::F32, i), cast(DType::F32, load("b1", DType::BF16, i)))))}),
                         LoopMap::GpuGridStride),
                256);
}

// A row reduction mapped to blocks: per row a sum, a max and an argmax over 1023 columns,
// each combined across the block's threads; thread 0 stores the row's results.
Kernel block_reduction_kernel() {
  ExprPtr row = var("row", 0, 6), r = var("r", 0, 1022);
  ExprPtr x = f32("b3", add(mul(row, imm(1023)), r));
  StmtPtr reduce = with_map(for_loop("r", 1023, LoopKind::Reduction,
                                     {accumulate("s_acc", CombineOp::Sum, x), accumulate("m_acc", CombineOp::Max, x),
                                      accumulate("a_acc", CombineOp::Argmax, x, r)},
                                     "reduces %s %m %a"),
                            LoopMap::GpuThreads);
  StmtPtr rows = with_map(
      for_loop("row", 7, LoopKind::Parallel,
               {decl_acc("s_acc", DType::F32, CombineOp::Sum), decl_acc("m_acc", DType::F32, CombineOp::Max),
                decl_acc("a_acc", DType::F32, CombineOp::Argmax), reduce,
                combine_across("s_acc", DType::F32, CombineOp::Sum, LoopMap::GpuThreads),
                combine_across("m_acc", DType::F32, CombineOp::Max, LoopMap::GpuThreads),
                combine_across("a_acc", DType::F32, CombineOp::Argmax, LoopMap::GpuThreads),
                store("b0", row, value_var("s_acc", DType::F32)), store("b1", row, value_var("m_acc", DType::F32)),
                store("b2", row, value_var("a_acc_idx", DType::I64))},
               "rows of %s %m %a"),
      LoopMap::GpuBlocks);
  return kernel("rows", {buf("b0", DType::F32, BufferRole::Output, 7), buf("b1", DType::F32, BufferRole::Output, 7),
                         buf("b2", DType::I64, BufferRole::Output, 7), buf("b3", DType::F32, BufferRole::Input, 7 * 1023)},
                rows, 512);
}

// The kernel NVRTC 13.0 crashed on (kiln fuzz, H100): a warp per row, its lanes taking 99
// elements of a permuted tensor, x[(r % 3) * 165 + (r / 3) * 5 + row], for amin.
Kernel div_mod_lane_kernel() {
  ExprPtr row = var("row", 0, 4), r = var("r", 0, 98);
  ExprPtr at = add(add(mul(mod(r, imm(3)), imm(165)), mul(floordiv(r, imm(3)), imm(5))), row);
  StmtPtr reduce = with_map(for_loop("r", 99, LoopKind::Reduction, {accumulate("m_acc", CombineOp::Min, f32("b1", at))}, "reduces %m"),
                            LoopMap::GpuLanes);
  StmtPtr rows = with_map(for_loop("row", 5, LoopKind::Parallel,
                                   {decl_acc("m_acc", DType::F32, CombineOp::Min), reduce,
                                    combine_across("m_acc", DType::F32, CombineOp::Min, LoopMap::GpuLanes),
                                    store("b0", row, value_var("m_acc", DType::F32))},
                                   "rows of %m"),
                          LoopMap::GpuWarps);
  return kernel("k34", {buf("b0", DType::F32, BufferRole::Output, 5), buf("b1", DType::F32, BufferRole::Input, 3 * 165)}, rows, 256);
}

// Every combine op and accumulator type, across a warp (GpuWarps/GpuLanes) or a block.
Kernel all_combines_kernel(LoopMap outer, LoopMap inner) {
  ExprPtr row = var("row", 0, 99), r = var("r", 0, 63);
  ExprPtr at = add(mul(row, imm(64)), r);
  std::vector<StmtPtr> decls, steps, combines, stores;
  int out = 0;
  std::vector<Buffer> bufs;
  for (DType t : {DType::F32, DType::F64, DType::I64}) {
    bufs.push_back(buf(fmt::format("in_{}", dtype_name(t)), t, BufferRole::Input, 100 * 64));
    ExprPtr x = load(bufs.back().name, t, at);
    for (CombineOp op : {CombineOp::Sum, CombineOp::Prod, CombineOp::Max, CombineOp::Min, CombineOp::Argmax}) {
      std::string a = fmt::format("acc{}", out);
      decls.push_back(decl_acc(a, t, op));
      steps.push_back(accumulate(a, op, x, op == CombineOp::Argmax ? r : nullptr));
      combines.push_back(combine_across(a, t, op, inner));
      bool idx = op == CombineOp::Argmax;
      bufs.push_back(buf(fmt::format("out{}", out), idx ? DType::I64 : t, BufferRole::Output, 100));
      stores.push_back(store(bufs.back().name, row, idx ? value_var(a + "_idx", DType::I64) : value_var(a, t)));
      ++out;
    }
  }
  std::vector<StmtPtr> body = decls;
  body.push_back(with_map(for_loop("r", 64, LoopKind::Reduction, steps), inner));
  body.insert(body.end(), combines.begin(), combines.end());
  body.insert(body.end(), stores.begin(), stores.end());
  return kernel(outer == LoopMap::GpuWarps ? "warps" : "blocks", bufs, with_map(for_loop("row", 100, LoopKind::Parallel, body), outer),
                256);
}

// A kernel with no loop (a 0-d result): one thread of the launch stores.
Kernel scalar_kernel() {
  return kernel("scalar", {buf("b0", DType::F16, BufferRole::Output, 1), buf("b1", DType::F16, BufferRole::Input, 1)},
                block({let("v", cast(DType::F16, call("sqrt", DType::F32, {cast(DType::F32, load("b1", DType::F16, imm(0)))}))),
                       store("b0", imm(0), value_var("v", DType::F16))}),
                1);
}

// Integer atomics (a histogram) and a barrier between two phases of a block.
Kernel atomics_kernel() {
  ExprPtr i = var("i", 0, 999), p = var("p", 0, 3), j = var("j", 0, 255);
  StmtPtr hist = with_map(for_loop("i", 1000, LoopKind::Parallel,
                                   {atomic_add("b0", load("b2", DType::I64, i), imm(1)), atomic_add("b1", imm(0), load("b2", DType::I64, i))}),
                          LoopMap::GpuGridStride);
  StmtPtr phases = with_map(for_loop("p", 4, LoopKind::Parallel,
                                     {with_map(for_loop("j", 256, LoopKind::Parallel, {store("b3", add(mul(p, imm(256)), j), imm(DType::F32, 1))}),
                                               LoopMap::GpuThreads),
                                      barrier(), atomic_add("b0", p, imm(2))}),
                            LoopMap::GpuBlocks);
  return kernel("atomics", {buf("b0", DType::I32, BufferRole::Output, 16), buf("b1", DType::I64, BufferRole::Output, 1),
                            buf("b2", DType::I64, BufferRole::Input, 1000), buf("b3", DType::F32, BufferRole::Output, 1024)},
                block({hist, phases}), 256);
}

// A warp per row of `len` f32: a sum, then y = x - mean with the row's weight w[r], stored.
// `weight` is the dtype of b2 (bf16: a mixed-precision layer norm's f32 rows and 16-bit weight).
// `block`: a block of 1024 threads per row instead of a warp.
Kernel row_kernel(int64_t len, DType weight = DType::F32, bool block = false) {
  ExprPtr row = var("row", 0, 63), r = var("r", 0, len - 1);
  ExprPtr at = add(mul(row, imm(len)), r);
  const LoopMap share = block ? LoopMap::GpuThreads : LoopMap::GpuLanes;
  StmtPtr reduce = with_map(for_loop("r", len, LoopKind::Reduction, {accumulate("s_acc", CombineOp::Sum, f32("b1", at))}), share);
  StmtPtr write = with_map(
      for_loop("r", len, LoopKind::Parallel,
               {let("y", call("mul", DType::F32, {call("sub", DType::F32, {f32("b1", at), value_var("s", DType::F32)}), load("b2", weight, r)})),
                store("b0", at, value_var("y", DType::F32))}),
      share);
  StmtPtr rows = with_map(for_loop("row", 64, LoopKind::Parallel,
                                   {decl_acc("s_acc", DType::F32, CombineOp::Sum), reduce,
                                    combine_across("s_acc", DType::F32, CombineOp::Sum, share),
                                    let("s", value_var("s_acc", DType::F32)), write}),
                          block ? LoopMap::GpuBlocks : LoopMap::GpuWarps);
  return kernel(fmt::format("{}row{}", block ? "block" : "", len),
                {buf("b0", DType::F32, BufferRole::Output, 64 * len), buf("b1", DType::F32, BufferRole::Input, 64 * len),
                 buf("b2", weight, BufferRole::Input, len)},
                rows, block ? 1024 : 256);
}

// A column max kept in a temp buffer (global memory), then selected against an input: the
// kernel reads back what it writes, as a fused column reduction does.
Kernel readback_kernel() {
  ExprPtr c = var("c", 0, 13);
  return kernel("rb",
                {buf("b0", DType::F32, BufferRole::Output, 14), buf("b1", DType::F32, BufferRole::Temp, 14),
                 buf("b2", DType::F32, BufferRole::Input, 28), buf("b3", DType::F32, BufferRole::Input, 1),
                 buf("b4", DType::Bool, BufferRole::Input, 14)},
                block({with_map(
                    for_loop("t", 1, LoopKind::Parallel,
                             {with_map(for_loop("c", 14, LoopKind::Parallel, {store("b1", c, f32("b2", c))}), LoopMap::Serial),
                              with_map(for_loop("c", 14, LoopKind::Parallel,
                                                {store("b1", c, call("maximum", DType::F32, {f32("b1", c), f32("b2", add(c, imm(14)))}))}),
                                       LoopMap::Serial),
                              with_map(for_loop("c", 14, LoopKind::Parallel,
                                                {store("b0", c, select(load("b4", DType::Bool, c), f32("b1", c), f32("b3", imm(0))))}),
                                       LoopMap::Serial)}),
                    LoopMap::GpuGridStride)}),
                32);
}

std::vector<Kernel> all_kernels() {
  return {pointwise_kernel(), iota_kernel(), gather_kernel(), block_reduction_kernel(), all_combines_kernel(LoopMap::GpuWarps, LoopMap::GpuLanes),
          all_combines_kernel(LoopMap::GpuBlocks, LoopMap::GpuThreads), scalar_kernel(), atomics_kernel(), row_kernel(1024), row_kernel(1022),
          readback_kernel()};
}

// Pointers are __restrict__ (inputs const) but in a kernel that reads back a buffer it writes:
// there NVVM merged `c ? acc[i] : in[0]` into one read-only (.nc) load that missed the
// kernel's own stores.
TEST(CudaEmitter, NoRestrictWhereAKernelReadsBackWhatItWrites) {
  std::string pw = emit_cuda_kernel(pointwise_kernel()), rb = emit_cuda_kernel(readback_kernel());
  EXPECT_TRUE(has(pw, "float* __restrict__ b0, const float* __restrict__ b1")) << pw;
  EXPECT_TRUE(has(rb, "rb(float* b0, float* b1, const float* b2, const float* b3, const uint8_t* b4)")) << rb;
  EXPECT_FALSE(has(rb, "__restrict__")) << rb;
}

// A lane's share of a row whose accesses are at row * len + r (len a multiple of 4) or at r:
// four consecutive elements per iteration, one 16-byte access per buffer; a row of 1022 stays
// scalar (its rows start off a 16-byte boundary).
TEST(CudaEmitter, RowLoopsUse16ByteVectorsWhenEveryRowIsAligned) {
  std::string k = emit_cuda_kernel(row_kernel(1024));
  EXPECT_TRUE(has(k, "for (int r_vec = threadIdx.x % 32; r_vec < 256; r_vec += 32) {")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 4> b1_v = ((const kiln_vec<float, 4>*)b1)[(row * 1024) / 4 + r_vec];")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 4> b2_v = ((const kiln_vec<float, 4>*)b2)[r_vec];")) << k;
  EXPECT_TRUE(has(k, "s_acc += b1_v.v[3];")) << k;
  EXPECT_TRUE(has(k, "((kiln_vec<float, 4>*)b0)[(row * 1024) / 4 + r_vec] = b0_v;")) << k;
  std::string odd = emit_cuda_kernel(row_kernel(1022));
  EXPECT_FALSE(has(odd, "r_vec")) << odd;
  EXPECT_TRUE(has(odd, "for (int r = threadIdx.x % 32; r < 1022; r += 32) {")) << odd;
}

// A row loop takes 16 bytes of its widest buffer per access: beside f32 rows a bf16 weight is
// read four per 8-byte access. Eight per access (16 bytes of the narrowest, as the grid-stride
// loops do) measured slower on the H100 (bench/NOTES.md, stop 22: a bf16 layer norm 3%, a
// bf16 -> f32 softmax 10%, a layer norm with bf16 weights 18%), so row loops keep this width.
TEST(CudaEmitter, RowLoopsTake16BytesOfTheirWidestBuffer) {
  std::string k = emit_cuda_kernel(row_kernel(1024, DType::BF16));
  EXPECT_TRUE(has(k, "for (int r_vec = threadIdx.x % 32; r_vec < 256; r_vec += 32) {")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<uint16_t, 4> b2_v = ((const kiln_vec<uint16_t, 4>*)b2)[r_vec];")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 4> b1_v = ((const kiln_vec<float, 4>*)b1)[(row * 1024) / 4 + r_vec];")) << k;
}

// A row read twice (the sum pass, then the output pass) is held: each lane loads its 8
// vectors of the row once, at the top of the row, and both passes walk the registers in the
// same order (vector lane + 32 h); the weight b2, read once, still comes from memory.
Kernel held_row_kernel(int64_t len) {
  Kernel k = row_kernel(len);
  k.name = fmt::format("held{}", len);
  choose_vectors(k, 32, vectors_target(0, k.launch.shared_bytes));
  return k;
}

TEST(CudaEmitter, ARowReadTwiceIsHeldInRegisters) {
  Kernel hk = held_row_kernel(1024);
  EXPECT_EQ(hk.schedule.held, std::vector<std::string>{"b1"});
  EXPECT_EQ(hk.schedule.held_elements, 32);
  std::string k = emit_cuda_kernel(hk);
  EXPECT_TRUE(has(k, "kiln_vec<float, 4> b1_held[8];\n    #pragma unroll\n    for (int h = 0; h < 8; ++h) {\n"
                     "      const int held_vq = (int)(threadIdx.x % 32) + h * 32;\n"
                     "      b1_held[h] = ((const kiln_vec<float, 4>*)b1)[(row * 1024) / 4 + held_vq];")) << k;
  EXPECT_TRUE(has(k, "for (int r_h = 0; r_h < 8; ++r_h) {")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 4> b1_v = b1_held[r_h];")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 4> b2_v = ((const kiln_vec<float, 4>*)b2)[r_vec];")) << k;
  EXPECT_TRUE(has(k, "((kiln_vec<float, 4>*)b0)[(row * 1024) / 4 + r_vec] = b0_v;")) << k;
  EXPECT_FALSE(has(k, "b1)[(row * 1024) / 4 + r_vec]")) << "b1 is read from memory once\n" << k;
  // A row of 1022 (no multiple of 4) is held one element per access: 32 per lane, the last
  // iteration cut where the row ends.
  Kernel odd = held_row_kernel(1022);
  EXPECT_EQ(odd.schedule.held_elements, 32);
  std::string o = emit_cuda_kernel(odd);
  EXPECT_TRUE(has(o, "kiln_vec<float, 1> b1_held[32];")) << o;
  EXPECT_TRUE(has(o, "if (held_vq < 1022) b1_held[h] = ((const kiln_vec<float, 1>*)b1)[(row * 1022) / 1 + held_vq];")) << o;
  EXPECT_TRUE(has(o, "if (r_vec >= 1022) break;")) << o;
  // Longer rows than 128 bytes per lane stay in memory.
  Kernel long_row = row_kernel(2048);
  choose_vectors(long_row, 32, vectors_target(0, long_row.launch.shared_bytes));
  EXPECT_TRUE(long_row.schedule.held.empty());
}

// A block's row too long for registers (50257 words: 50 a thread) is held in dynamic shared
// memory: vector h of thread t in slot h * 1024 + t, which only t writes and reads.
Kernel shared_row_kernel() {
  Kernel k = row_kernel(50257, DType::F32, /*block=*/true);
  k.schedule.threads_per_row = 1024;
  choose_vectors(k, 1024, vectors_target(227 * 1024, k.launch.shared_bytes));
  return k;
}

TEST(CudaEmitter, ARowTooLongForRegistersIsHeldInSharedMemory) {
  Kernel sk = shared_row_kernel();
  EXPECT_TRUE(sk.schedule.held_shared);
  EXPECT_EQ(sk.launch.dynamic_shared_bytes, 50 * 1024 * 4);
  std::string k = emit_cuda_kernel(sk);
  EXPECT_TRUE(has(k, "extern __shared__ __align__(16) unsigned char kiln_dynamic_smem[];")) << k;
  EXPECT_TRUE(has(k, "kiln_vec<float, 1>* b1_held = (kiln_vec<float, 1>*)(kiln_dynamic_smem + 0);")) << k;
  EXPECT_TRUE(has(k, "if (held_vq < 50257) b1_held[h * 1024 + threadIdx.x] = ((const kiln_vec<float, 1>*)b1)[(row * 50257) / 1 + held_vq];")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 1> b1_v = b1_held[r_h * 1024 + threadIdx.x];")) << k;
  EXPECT_FALSE(has(k, "__syncthreads")) << "each thread reads back only its own slots\n" << k;
  // With no shared memory to spare the row stays in memory.
  Kernel none = row_kernel(50257, DType::F32, true);
  none.schedule.threads_per_row = 1024;
  choose_vectors(none, 1024, vectors_target(100 * 1024, none.launch.shared_bytes));
  EXPECT_TRUE(none.schedule.held.empty());
  EXPECT_EQ(none.launch.dynamic_shared_bytes, 0);
}

TEST(CudaEmitter, ModuleHasNoIncludesAndOneSignaturePerKernel) {
  std::string m = emit_cuda_module(all_kernels());
  EXPECT_FALSE(has(m, "#include")) << m;
  EXPECT_TRUE(has(m, "extern \"C\" __global__ void __launch_bounds__(256) pw(float* __restrict__ b0, const float* __restrict__ b1, "
                     "const uint16_t* __restrict__ b2) {"))
      << m;
  EXPECT_TRUE(has(m, "// test pw\n"));
  EXPECT_TRUE(has(m, "extern \"C\" {\n__device__ kiln_error_record kiln_error;\n__device__ kiln_error_record* kiln_error_slot = &kiln_error;\n}"));
}

TEST(CudaEmitter, ContiguousGridStrideLoopUses16ByteVectorsAndAScalarTail) {
  std::string k = emit_cuda_kernel(pointwise_kernel());
  // 8 elements per thread (f16 is the narrowest): eight f16 values in one 16-byte load of b2,
  // the f32 buffers b1 and b0 in 32 bytes per thread; two iterations a grid stride apart at
  // once (Target::pointwise_unroll), their loads first, then the rest one at a time.
  EXPECT_TRUE(has(k, "int i_vec_base = (int)(blockIdx.x * blockDim.x + threadIdx.x);")) << k;
  EXPECT_TRUE(has(k, "for (; i_vec_base + 1 * kiln_stride < 128; i_vec_base += 2 * kiln_stride) {")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 8> b1_v1 = ((const kiln_vec<float, 8>*)b1)[i_vec_base + 1 * kiln_stride];")) << k;
  EXPECT_TRUE(has(k, "for (int i_vec = i_vec_base; i_vec < 128; i_vec += kiln_stride) {")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<float, 8> b1_v = ((const kiln_vec<float, 8>*)b1)[i_vec];")) << k;
  EXPECT_TRUE(has(k, "const kiln_vec<uint16_t, 8> b2_v = ((const kiln_vec<uint16_t, 8>*)b2)[i_vec];")) << k;
  EXPECT_TRUE(has(k, "const float x = b1_v.v[7] * kiln_h2f(b2_v.v[7]);")) << k;
  EXPECT_TRUE(has(k, "b0_v.v[7] = kiln_exp(x);")) << k;
  EXPECT_TRUE(has(k, "((kiln_vec<float, 8>*)b0)[i_vec] = b0_v;")) << k;
  // The tail: 1030 = 128 * 8 + 6.
  EXPECT_TRUE(has(k, "for (int i = 1024 + (int)(blockIdx.x * blockDim.x + threadIdx.x); i < 1030; i += (int)(gridDim.x * blockDim.x)) {")) << k;
  EXPECT_TRUE(has(k, "  b0[i] = kiln_exp(x);")) << k;
}

TEST(CudaEmitter, VectorElementsGetTheirOwnIndexWhereAValueUsesIt) {
  std::string c = emit_cuda_kernel(iota_kernel());
  EXPECT_TRUE(has(c, "const kiln_vec<uint16_t, 8> b1_v = ((const kiln_vec<uint16_t, 8>*)b1)[i_vec];")) << c;
  EXPECT_TRUE(has(c, "const int i = i_vec * 8 + 7;")) << c;
  EXPECT_TRUE(has(c, "b0_v.v[7] = kiln_f2bf((float)((float)i + kiln_bf2f(b1_v.v[7])));")) << c;
  EXPECT_FALSE(has(c, "scalar tail")) << "4096 is a whole number of vectors";
}

TEST(CudaEmitter, AShortLaneLoopThatDividesAndWrapsItsIndexIsRolledWithA64BitVariable) {
  // NVRTC 13.0 crashes on `r % 3` beside `r / 3` in a warp's share of a row (three fuzz
  // findings on the H100) unless the loop is rolled and r is 64-bit.
  std::string k = emit_cuda_kernel(div_mod_lane_kernel());
  EXPECT_TRUE(has(k, "#pragma unroll 1\n    for (long long r = threadIdx.x % 32; r < 99; r += 32) {")) << k;
  EXPECT_TRUE(has(k, "for (int row = ")) << "the rows keep a 32-bit variable\n" << k;
  // Only such loops: the rows of a plain reduction still unroll as NVVM likes, and a
  // grid-stride loop that divides and wraps (a transposed copy, x[(i % 7) * 10 + i / 7])
  // keeps its 32-bit variable.
  EXPECT_FALSE(has(emit_cuda_kernel(all_combines_kernel(LoopMap::GpuWarps, LoopMap::GpuLanes)), "#pragma unroll 1"));
  ExprPtr i = var("i", 0, 69);
  Kernel copy = kernel("t", {buf("b0", DType::F32, BufferRole::Output, 70), buf("b1", DType::F32, BufferRole::Input, 70)},
                       with_map(for_loop("i", 70, LoopKind::Parallel,
                                         {store("b0", i, f32("b1", add(mul(mod(i, imm(7)), imm(10)), floordiv(i, imm(7)))))}),
                                LoopMap::GpuGridStride),
                       256);
  std::string t = emit_cuda_kernel(copy);
  EXPECT_TRUE(has(t, "b1[(i % 7) * 10 + (i / 7)]")) << t;
  EXPECT_FALSE(has(t, "long long")) << t;
}

// What reads W consecutive elements for W consecutive values of the loop variable, from a
// multiple of W (codegen/vectorize.h): v, a row broadcast, a head permute whose runs are a
// multiple of W; not a shift off the grid, a stride, a run shorter than W, or a gather.
TEST(Vectorize, LaneContiguousIndices) {
  ExprPtr i = var("i", 0, 16383);
  // [2, 32, 4, 64] read as [2, 4, 32, 64]: b[(i / 8192) * 8192 + (i / 64 % 32) * 256 + (i / 2048 % 4) * 64 + i % 64]
  ExprPtr permuted = add(add(add(mul(floordiv(i, imm(8192)), imm(8192)), mul(mod(floordiv(i, imm(64)), imm(32)), imm(256))),
                             mul(mod(floordiv(i, imm(2048)), imm(4)), imm(64))),
                         mod(i, imm(64)));
  EXPECT_TRUE(lane_contiguous(i, "i", 8));
  EXPECT_TRUE(lane_contiguous(mod(i, imm(96)), "i", 8));
  EXPECT_TRUE(lane_contiguous(permuted, "i", 8));
  EXPECT_TRUE(lane_contiguous(add(i, imm(32)), "i", 8));
  EXPECT_FALSE(lane_contiguous(add(i, imm(3)), "i", 8)) << "off the 16-byte grid";
  EXPECT_FALSE(lane_contiguous(mul(i, imm(2)), "i", 8)) << "strided";
  EXPECT_FALSE(lane_contiguous(mod(i, imm(12)), "i", 8)) << "runs of 12 are no multiple of 8";
  EXPECT_TRUE(lane_contiguous(mod(i, imm(12)), "i", 4));
  EXPECT_FALSE(lane_contiguous(mul(floordiv(i, imm(8)), imm(8)), "i", 8)) << "the same element 8 times";
  EXPECT_FALSE(lane_contiguous(load("b2", DType::I32, i), "i", 8)) << "a gather";
  EXPECT_TRUE(lane_contiguous(add(mul(load("b2", DType::I32, floordiv(i, imm(64))), imm(64)), mod(i, imm(64))), "i", 8))
      << "a gather of whole rows of 64";
}

// A permuted copy (attention's heads moved beside the sequence) reads 16-byte vectors at the
// permuted position; a rotation's halves (RoPE: x[d + 32] for d < 32, else x[d - 32]) read
// each half as vectors under the select that picks it, zeros elsewhere.
TEST(CudaEmitter, PermutedCopiesAndRotatedHalvesUse16ByteVectors) {
  ExprPtr i = var("i", 0, 16383);
  auto at = [&](ExprPtr d) {  // [2, 4, 32, 64] read as [2, 32, 4, 64], d the position in a head
    return add(add(add(mul(floordiv(i, imm(8192)), imm(8192)), mul(mod(floordiv(i, imm(64)), imm(32)), imm(256))),
                   mul(mod(floordiv(i, imm(2048)), imm(4)), imm(64))),
               std::move(d));
  };
  ExprPtr d = mod(i, imm(64));
  ExprPtr first_half = call("lt", DType::Bool, {d, imm(32)});
  ExprPtr rotated = select(first_half, call("neg", DType::F32, {f32("b1", at(add(d, imm(32))))}), f32("b1", at(sub(d, imm(32)))));
  Kernel k = kernel("rope", {buf("b0", DType::F32, BufferRole::Output, 16384), buf("b1", DType::F32, BufferRole::Input, 16384)},
                    block({with_map(for_loop("i", 16384, LoopKind::Parallel, {store("b0", i, add(f32("b1", at(d)), rotated))}),
                                    LoopMap::GpuGridStride)}),
                    256);
  std::string c = emit_cuda_kernel(k);
  EXPECT_TRUE(has(c, "4 elements per thread per iteration")) << c;
  EXPECT_TRUE(has(c, "const kiln_vec<float, 4> b1_v = ((const kiln_vec<float, 4>*)b1)[")) << c;
  EXPECT_TRUE(has(c, "const kiln_vec<float, 4> b1_f1_v = (((i_vec * 4) % 64) < 32) ? ((const kiln_vec<float, 4>*)b1)[")) << c;
  EXPECT_TRUE(has(c, "const kiln_vec<float, 4> b1_f2_v = !(((i_vec * 4) % 64) < 32) ? ((const kiln_vec<float, 4>*)b1)[")) << c;
  EXPECT_TRUE(has(c, ": kiln_vec<float, 4>{};")) << c;
  EXPECT_FALSE(has(c, "b1[")) << "every read is a vector\n" << c;
  // A rotation of halves of 2 (a head of 4) varies within a vector of 4: the loop stays scalar.
  ExprPtr d4 = mod(i, imm(4));
  ExprPtr small = select(call("lt", DType::Bool, {d4, imm(2)}), f32("b1", add(i, imm(2))), f32("b1", sub(i, imm(2))));
  Kernel k4 = kernel("rope4", {buf("b0", DType::F32, BufferRole::Output, 16384), buf("b1", DType::F32, BufferRole::Input, 16384)},
                     block({with_map(for_loop("i", 16384, LoopKind::Parallel, {store("b0", i, small)}), LoopMap::GpuGridStride)}), 256);
  EXPECT_FALSE(has(emit_cuda_kernel(k4), "kiln_vec"));
}

TEST(CudaEmitter, GatherStaysAScalarGridStrideLoopWith64BitIndices) {
  std::string k = emit_cuda_kernel(gather_kernel());
  EXPECT_FALSE(has(k, "kiln_vec")) << k;
  EXPECT_TRUE(has(k, "for (long long i = (long long)(blockIdx.x * blockDim.x + threadIdx.x); i < 100; i += (long long)(gridDim.x * blockDim.x)) {"))
      << k;
  EXPECT_TRUE(has(k, "b0[i] = b1[kiln_check_index(b2[i], 10, 0)];")) << k;
}

TEST(CudaEmitter, BlockReductionCombinesThroughSharedMemoryAndThreadZeroStores) {
  Kernel kr = block_reduction_kernel();
  std::string k = emit_cuda_kernel(kr);
  EXPECT_TRUE(has(k, "__shared__ float kiln_smem_f32[33];")) << k;
  EXPECT_TRUE(has(k, "__shared__ int64_t kiln_smem_idx[33];")) << k;
  EXPECT_EQ(kr.launch.shared_bytes, 33 * 4 + 33 * 8);
  EXPECT_TRUE(has(k, "for (int row = blockIdx.x; row < 7; row += gridDim.x) {")) << k;
  EXPECT_TRUE(has(k, "for (int r = threadIdx.x; r < 1023; r += blockDim.x) {")) << k;
  EXPECT_TRUE(has(k, "m_acc = kiln_max_step(m_acc, b3[row * 1023 + r]);")) << k;  // the plain NaN-winning step
  EXPECT_TRUE(has(k, "if (kiln_argmax_wins(v_, a_acc)) { a_acc = v_; a_acc_idx = r; }")) << k;
  EXPECT_TRUE(has(k, "s_acc = kiln_block_combine(s_acc, kiln_sum_op(), kiln_smem_f32);")) << k;
  EXPECT_TRUE(has(k, "m_acc = kiln_block_combine(m_acc, kiln_max_op(), kiln_smem_f32);")) << k;
  EXPECT_TRUE(has(k, "kiln_block_pair(a_acc, a_acc_idx, kiln_smem_f32, kiln_smem_idx, kiln_argmax_merge_op());")) << k;
  EXPECT_TRUE(has(k, "if (threadIdx.x == 0) b0[row] = s_acc;")) << k;
  EXPECT_TRUE(has(k, "if (threadIdx.x == 0) b2[row] = a_acc_idx;")) << k;
  std::string m = emit_cuda_module({kr});
  EXPECT_TRUE(has(m, "__syncthreads();")) << "the block combine of the prelude";
}

TEST(CudaEmitter, WarpReductionCombinesThroughShufflesAndLaneZeroStores) {
  std::string k = emit_cuda_kernel(all_combines_kernel(LoopMap::GpuWarps, LoopMap::GpuLanes));
  EXPECT_TRUE(has(k, "for (int row = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32); row < 100; row += (int)(gridDim.x * (blockDim.x / 32))) {"))
      << k;
  EXPECT_TRUE(has(k, "for (int r = threadIdx.x % 32; r < 64; r += 32) {")) << k;
  EXPECT_TRUE(has(k, "acc0 = kiln_warp_combine(acc0, kiln_sum_op());")) << k;
  EXPECT_TRUE(has(k, "kiln_warp_pair(acc4, acc4_idx, kiln_argmax_merge_op());")) << k;
  EXPECT_TRUE(has(k, "if ((threadIdx.x & 31) == 0) out0[row] = acc0;")) << k;
  EXPECT_FALSE(has(k, "__shared__")) << k;
  EXPECT_TRUE(has(std::string(cuda_prelude()), "__shfl_down_sync(0xffffffffu, v, o)"));
  EXPECT_TRUE(has(std::string(cuda_prelude()), "__shfl_sync(0xffffffffu, kiln_warp_tree(v, op, 32), 0)"));
}

TEST(CudaEmitter, AccumulatorsStartAtIdentitiesWrittenWithoutLibraryMacros) {
  std::string k = emit_cuda_kernel(all_combines_kernel(LoopMap::GpuBlocks, LoopMap::GpuThreads));
  EXPECT_TRUE(has(k, "float acc2 = -KILN_INFF;")) << k;
  EXPECT_TRUE(has(k, "double acc8 = KILN_INF;")) << k;
  EXPECT_TRUE(has(k, "int64_t acc12 = (-9223372036854775807LL - 1);")) << k;
  EXPECT_TRUE(has(k, "acc11 = kiln_wrap_mul(acc11, in_i64[row * 64 + r]);")) << k;
  EXPECT_TRUE(has(k, "__shared__ double kiln_smem_f64[33];")) << k;
  EXPECT_TRUE(has(k, "__shared__ int64_t kiln_smem_i64[33];")) << k;
}

TEST(CudaEmitter, StatementsOutsideGridLoopsStoreFromOneThread) {
  std::string k = emit_cuda_kernel(scalar_kernel());
  EXPECT_TRUE(has(k, "__launch_bounds__(1)")) << k;
  EXPECT_TRUE(has(k, "const float v = kiln_round_f16((float)kiln_sqrt(kiln_h2f(b1[0])));")) << k;
  EXPECT_TRUE(has(k, "if (blockIdx.x == 0 && threadIdx.x == 0) b0[0] = kiln_f2h(v);")) << k;
}

TEST(CudaEmitter, IntegerAtomicsAndBarriers) {
  std::string k = emit_cuda_kernel(atomics_kernel());
  EXPECT_TRUE(has(k, "atomicAdd((int*)&b0[b2[i]], (int)1);")) << k;
  EXPECT_TRUE(has(k, "atomicAdd((unsigned long long*)&b1[0], (unsigned long long)b2[i]);")) << k;
  EXPECT_TRUE(has(k, "__syncthreads();")) << k;
  EXPECT_TRUE(has(k, "if (threadIdx.x == 0) atomicAdd((int*)&b0[p], (int)2);")) << k;
}

TEST(CudaEmitter, RefusesUnscheduledAndCpuKernels) {
  Kernel k = pointwise_kernel();
  k.body = for_loop("i", 10, LoopKind::Parallel, {});
  EXPECT_THROW(emit_cuda_kernel(k), InternalError);
  k.body = with_map(k.body, LoopMap::CpuThreads, 4);
  EXPECT_THROW(emit_cuda_kernel(k), InternalError);
}

TEST(CppEmitter, ObeysLoopMapsAndRefusesGpuKernels) {
  ExprPtr i = var("i", 0, 99);
  Kernel k = kernel("hist", {buf("b0", DType::I64, BufferRole::Output, 100), buf("b1", DType::I64, BufferRole::Input, 100)},
                    with_map(for_loop("i", 100, LoopKind::Parallel, {atomic_add("b0", load("b1", DType::I64, i), imm(1))}), LoopMap::CpuThreads, 64),
                    1);
  std::string c = emit_cpp_kernel(k);
  EXPECT_TRUE(has(c, "kiln_parallel(100, 64, [&](int64_t i_begin, int64_t i_end) {")) << c;
  EXPECT_TRUE(has(c, "__atomic_fetch_add(&b0[b1[i]], 1, __ATOMIC_RELAXED);")) << c;
  k.body = with_map(k.body, LoopMap::CpuVector);
  EXPECT_TRUE(has(emit_cpp_kernel(k), "  for (int64_t i = 0; i < 100; ++i) {"));
  k.body = with_map(k.body, LoopMap::Unmapped);
  EXPECT_THROW(emit_cpp_kernel(k), InternalError);
  EXPECT_THROW(emit_cpp_kernel(block_reduction_kernel()), InternalError);
}

// The same row on sm_90: a thread-block cluster of 8 blocks of 256 threads per row, each
// thread 25 words in registers; the block combine, then the cluster's through distributed
// shared memory.
Kernel cluster_row_kernel() {
  Kernel k = row_kernel(50257, DType::F32, /*block=*/true);
  k.schedule.threads_per_row = 1024;
  choose_vectors(k, 1024, vectors_target(0, k.launch.shared_bytes, /*clusters=*/true));
  return k;
}

TEST(CudaEmitter, ARowSharedByAClusterCombinesThroughDistributedSharedMemory) {
  Kernel ck = cluster_row_kernel();
  EXPECT_EQ(ck.launch.cluster, 8);
  EXPECT_EQ(ck.launch.block, 256);
  std::string k = emit_cuda_kernel(ck);
  EXPECT_TRUE(has(k, "extern \"C\" __global__ void __cluster_dims__(8, 1, 1) __launch_bounds__(256) blockrow50257(")) << k;
  EXPECT_TRUE(has(k, "const unsigned kiln_crank = kiln_cluster_rank();")) << k;
  EXPECT_TRUE(has(k, "for (int row = blockIdx.x / 8; row < 64; row += gridDim.x / 8) {")) << k;
  EXPECT_TRUE(has(k, "const int held_vq = (int)((kiln_crank * blockDim.x + threadIdx.x)) + h * 2048;")) << k;
  EXPECT_TRUE(has(k, "s_acc = kiln_cluster_combine(s_acc, kiln_sum_op(), kiln_smem_f32, 8);")) << k;
  EXPECT_FALSE(has(k, "kiln_block_combine")) << k;
}

// A warp's row of 256 floats (8 a lane, 32 bytes: within a Target::row_prefetch_bytes_per_thread of 32)
// is loaded one row ahead: the warp's first row before the loop, each next row's loads issued
// at the top of this one, so that they are in flight through its shuffles and arithmetic.
TEST(CudaEmitter, ARowLoopLoadsItsNextHeldRowWhileThisOneComputes) {
  Kernel ahead = row_kernel(256);
  ahead.name = "held256";
  Target with = vectors_target(0, ahead.launch.shared_bytes);
  with.row_prefetch_bytes_per_thread = 32;  // (off by default: stop 40)
  choose_vectors(ahead, 32, with);
  std::string k = emit_cuda_kernel(ahead);
  EXPECT_TRUE(has(k, "kiln_vec<float, 4> b1_next[2];")) << k;
  EXPECT_TRUE(has(k, "const int row_first = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32);\n    if (row_first < 64) {")) << k;
  EXPECT_TRUE(has(k, "for (int h = 0; h < 2; ++h) b1_held[h] = b1_next[h];")) << k;
  EXPECT_TRUE(has(k, "const int row_next = row + (int)(gridDim.x * (blockDim.x / 32));\n      if (row_next < 64) {")) << k;
  EXPECT_TRUE(has(k, "b1_next[h] = ((const kiln_vec<float, 4>*)b1)[(row_next * 256) / 4 + held_vq];")) << k;
  EXPECT_LT(k.find("row_next < 64"), k.find("s_acc +=")) << k;
  // The budget at 0: the row is held, not loaded ahead.
  Kernel off = row_kernel(256);
  Target t = vectors_target(0, off.launch.shared_bytes);
  t.row_prefetch_bytes_per_thread = 0;
  choose_vectors(off, 32, t);
  std::string o = emit_cuda_kernel(off);
  EXPECT_TRUE(has(o, "kiln_vec<float, 4> b1_held[2];")) << o;
  EXPECT_FALSE(has(o, "_next")) << o;
}

// A value rounded to bf16 (a cast) is stored by its top 16 bits: a second rounding (a cvt) would
// give the same bits.
TEST(CudaEmitter, AValueRoundedToBf16IsStoredByItsBits) {
  ExprPtr i = var("i", 0, 63);
  Kernel k;
  k.name = "bfstore";
  k.buffers = {buf("b0", DType::BF16, BufferRole::Output, 64), buf("b1", DType::F32, BufferRole::Input, 64)};
  k.body = block({for_loop("i", 64, LoopKind::Parallel,
                           {let("y", cast(DType::BF16, call("exp", DType::F32, {load("b1", DType::F32, i)}))),
                            store("b0", i, value_var("y", DType::BF16)), store("b0", i, cast(DType::BF16, load("b1", DType::F32, i)))})});
  schedule(k, cuda_target());
  std::string c = emit_cuda_kernel(k);
  EXPECT_TRUE(has(c, "const float y = kiln_round_bf16((float)kiln_exp_approx(b1_v.v[0]));")) << c;
  EXPECT_TRUE(has(c, "b0_v.v[0] = kiln_bf16_bits(y);")) << c;
  // A cast stored at once rounds once, by the store's conversion.
  EXPECT_TRUE(has(c, "b0_v.v[0] = kiln_f2bf((float)b1_v.v[0]);")) << c;
  EXPECT_FALSE(has(c, "kiln_f2bf(kiln_round_bf16")) << c;
}

TEST(CudaEmitter, AConstantTableWithNaNOrInfinityIsNotStatic) {
  // CUDA 13's NVRTC refuses a function-scope static initialized with __int_as_float (the H200
  // run of tools/torch_check's special_values.kir, stop 34); finite tables stay static.
  ExprPtr i = var("i", 0, 2);
  Kernel k;
  k.name = "consts";
  k.buffers = {buf("b0", DType::F32, BufferRole::Output, 3)};
  Buffer special{"c0", DType::F32, BufferRole::Constant, 3, {std::nan(""), INFINITY, 1.0}, "%special"};
  Buffer finite{"c1", DType::F32, BufferRole::Constant, 3, {0.5, -2.0, 1.0}, "%finite"};
  k.constants = {special, finite};
  k.body = block({for_loop("i", 3, LoopKind::Parallel, {store("b0", i, add(load("c0", DType::F32, i), load("c1", DType::F32, i)))})});
  schedule(k, cuda_target());
  std::string c = emit_cuda_kernel(k);
  EXPECT_TRUE(has(c, "  const float c0[3] = {KILN_NANF, KILN_INFF, 1.0f};")) << c;
  EXPECT_TRUE(has(c, "static const float c1[3]")) << c;
}

// A transposed f16 read into an f32 output over odd [37, 45], scheduled: tiles through
// registers and shared memory, the next tile read while this one computes, the edge tiles
// guarded, both phases unrolled over the block's 4 elements a thread.
Kernel tiled_transpose_kernel() {
  ExprPtr i = var("i", 0, 37 * 45 - 1);
  ExprPtr xt = load("b1", DType::F16, add(mul(mod(i, imm(45)), imm(37)), floordiv(i, imm(45))));
  Kernel k;
  k.name = "tt";
  k.buffers = {buf("b0", DType::F32, BufferRole::Output, 37 * 45), buf("b1", DType::F16, BufferRole::Input, 37 * 45)};
  k.body = block({for_loop("i", 37 * 45, LoopKind::Parallel, {store("b0", i, call("exp", DType::F32, {cast(DType::F32, xt)}))})});
  schedule(k, cuda_target());
  return k;
}

TEST(CudaEmitter, TransposedReadsGoThroughSharedMemoryTiles) {
  std::string c = emit_cuda_kernel(tiled_transpose_kernel());
  EXPECT_TRUE(has(c, "__shared__ uint16_t b1_tile0[1056];")) << c;
  EXPECT_TRUE(has(c, "for (int i_tile = blockIdx.x; i_tile < 4; i_tile += gridDim.x) {")) << c;
  // The loop variable as row and column, clamped at the view's edge (37 x 45 is not whole
  // tiles); each index in the buffer's own strides, no division or remainder per element.
  // Element thread + 256 k of a tile: its row and column of the view as expressions of the
  // thread and k (the thread's own column, 8 rows further each k), clamped at the view's edge
  // (37 x 45 is not whole tiles); each index in the buffer's own strides.
  EXPECT_TRUE(has(c, "const int i_t = threadIdx.x;")) << c;
  EXPECT_TRUE(has(c, "const int i_lr = min(i_r0 + (i_t % 32), (int)36), i_lc = min(i_k * 8 + i_c0 + (i_t / 32), (int)44);")) << c;
  EXPECT_TRUE(has(c, "uint16_t b1_tile0_next[4];")) << c;
  EXPECT_TRUE(has(c, "b1_tile0_next[i_k] = b1[i_lc * 37 + i_lr];")) << c;
  EXPECT_TRUE(has(c, "b0[i_r * 45 + i_c] = ")) << c;
  EXPECT_FALSE(has(c, "const int i =")) << c;
  EXPECT_TRUE(has(c, "b1_tile0[i_k * 264 + ((i_t / 32) * 33) + (i_t % 32)] = b1_tile0_next[i_k];")) << c;
  EXPECT_TRUE(has(c, "const int i_r = i_k * 8 + i_r0 + (i_t / 32), i_c = i_c0 + (i_t % 32);")) << c;
  // The next tile's loads are issued after the barrier, before this tile's body.
  EXPECT_LT(c.find("const int i_tile_next = i_tile + gridDim.x;"), c.find("if (i_r < 37 && i_c < 45) {")) << c;
  EXPECT_TRUE(has(c, "if (i_r < 37 && i_c < 45) {")) << c;
  EXPECT_TRUE(has(c, "kiln_h2f(b1_tile0[(i_t % 32) * 33 + (i_k * 8) + (i_t / 32)])")) << c;
  EXPECT_TRUE(has(c, "for (int i_k = 0; i_k < 4; ++i_k) {")) << c;
  EXPECT_FALSE(has(c, "i_e")) << c;
}

#if KILN_HAVE_CUDA
// Every module compiles with NVRTC for both architectures, with an empty log (no warnings).
TEST(CudaEmitter, ModulesCompileWithNvrtc) {
  runtime::cuda::NvrtcOptions o;
  o.use_cache = false;
  std::vector<Kernel> kernels = all_kernels();
  kernels.push_back(held_row_kernel(1024));
  kernels.push_back(held_row_kernel(1022));
  kernels.push_back(tiled_transpose_kernel());
  kernels.push_back(held_row_kernel(256));
  kernels.push_back(shared_row_kernel());
  std::string m = emit_cuda_module(kernels);
  for (const char* arch : {"sm_80", "sm_90"}) {
    o.arch = arch;
    runtime::cuda::NvrtcOutput out;
    ASSERT_NO_THROW(out = runtime::cuda::compile_cuda(m, "test_cuda_emitter", o)) << arch;
    EXPECT_FALSE(out.cubin.empty()) << arch;
    EXPECT_FALSE(has(out.log, "warning")) << arch << ":\n" << out.log;
  }
  // One kernel alone with the prelude (how the backend compiles them, one program each).
  for (const Kernel& k : kernels)
    EXPECT_NO_THROW(runtime::cuda::compile_cuda(std::string(cuda_prelude()) + "\n" + emit_cuda_kernel(k), k.name, o)) << k.name;
}

// Cluster kernels compile for sm_90 (the schedule picks them there only), their distributed
// shared memory reads and cluster barriers in the PTX.
TEST(CudaEmitter, ClusterKernelsCompileForSm90) {
  runtime::cuda::NvrtcOptions o;
  o.use_cache = false;
  o.arch = "sm_90";
  runtime::cuda::NvrtcOutput out;
  ASSERT_NO_THROW(out = runtime::cuda::compile_cuda(emit_cuda_module({cluster_row_kernel()}), "cluster", o));
  EXPECT_FALSE(out.cubin.empty());
  EXPECT_FALSE(has(out.log, "warning")) << out.log;
  if (out.ptx.empty()) GTEST_SKIP() << "this NVRTC gives no PTX for a real architecture";
  EXPECT_TRUE(has(out.ptx, "ld.shared::cluster")) << out.ptx;
  EXPECT_TRUE(has(out.ptx, "barrier.cluster.wait")) << out.ptx;
}

// The read-back kernel's PTX reads nothing through the read-only path: every load of the temp
// (and the select between it and an input) is coherent with the kernel's own stores.
TEST(CudaEmitter, AKernelThatReadsBackWhatItWritesUsesNoReadOnlyLoads) {
  runtime::cuda::NvrtcOptions o;
  o.use_cache = false;
  runtime::cuda::NvrtcOutput out = runtime::cuda::compile_cuda(emit_cuda_module({readback_kernel()}), "rb", o);
  if (out.ptx.empty()) GTEST_SKIP() << "this NVRTC gives no PTX for a real architecture";
  EXPECT_FALSE(has(out.ptx, "ld.global.nc")) << out.ptx;
}

// NVRTC 13.0 died with SIGSEGV on this kernel (the test process with it); 11.8 and 13.0
// compile it as emitted now, rolled with a 64-bit variable. Runs wherever NVRTC is, GPU or not.
TEST(CudaEmitter, TheKernelThatCrashedNvrtc13Compiles) {
  runtime::cuda::NvrtcOptions o;
  o.use_cache = false;
  runtime::cuda::NvrtcOutput out = runtime::cuda::compile_cuda(emit_cuda_module({div_mod_lane_kernel()}), "k34", o);
  EXPECT_FALSE(out.cubin.empty());
}

TEST(CudaEmitter, VectorizedLoopCompilesTo16ByteAccesses) {
  runtime::cuda::NvrtcOptions o;
  o.use_cache = false;
  runtime::cuda::NvrtcOutput out = runtime::cuda::compile_cuda(emit_cuda_module({pointwise_kernel()}), "pw", o);
  if (out.ptx.empty()) GTEST_SKIP() << "this NVRTC gives no PTX for a real architecture";
  auto count = [&](const std::string& what) {
    size_t n = 0;
    for (size_t at = out.ptx.find(what); at != std::string::npos; at = out.ptx.find(what, at + 1)) ++n;
    return n;
  };
  // Per thread and iteration, 8 elements: the f32 input and output in two 16-byte accesses
  // each, the f16 input's eight values in one (as 4 x 32 bits), in each of three copies (two
  // iterations at once, Target::pointwise_unroll, then one at a time); the scalar tail reads one f16.
  EXPECT_EQ(count("ld.global.nc.v4.f32"), 6u) << out.ptx;
  EXPECT_EQ(count("st.global.v4.f32"), 6u) << out.ptx;
  EXPECT_EQ(count("ld.global.nc.v4.u32"), 3u) << out.ptx;
  EXPECT_EQ(count("ld.global.nc.u16"), 1u) << "the tail only:\n" << out.ptx;
}
#endif

}  // namespace
}  // namespace kiln::codegen
