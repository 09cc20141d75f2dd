#include "codegen/cpp_emitter.h"

#include <fmt/format.h>

#include <algorithm>

#include "codegen/attention.h"
#include "codegen/sort.h"
#include "codegen/c_family.h"
#include "ir/error.h"

namespace kiln::codegen {

namespace {

bool only_sums(const StmtPtr& loop) {
  bool any = false, ok = true;
  visit(loop, [&](const Stmt& s) {
    if (s.kind != StmtKind::Accumulate) return;
    any = true;
    ok = ok && (s.combine == CombineOp::Sum || s.combine == CombineOp::Prod) && is_floating(s.dtype);
  });
  return any && ok;
}

class CppEmitter : public CEmitter {
 public:
  CppEmitter() : CEmitter(cpp_dialect()) {}

 protected:
  void loop(const StmtPtr& s, int ind) override {
    KILN_INTERNAL_ASSERT(s->map != LoopMap::Unmapped, "the kernel was scheduled (codegen/schedule.h) before the C++ emitter ran");
    KILN_INTERNAL_ASSERT(!is_gpu_map(s->map), "the C++ emitter is given a CPU kernel, not a GPU-mapped one");
    if (!s->comment.empty()) line(ind, "// " + s->comment);
    // A loop run in chunks on the pool (the schedule's grain): each chunk is one plain loop
    // over [begin, end) that clang may vectorize; n <= grain runs inline.
    if (s->map == LoopMap::CpuThreads) {
      line(ind, fmt::format("kiln_parallel({}, {}, [&](int64_t {}_begin, int64_t {}_end) {{", s->extent, s->grain, s->name, s->name));
      line(ind + 1, fmt::format("for (int64_t {0} = {0}_begin; {0} < {0}_end; ++{0}) {{", s->name));
      body(s, ind + 2);
      line(ind + 1, "}");
      line(ind, "});");
      return;
    }
    // Serial and CpuVector: a plain counted loop, left to clang's cost model (a forced
    // `vectorize(enable)` only adds warnings where it cannot). Sums and products may
    // reassociate here — the one place they may — so that clang vectorizes them without
    // -ffast-math.
    bool reassoc = only_sums(s);
    int body_ind = ind;
    if (reassoc) {
      line(ind, "{");
      line(ind + 1, "#pragma clang fp reassociate(on)");
      body_ind = ind + 1;
    }
    line(body_ind, fmt::format("for (int64_t {0} = 0; {0} < {1}; ++{0}) {{", s->name, s->extent));
    body(s, body_ind + 1);
    line(body_ind, "}");
    if (reassoc) line(ind, "}");
    finish_order_keys(s, ind);
  }

  void atomic_add(const StmtPtr& s, int ind) override {
    // Integers only (the verifier rejects float atomics); relaxed: only the total matters.
    line(ind, fmt::format("__atomic_fetch_add(&{}[{}], {}, __ATOMIC_RELAXED);", s->name, expr(s->exprs[0]),
                          store_value(expr(s->exprs[1]), s->exprs[1]->dtype)));
  }
  void combine_across(const StmtPtr&, int) override {
    KILN_INTERNAL_ASSERT(false, "the C++ emitter is given a CPU kernel (no combine across GPU threads)");
  }
  void barrier(const StmtPtr&, int) override { KILN_INTERNAL_ASSERT(false, "the C++ emitter is given a CPU kernel (no barrier)"); }
};

}  // namespace

namespace {

// The opening of a kernel whose body is a call of a prelude routine (attention, sort): its
// signature and its buffers as typed pointers. Returns the buffers' names, each followed by ", ".
std::string open_routine_kernel(CppEmitter& em, const Kernel& k) {
  if (!k.comment.empty()) em.line(0, "// " + k.comment);
  em.line(0, fmt::format("extern \"C\" void {}(void* const* buffers, const int64_t* scalars) {{", k.name));
  em.line(1, "(void)scalars;");
  std::string args;
  for (size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& b = k.buffers[i];
    bool in = b.role == BufferRole::Input;
    em.line(1, fmt::format("{}{}* {} = ({}{}*)buffers[{}];  // {} {}", in ? "const " : "", c_storage_type(b.dtype), b.name, in ? "const " : "",
                           c_storage_type(b.dtype), i, buffer_role_name(b.role), b.what));
    args += b.name + ", ";
  }
  return args;
}

// An attention kernel: a call of the prelude's routine over the pool (codegen/attention.h).
std::string emit_attention_kernel(const Kernel& k) {
  const AttentionKernel& a = *k.attention;
  CppEmitter em;
  const std::string args = open_routine_kernel(em, k);
  const std::string types = fmt::format("{}, {}", attention_dtype_code(a.dtype), a.causal ? "true" : "false");
  const std::string sizes = fmt::format("{}, {}, {}, {}, {}, {}, {}", a.batch, a.L, a.S, a.E, a.Ev, float_literal(a.scale, DType::F64, cpp_dialect()), a.grain);
  switch (a.pass) {
    case AttentionKernel::Pass::Forward: em.line(1, fmt::format("kiln_attn_fwd_cpu<{}>({}{});", types, args, sizes)); break;
    case AttentionKernel::Pass::BackwardKV:  // dout, q, k, v, lse, delta, dk, dv
      em.line(1, fmt::format("kiln_attn_bwd_cpu<{}>(b0, b1, b2, b3, b4, b5, 0, b6, b7, {});", types, sizes));
      break;
    case AttentionKernel::Pass::BackwardQ:  // dout, q, k, v, lse, delta, dq
      em.line(1, fmt::format("kiln_attn_bwd_cpu<{}>(b0, b1, b2, b3, b4, b5, b6, 0, 0, {});", types, sizes));
      break;
  }
  em.line(0, "}");
  return em.out;
}

// A sort kernel: a call of the prelude's routine over the pool (codegen/sort.h).
std::string emit_sort_kernel(const Kernel& k) {
  const SortKernel& s = *k.sort;
  KILN_INTERNAL_ASSERT(!s.scratch, "a CPU sort sorts in its outputs (scratch is a GPU's)");
  CppEmitter em;
  open_routine_kernel(em, k);
  em.line(1, fmt::format("kiln_sort_cpu<{}>(b0, b1, b2, {}, {}, {}, {}, {}, {});", sort_dtype_code(s.dtype), s.outer, s.n, s.inner, s.k,
                         s.descending ? "true" : "false", s.grain));
  em.line(0, "}");
  return em.out;
}

}  // namespace

std::string emit_cpp_kernel(const Kernel& k) {
  if (k.attention) return emit_attention_kernel(k);
  if (k.sort) return emit_sort_kernel(k);
  KILN_INTERNAL_ASSERT(!k.sorted_scatter, "a sorted scatter is a GPU's (the CPU's scatter runs along the index in order)");
  CppEmitter em;
  if (!k.comment.empty()) em.line(0, "// " + k.comment);
  em.line(0, fmt::format("extern \"C\" void {}(void* const* buffers, const int64_t* scalars) {{", k.name));
  em.line(1, "(void)scalars;");
  for (size_t i = 0; i < k.buffers.size(); ++i) {
    const Buffer& b = k.buffers[i];
    bool in = b.role == BufferRole::Input;
    em.line(1, fmt::format("{}{}* __restrict {} = ({}{}*)buffers[{}];  // {} {}", in ? "const " : "", c_storage_type(b.dtype), b.name,
                           in ? "const " : "", c_storage_type(b.dtype), i, buffer_role_name(b.role), b.what));
  }
  for (const Buffer& c : k.constants)
    em.line(1, fmt::format("static const {} {}[{}] = {{{}}};  // {}", c_storage_type(c.dtype), c.name,
                           std::max<size_t>(c.data.size(), 1), c.data.empty() ? "0" : constant_table(c, cpp_dialect()), c.what));
  em.stmt(k.body, 1);
  em.line(0, "}");
  return em.out;
}

std::string emit_cpp_module(const std::vector<Kernel>& kernels) {
  std::string out(cpp_prelude());
  for (const Kernel& k : kernels) out += "\n" + emit_cpp_kernel(k);
  return out;
}

}  // namespace kiln::codegen
