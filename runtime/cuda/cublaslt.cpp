// Row-major strided-batched GEMM through cuBLASLt: handles, cached plans, zero sizes. See
// cublaslt.h for the operand swap and the types.
#include "runtime/cuda/cublaslt.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "ir/error.h"
#include "runtime/cuda/allocator.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/driver_api.h"
#include "runtime/kernel_cache.h"

namespace kiln::runtime::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

void check_lt(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    kiln::fail("cuBLASLt {}: {} ({})", what, cublasLtGetStatusName(s), cublasLtGetStatusString(s));
}

struct Types {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;
};

Types types_of(DType dtype, bool allow_tf32) {
  switch (dtype) {
    case DType::F32: return {CUDA_R_32F, allow_tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::F64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case DType::F16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::BF16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    default:
      kiln::fail("matmul on CUDA (cuBLASLt) supports f32, f64, f16 and bf16, not {}", dtype_name(dtype));
  }
}

cublasLtEpilogue_t epilogue_of(Epilogue e) {
  switch (e) {
    case Epilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case Epilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case Epilogue::Relu: return CUBLASLT_EPILOGUE_RELU;
    case Epilogue::BiasRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
    case Epilogue::Gelu: return CUBLASLT_EPILOGUE_GELU;
    case Epilogue::BiasGelu: return CUBLASLT_EPILOGUE_GELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

const char* epilogue_name(Epilogue e) {
  switch (e) {
    case Epilogue::None: return "none";
    case Epilogue::Bias: return "bias";
    case Epilogue::Relu: return "relu";
    case Epilogue::BiasRelu: return "bias+relu";
    case Epilogue::Gelu: return "gelu";
    case Epilogue::BiasGelu: return "bias+gelu";
  }
  return "?";
}

bool has_bias(Epilogue e) { return e == Epilogue::Bias || e == Epilogue::BiasRelu || e == Epilogue::BiasGelu; }

// The alignment (power of two, at most 256 bytes) that every matrix of a batch has.
uint32_t alignment(const void* p, int64_t stride_bytes) {
  uint64_t bits = reinterpret_cast<uint64_t>(p) | static_cast<uint64_t>(stride_bytes) | 256;
  return static_cast<uint32_t>(bits & (~bits + 1));
}

// Descriptors and the chosen algorithm of one problem; kept for the process.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, out = nullptr;  // B's memory, A's, C
  cublasLtMatmulAlgo_t algo{};
  std::vector<cublasLtMatmulAlgo_t> candidates;  // the heuristic's first few, best first
  std::optional<TuningOutcome> tuned;            // set once tuned: what was chosen
};

// How many of the heuristic's algorithms a tuned problem times (Inductor's max-autotune asks
// cuBLAS for its first few too); how long each may run.
constexpr int kTunedAlgorithms = 8;
constexpr double kTuneBudgetMs = 5.0;

struct DeviceState {
  std::mutex mutex;
  cublasLtHandle_t handle = nullptr;
  DeviceBuffer workspace;
  std::map<std::string, std::unique_ptr<Plan>> plans;
};

std::mutex states_mutex;
std::vector<std::unique_ptr<DeviceState>>* states = new std::vector<std::unique_ptr<DeviceState>>;  // leaked

DeviceState& state(int device) {
  std::lock_guard<std::mutex> lock(states_mutex);
  if (static_cast<size_t>(device) >= states->size()) states->resize(device + 1);
  auto& s = (*states)[device];
  if (!s) s = std::make_unique<DeviceState>();
  return *s;
}

cublasLtMatrixLayout_t layout(cudaDataType_t type, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  check_lt(cublasLtMatrixLayoutCreate(&l, type, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld),
           "cublasLtMatrixLayoutCreate");
  if (batch > 1) {
    int32_t count = static_cast<int32_t>(batch);
    check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
             "setting the batch count");
    check_lt(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
             "setting the batch stride");
  }
  return l;
}

// Times each of the plan's candidate algorithms with `run` (which queues one product on
// `stream`) and keeps the fastest in plan.algo; the choice is stored in the kernel cache under
// the problem's key, the device and cuBLASLt's version, and taken from there when it is still
// one cuBLASLt accepts for this problem. Returns what happened, for GemmOptions::tuned.
TuningOutcome tune_plan(DeviceState& st, Plan& plan, const std::string& key, int device, Stream& stream,
                      const std::function<cublasStatus_t(const cublasLtMatmulAlgo_t&)>& run) {
  if (plan.candidates.size() < 2) return {"the heuristic offers one algorithm"};
  const DeviceInfo& info = device_info(device);
  std::string cache_key = content_key({"gemm-tune", "2", key, info.name, std::to_string(cublasLtGetVersion()), driver_version_string()});
  std::optional<KernelCache> cache;
  if (auto dir = KernelCache::default_dir()) cache.emplace(*dir);
  if (cache)
    // Stored: the algorithm's bytes, one byte saying whether it left the heuristic's first, the sentence.
    if (std::optional<std::string> bytes = cache->load(cache_key, "gemmtune"); bytes && bytes->size() > sizeof(cublasLtMatmulAlgo_t) + 1) {
      cublasLtMatmulAlgo_t algo{};
      std::memcpy(&algo, bytes->data(), sizeof algo);
      cublasLtMatmulHeuristicResult_t check{};
      if (cublasLtMatmulAlgoCheck(st.handle, plan.desc, plan.first, plan.second, plan.out, plan.out, &algo, &check) ==
          CUBLAS_STATUS_SUCCESS) {
        plan.algo = algo;
        return {bytes->substr(sizeof algo + 1) + " (from the cache)", true, (*bytes)[sizeof algo] != 0};
      }
    }
  std::vector<double> ms;
  for (const cublasLtMatmulAlgo_t& algo : plan.candidates) {
    Event start(device), end(device);
    // One run to warm up (and to find an algorithm that fails to launch: it is never chosen).
    if (run(algo) != CUBLAS_STATUS_SUCCESS) {
      ms.push_back(std::numeric_limits<double>::infinity());
      continue;
    }
    start.record(stream);
    check_lt(run(algo), "a tuned algorithm");
    end.record(stream);
    end.synchronize();
    double first = elapsed_ms(start, end);
    int runs = std::clamp(static_cast<int>(kTuneBudgetMs / std::max(first, 1e-3)), 3, 20);
    start.record(stream);
    for (int r = 0; r < runs; ++r) check_lt(run(algo), "a tuned algorithm");
    end.record(stream);
    end.synchronize();
    ms.push_back(elapsed_ms(start, end) / runs);
  }
  size_t best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
  if (!clearly_faster(ms[best], ms[0])) best = 0;
  plan.algo = plan.candidates[best];
  std::string said = best == 0 ? fmt::format("the heuristic's first, fastest of {} algorithms ({:.4f} ms)", ms.size(), ms[0])
                               : fmt::format("algorithm {} of the heuristic's {}, {:.4f} ms (its first {:.4f} ms)", best + 1, ms.size(),
                                             ms[best], ms[0]);
  if (cache) {
    std::string bytes(reinterpret_cast<const char*>(&plan.algo), sizeof plan.algo);
    bytes += static_cast<char>(best != 0);
    cache->store(cache_key, {{"gemmtune", bytes + said, false}});
  }
  return {said, false, best != 0};
}

}  // namespace

void gemm_strided_batched(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                          const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b,
                          double beta, void* c, int64_t ldc, int64_t stride_c, int64_t batch, Stream& stream,
                          const GemmOptions& options) {
  Types types = types_of(dtype, options.allow_tf32 && dtype == DType::F32);
  if (m < 0 || n < 0 || k < 0 || batch < 0) kiln::fail("gemm: negative size (m={}, n={}, k={}, batch={})", m, n, k, batch);
  if (m == 0 || n == 0 || batch == 0) return;
  if (has_bias(options.epilogue) && !options.bias)
    kiln::fail("gemm: the {} epilogue needs a bias vector (GemmOptions::bias)", epilogue_name(options.epilogue));
  if (batch > 1 && stride_c == 0) kiln::fail("gemm: {} products would all write the same C (stride_c = 0)", batch);
  int64_t esize = dtype_size(dtype);
  if (k == 0) {
    // An empty sum: C = beta * C (+ epilogue). Run as k = 1 with zero operands and alpha = 0, so
    // that beta and the epilogue take the one path. The zeros go back to the cache at once:
    // their next user queues work on this stream after this product (allocator.h).
    DeviceBuffer zeros = device_alloc(static_cast<size_t>((m + n) * esize), stream.device());
    memset_async(zeros->data(), 0, zeros->size(), stream);
    const char* z = static_cast<const char*>(zeros->data());
    gemm_strided_batched(dtype, false, false, m, n, 1, 0.0, z, 1, 0, z + m * esize, n, 0, beta, c, ldc, stride_c,
                         batch, stream, options);
    return;
  }
  auto at_least = [](int64_t ld, int64_t need, const char* name) {
    if (ld < std::max<int64_t>(need, 1)) kiln::fail("gemm: {} = {} is less than the {} columns of the row-major matrix", name, ld, need);
  };
  at_least(lda, trans_a ? m : k, "lda");
  at_least(ldb, trans_b ? k : n, "ldb");
  at_least(ldc, n, "ldc");

  int device = stream.device();
  std::string why;
  if (!driver_available(&why)) kiln::fail("gemm on cuda:{}: {}", device, why);
  ScopedContext ctx(device);
  DeviceState& st = state(device);
  std::lock_guard<std::mutex> lock(st.mutex);
  if (!st.handle) {
    check_lt(cublasLtCreate(&st.handle), "cublasLtCreate");
    st.workspace = device_alloc(kWorkspaceBytes, device);
  }

  uint32_t align_first = alignment(b, stride_b * esize), align_second = alignment(a, stride_a * esize),
           align_out = alignment(c, stride_c * esize);
  std::string key = fmt::format("{} {}{} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {}", dtype_name(dtype), trans_a,
                                trans_b, m, n, k, lda, ldb, ldc, stride_a, stride_b, stride_c, batch,
                                static_cast<int>(options.epilogue), static_cast<int>(types.compute), align_first,
                                align_second, align_out);
  std::unique_ptr<Plan>& plan = st.plans[key];
  if (!plan) {
    auto p = std::make_unique<Plan>();
    check_lt(cublasLtMatmulDescCreate(&p->desc, types.compute, types.scale), "cublasLtMatmulDescCreate");
    // Column-major C^T (n x m) = op(B)^T (n x k) * op(A)^T (k x m): B's memory first.
    cublasOperation_t op_first = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t op_second = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_first, sizeof op_first), "TRANSA");
    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_second, sizeof op_second), "TRANSB");
    cublasLtEpilogue_t epi = epilogue_of(options.epilogue);
    check_lt(cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi), "EPILOGUE");
    // B's memory, stored column-major: n x k (N) or k x n (T); A's: k x m (N) or m x k (T).
    p->first = trans_b ? layout(types.data, k, n, ldb, batch, stride_b) : layout(types.data, n, k, ldb, batch, stride_b);
    p->second = trans_a ? layout(types.data, m, k, lda, batch, stride_a) : layout(types.data, k, m, lda, batch, stride_a);
    p->out = layout(types.data, n, m, ldc, batch, stride_c);

    cublasLtMatmulPreference_t pref = nullptr;
    check_lt(cublasLtMatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate");
    uint64_t workspace = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, sizeof workspace);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_first, sizeof align_first);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_second, sizeof align_second);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out, sizeof align_out);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out, sizeof align_out);
    // f16/bf16 accumulate in f32 throughout: a split-K algorithm may reduce its partial sums
    // only in the compute type, never in the 16-bit output (INPLACE, OUTPUT_TYPE). Those round
    // each partial to bf16, and a sum that cancels loses its digits: kiln fuzz met a bf16 weight
    // gradient ([7,48] @ [48,14]) 9 ulps off on an H100. (PyTorch allows the reduced-precision
    // reduction unless allow_bf16_reduced_precision_reduction is off.)
    if (dtype == DType::F16 || dtype == DType::BF16) {
      uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes);
    }
    cublasLtMatmulHeuristicResult_t results[kTunedAlgorithms]{};
    int found = 0;
    cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(st.handle, p->desc, p->first, p->second, p->out, p->out, pref,
                                                      kTunedAlgorithms, results, &found);
    const cublasLtMatmulHeuristicResult_t& result = results[0];
    cublasLtMatmulPreferenceDestroy(pref);
    if (s == CUBLAS_STATUS_NOT_SUPPORTED || (s == CUBLAS_STATUS_SUCCESS && found == 0)) {
      plan.reset();
      st.plans.erase(key);
      kiln::fail("cuBLASLt has no algorithm for a {} matmul {}x{}x{} (batch {}, trans_a={}, trans_b={}, epilogue {}) on "
                 "cuda:{}",
                 dtype_name(dtype), m, n, k, batch, trans_a, trans_b, epilogue_name(options.epilogue), device);
    }
    if (s != CUBLAS_STATUS_SUCCESS) st.plans.erase(key);
    check_lt(s, "cublasLtMatmulAlgoGetHeuristic");
    p->algo = result.algo;
    for (int i = 0; i < found; ++i)
      if (results[i].state == CUBLAS_STATUS_SUCCESS) p->candidates.push_back(results[i].algo);
    plan = std::move(p);
  }
  if (has_bias(options.epilogue)) {
    check_lt(cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &options.bias,
                                            sizeof options.bias),
             "BIAS_POINTER");
  }
  float alpha32 = static_cast<float>(alpha), beta32 = static_cast<float>(beta);
  const void* alpha_p = types.scale == CUDA_R_64F ? static_cast<const void*>(&alpha) : &alpha32;
  const void* beta_p = types.scale == CUDA_R_64F ? static_cast<const void*>(&beta) : &beta32;
  auto run = [&](const cublasLtMatmulAlgo_t& algo) {
    return cublasLtMatmul(st.handle, plan->desc, alpha_p, b, plan->first, a, plan->second, beta_p, c, plan->out, c, plan->out, &algo,
                          st.workspace->data(), kWorkspaceBytes, stream.raw());
  };
  if (options.autotune && !plan->tuned) {
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    detail::api().cuStreamIsCapturing(stream.raw(), &capture);
    std::string problem = fmt::format("{} matmul {}x{}x{} (batch {}, trans_a={}, trans_b={}, epilogue {})", dtype_name(dtype), m, n, k,
                                      batch, trans_a, trans_b, epilogue_name(options.epilogue));
    if (capture != CU_STREAM_CAPTURE_STATUS_NONE) {
      if (options.tuned) *options.tuned = {problem + ": not tuned (the stream is being captured)"};
    } else {
      plan->tuned = tune_plan(st, *plan, key, device, stream, run);
      plan->tuned->said = problem + ": " + plan->tuned->said;
    }
  }
  if (options.tuned && plan->tuned) *options.tuned = *plan->tuned;
  check_lt(run(plan->algo), fmt::format("cublasLtMatmul ({} {}x{}x{}, batch {})", dtype_name(dtype), m, n, k, batch));
}

void gemm(DType dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha, const void* a,
          int64_t lda, const void* b, int64_t ldb, double beta, void* c, int64_t ldc, Stream& stream,
          const GemmOptions& options) {
  gemm_strided_batched(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, 0, b, ldb, 0, beta, c, ldc, 0, 1, stream,
                       options);
}

}  // namespace kiln::runtime::cuda
