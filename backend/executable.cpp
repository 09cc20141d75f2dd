// Executable::run: binds buffers (graph inputs in place, intermediates in one arena, outputs
// in the tensors returned) and runs the schedule step by step.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "backend/cpu_compile.h"
#include "backend/executable_state.h"
#include "ir/error.h"
#include "runtime/cpu/blas.h"
#include "runtime/cpu/kernel_abi.h"

namespace kiln::backend {

namespace {

using codegen::GraphBuffer;
using codegen::MatmulCall;

// A copy of `t` laid out as `meta` says (its strides, offset 0) when the graph input is
// declared with a non-contiguous layout; the storage spans the strided extent.
HostTensor relayout(const HostTensor& t, const TensorMeta& meta, int64_t extent) {
  HostTensor flat = HostTensor::empty(meta.dtype, {extent});
  HostTensor src = t.contiguous();
  int64_t size = dtype_size(meta.dtype);
  const auto* from = static_cast<const std::byte*>(src.data());
  auto* to = static_cast<std::byte*>(flat.data());
  std::vector<int64_t> idx(meta.shape.size(), 0);
  for (int64_t i = 0; i < meta.numel(); ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * meta.strides[d];
    std::memcpy(to + off * size, from + i * size, static_cast<size_t>(size));
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < meta.shape[d]) break;
      idx[d] = 0;
    }
  }
  return flat;
}

// Integer matmul (BLAS has none): exact in int64 with wrap-around, as the reference.
template <class T>
void int_matmul(const MatmulCall& mm, const T* a, const T* b, T* c) {
  for (int64_t bi = 0; bi < mm.batch; ++bi) {
    const T* A = a + bi * mm.a_batch_stride;
    const T* B = b + bi * mm.b_batch_stride;
    T* C = c + bi * mm.m * mm.n;
    for (int64_t i = 0; i < mm.m; ++i)
      for (int64_t j = 0; j < mm.n; ++j) {
        uint64_t acc = 0;
        for (int64_t p = 0; p < mm.k; ++p) {
          int64_t x = mm.trans_a ? A[p * mm.m + i] : A[i * mm.k + p];
          int64_t y = mm.trans_b ? B[j * mm.k + p] : B[p * mm.n + j];
          acc += static_cast<uint64_t>(x) * static_cast<uint64_t>(y);
        }
        C[i * mm.n + j] = static_cast<T>(static_cast<int64_t>(acc));
      }
  }
}

void run_matmul(const MatmulCall& mm, const void* a, const void* b, void* c) {
  int64_t out_bytes = mm.batch * mm.m * mm.n * dtype_size(mm.dtype);
  if (out_bytes == 0) return;
  if (mm.k == 0) {
    std::memset(c, 0, static_cast<size_t>(out_bytes));
    return;
  }
  switch (mm.dtype) {
    case DType::I64: return int_matmul(mm, static_cast<const int64_t*>(a), static_cast<const int64_t*>(b), static_cast<int64_t*>(c));
    case DType::I32: return int_matmul(mm, static_cast<const int32_t*>(a), static_cast<const int32_t*>(b), static_cast<int32_t*>(c));
    case DType::Bool: fail("matmul of bool tensors is not supported by the CPU backend ({})", mm.label);
    default: break;
  }
  int64_t lda = mm.trans_a ? mm.m : mm.k, ldb = mm.trans_b ? mm.k : mm.n;
  runtime::cpu::gemm_strided_batched(mm.dtype, mm.trans_a, mm.trans_b, mm.m, mm.n, mm.k, 1.0, a, lda, mm.a_batch_stride, b, ldb,
                                     mm.b_batch_stride, 0.0, c, mm.n, mm.m * mm.n, mm.batch);
}

}  // namespace

const codegen::LoweredGraph& Executable::lowered() const {
  KILN_INTERNAL_ASSERT(s_, "an Executable comes from compile_cpu");
  return s_->lowered;
}
const std::string& Executable::source() const {
  KILN_INTERNAL_ASSERT(s_, "an Executable comes from compile_cpu");
  return s_->source;
}

std::vector<HostTensor> Executable::run(std::span<const HostTensor> inputs) const {
  if (!s_) fail("this executable was not compiled (default-constructed Executable)");
  const ExecutableState& s = *s_;
  const codegen::LoweredGraph& lg = s.lowered;
  if (inputs.size() != s.input_metas.size())
    fail("graph {} takes {} input{}, got {}", s.graph_name, s.input_metas.size(), s.input_metas.size() == 1 ? "" : "s", inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorMeta& want = s.input_metas[i];
    if (!inputs[i].defined()) fail("input {} (%{}) of graph {} is an undefined tensor", i, s.input_names[i], s.graph_name);
    if (inputs[i].dtype() != want.dtype || inputs[i].shape() != want.shape)
      fail("input {} (%{}) of graph {}: expected {}{}, got {}{}", i, s.input_names[i], s.graph_name, dtype_name(want.dtype),
           shape_str(want.shape), dtype_name(inputs[i].dtype()), shape_str(inputs[i].shape()));
  }

  std::vector<void*> ptr(lg.buffers.size(), nullptr);
  std::vector<HostTensor> keep;  // relaid-out inputs
  std::vector<std::byte> arena_storage(static_cast<size_t>(s.arena_bytes + 64));
  auto base = reinterpret_cast<uintptr_t>(arena_storage.data());
  std::byte* arena = arena_storage.data() + ((64 - base % 64) % 64);
  std::vector<HostTensor> outputs(lg.outputs.size());
  for (size_t o = 0; o < lg.outputs.size(); ++o) {
    int b = lg.outputs[o];
    if (ptr[b]) {
      outputs[o] = outputs[std::find(lg.outputs.begin(), lg.outputs.end(), b) - lg.outputs.begin()];
      continue;
    }
    outputs[o] = HostTensor::empty(lg.buffers[b].meta.contiguous());
    ptr[b] = outputs[o].data();
  }
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    const GraphBuffer& gb = lg.buffers[b];
    if (ptr[b]) continue;
    if (gb.kind == GraphBuffer::Kind::Arena) {
      ptr[b] = arena + gb.offset;
      continue;
    }
    const HostTensor& t = inputs[static_cast<size_t>(gb.input_index)];
    if (gb.meta.is_contiguous() && t.is_contiguous()) {
      ptr[b] = const_cast<void*>(t.data());  // kernels only read inputs
    } else {
      keep.push_back(relayout(t, gb.meta, gb.numel));
      ptr[b] = keep.back().data();
    }
  }

  runtime::cpu::take_kernel_error();  // a stale report from an earlier failed run is not ours
  std::vector<void*> args;
  for (const codegen::Step& step : lg.steps) {
    if (step.kind == codegen::Step::Kind::Matmul) {
      const MatmulCall& mm = step.matmul;
      run_matmul(mm, ptr[mm.a], ptr[mm.b], ptr[mm.out]);
      continue;
    }
    args.clear();
    for (int b : step.args) args.push_back(ptr[b]);
    s.kernels[step.kernel](args.data(), nullptr);
    if (auto err = runtime::cpu::take_kernel_error()) {
      const codegen::Kernel& k = lg.kernels[step.kernel];
      fail("graph {}: kernel {} ({}): {}", s.graph_name, k.name, k.comment, *err);
    }
  }
  // Outputs returned twice share storage in the arena-free buffers: give each its own copy.
  for (size_t o = 1; o < outputs.size(); ++o)
    for (size_t p = 0; p < o; ++p)
      if (lg.outputs[o] == lg.outputs[p]) {
        outputs[o] = outputs[p].clone();
        break;
      }
  return outputs;
}

}  // namespace kiln::backend
