#include "runtime/cpu/dnnl_gemm.h"

#if KILN_HAVE_DNNL
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

// libgomp, oneDNN's threading runtime in Debian's build.
extern "C" void omp_set_num_threads(int);
extern "C" int omp_get_max_threads();
#endif

namespace kiln::runtime::cpu {

#if KILN_HAVE_DNNL
namespace {

using Key = std::tuple<int, bool, bool, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, float, float>;

struct Made {
  std::unique_ptr<dnnl::matmul> primitive;  // null: oneDNN has no implementation for it
  dnnl::memory::desc a, b, c, scratchpad;
  std::string implementation;
};

dnnl::engine& cpu_engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::memory::data_type dnnl_type(DType dt) { return dt == DType::BF16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f16; }

// The matmul for one problem, made on first use and kept (a primitive is immutable: threads
// run it at once on their own operands).
const Made& primitive_for(const Key& key) {
  static std::mutex mu;
  static std::map<Key, Made> made;
  std::lock_guard lock(mu);
  auto it = made.find(key);
  if (it != made.end()) return it->second;
  auto [dtype, ta, tb, m, n, k, lda, ldb, ldc, alpha, beta] = key;
  const auto dt = dnnl_type(static_cast<DType>(dtype));
  using dims = dnnl::memory::dims;
  Made x;
  // op(A) is m x k: A itself (row stride lda) or A^T (A stored k x m: element (i, p) at p * lda + i).
  x.a = dnnl::memory::desc(dims{m, k}, dt, ta ? dims{1, lda} : dims{lda, 1});
  x.b = dnnl::memory::desc(dims{k, n}, dt, tb ? dims{1, ldb} : dims{ldb, 1});
  x.c = dnnl::memory::desc(dims{m, n}, dt, dims{ldc, 1});
  dnnl::primitive_attr attr;
  // The caller's scratchpad: Debian's oneDNN shares one library scratchpad between threads
  // (DNNL_ENABLE_CONCURRENT_EXEC off), and kiln's pool runs one primitive on several threads
  // at once (their blocks of C wrote each other's rows with the library's).
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (alpha != 1.0f) attr.set_output_scales(0, {alpha});
  if (beta != 0.0f) {
    dnnl::post_ops ops;
    ops.append_sum(beta);  // C = alpha * AB + beta * C, in f32, rounded once
    attr.set_post_ops(ops);
  }
  try {
    dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(x.a, x.b, x.c), attr, cpu_engine());
    // oneDNN's reference loops (no 16-bit units for this dtype) run slower than widening to
    // f32 for OpenBLAS: not taken.
    if (std::string(pd.impl_info_str()).rfind("ref", 0) != 0) {
      x.implementation = pd.impl_info_str();
      x.scratchpad = pd.scratchpad_desc();
      x.primitive = std::make_unique<dnnl::matmul>(pd);
    }
  } catch (const dnnl::error&) {
    x.primitive.reset();  // unimplemented here (f16 without AVX512-FP16, say)
  }
  return made.emplace(key, std::move(x)).first->second;
}

// oneDNN's parallel regions on this thread, while it lives: a team of one (kiln's pool has the
// cores). The thread's own setting comes back after the call: a program's OpenMP code on the
// thread that called kiln keeps its threads.
class OneOpenMpThread {
 public:
  OneOpenMpThread() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneOpenMpThread() { omp_set_num_threads(before_); }
  OneOpenMpThread(const OneOpenMpThread&) = delete;
  OneOpenMpThread& operator=(const OneOpenMpThread&) = delete;

 private:
  int before_;
};

}  // namespace

bool dnnl_gemm_16bit(DType dtype, bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const void* a, int64_t lda,
                     const void* b, int64_t ldb, float beta, void* c, int64_t ldc) {
  if (dtype != DType::BF16 && dtype != DType::F16) return false;
  const Made& x = primitive_for({static_cast<int>(dtype), ta, tb, m, n, k, lda, ldb, ldc, alpha, beta});
  if (!x.primitive) return false;
  OneOpenMpThread one;
  thread_local dnnl::stream stream(cpu_engine());
  thread_local std::vector<unsigned char> scratch;  // this thread's, grown to the largest asked
  scratch.resize(std::max(scratch.size(), x.scratchpad.get_size()));
  dnnl::memory am(x.a, cpu_engine(), const_cast<void*>(a)), bm(x.b, cpu_engine(), const_cast<void*>(b)),
      cm(x.c, cpu_engine(), c), sm(x.scratchpad, cpu_engine(), scratch.data());
  x.primitive->execute(stream, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}, {DNNL_ARG_SCRATCHPAD, sm}});
  stream.wait();
  return true;
}

const char* dnnl_implementation(DType dtype) {
  if (dtype != DType::BF16 && dtype != DType::F16) return "";
  // A small product stands for the dtype: oneDNN picks its kernels by ISA and dtype.
  return primitive_for({static_cast<int>(dtype), false, false, 64, 64, 64, 64, 64, 64, 1.0f, 0.0f}).implementation.c_str();
}

bool dnnl_multiplies(DType dtype) {
  // Asked of every product: looked up once per dtype, not under primitive_for's lock each time.
  static const bool off = [] {
    const char* v = std::getenv("KILN_DNNL");
    return v && std::string(v) == "off";
  }();
  static const bool bf16 = !off && *dnnl_implementation(DType::BF16) != '\0';
  static const bool f16 = !off && *dnnl_implementation(DType::F16) != '\0';
  return dtype == DType::BF16 ? bf16 : dtype == DType::F16 && f16;
}

#else
bool dnnl_gemm_16bit(DType, bool, bool, int64_t, int64_t, int64_t, float, const void*, int64_t, const void*, int64_t, float, void*,
                     int64_t) {
  return false;
}
const char* dnnl_implementation(DType) { return ""; }
bool dnnl_multiplies(DType) { return false; }
#endif

}  // namespace kiln::runtime::cpu
