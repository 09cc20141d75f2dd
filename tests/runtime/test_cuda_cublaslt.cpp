// cuBLASLt GEMM against a host reference in double: f32 (TF32 off), f64, f16, bf16, transposes,
// batches with a broadcast operand, epilogues, k = 0, odd sizes. Needs a GPU (skipped without).
#if KILN_HAVE_CUDA
#include <gtest/gtest.h>

#include <cmath>

#include "ir/error.h"
#include "ir/host_tensor.h"
#include "runtime/cuda/cublaslt.h"
#include "runtime/cuda/device_tensor.h"
#include "tests/runtime/cuda_test_env.h"

namespace kiln::runtime::cuda::testing {
namespace {

struct Case {
  DType dtype = DType::F32;
  bool trans_a = false, trans_b = false;
  int64_t m = 7, n = 33, k = 5, batch = 1;
  bool broadcast_b = false;  // stride_b = 0
  double alpha = 1.0, beta = 0.0;
  Epilogue epilogue = Epilogue::None;
  bool allow_tf32 = false;
};

bool uses_bias(Epilogue e) { return e == Epilogue::Bias || e == Epilogue::BiasRelu || e == Epilogue::BiasGelu; }

double apply(Epilogue e, double x, double bias) {
  if (uses_bias(e)) x += bias;
  if (e == Epilogue::Relu || e == Epilogue::BiasRelu) x = std::max(x, 0.0);
  if (e == Epilogue::Gelu || e == Epilogue::BiasGelu)
    x = 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x)));
  return x;
}

// Runs the case on the GPU and returns max |gpu - reference| / max(1e-30, max |reference|).
double relative_error(const Case& c) {
  // Row-major storage with leading dimensions a little wider than needed (padding is ignored).
  int64_t a_rows = c.trans_a ? c.k : c.m, a_cols = c.trans_a ? c.m : c.k;
  int64_t b_rows = c.trans_b ? c.n : c.k, b_cols = c.trans_b ? c.k : c.n;
  int64_t lda = a_cols + 1, ldb = b_cols + 2, ldc = c.n + 3;
  int64_t stride_a = a_rows * lda, stride_b = c.broadcast_b ? 0 : b_rows * ldb, stride_c = c.m * ldc;
  int64_t b_count = c.broadcast_b ? 1 : c.batch;
  HostTensor a = random_tensor(TensorMeta(c.dtype, {std::max<int64_t>(1, c.batch * stride_a)}), 1);
  HostTensor b = random_tensor(TensorMeta(c.dtype, {std::max<int64_t>(1, b_count * stride_b + (c.broadcast_b ? b_rows * ldb : 0))}), 2);
  HostTensor c0 = random_tensor(TensorMeta(c.dtype, {c.batch * stride_c}), 3);
  HostTensor bias = random_tensor(TensorMeta(c.dtype, {c.n}), 4);
  DeviceTensor da = DeviceTensor::from_host(a), db = DeviceTensor::from_host(b), dc = DeviceTensor::from_host(c0),
               dbias = DeviceTensor::from_host(bias);
  Stream stream;
  GemmOptions options;
  options.allow_tf32 = c.allow_tf32;
  options.epilogue = c.epilogue;
  options.bias = uses_bias(c.epilogue) ? dbias.data() : nullptr;
  gemm_strided_batched(c.dtype, c.trans_a, c.trans_b, c.m, c.n, c.k, c.alpha, da.data(), lda, stride_a, db.data(), ldb,
                       stride_b, c.beta, dc.data(), ldc, stride_c, c.batch, stream, options);
  synchronize_and_check(stream, "gemm");
  HostTensor out = dc.to_host();

  double max_err = 0, max_ref = 1e-30;
  for (int64_t p = 0; p < c.batch; ++p) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        double sum = 0;
        for (int64_t q = 0; q < c.k; ++q) {
          double av = a.get(p * stride_a + (c.trans_a ? q * lda + i : i * lda + q));
          double bv = b.get(p * stride_b + (c.trans_b ? j * ldb + q : q * ldb + j));
          sum += av * bv;
        }
        int64_t ci = p * stride_c + i * ldc + j;
        double ref = apply(c.epilogue, c.alpha * sum + (c.beta != 0 ? c.beta * c0.get(ci) : 0.0), bias.get(j));
        max_err = std::max(max_err, std::abs(out.get(ci) - ref));
        max_ref = std::max(max_ref, std::abs(ref));
      }
      // The padding of C is not written.
      for (int64_t j = c.n; j < ldc; ++j) {
        int64_t ci = p * stride_c + i * ldc + j;
        if (out.get(ci) != c0.get(ci)) return 1e9;
      }
    }
  }
  return max_err / max_ref;
}

using CublasLt = GpuTest;

TEST_F(CublasLt, F32OddSizesAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Case c;
      c.trans_a = ta;
      c.trans_b = tb;
      EXPECT_LT(relative_error(c), 1e-5) << "trans_a=" << ta << " trans_b=" << tb;
      c.m = 64, c.n = 48, c.k = 200;
      EXPECT_LT(relative_error(c), 1e-5) << "64x48x200 trans_a=" << ta << " trans_b=" << tb;
    }
  }
}

TEST_F(CublasLt, F32AlphaBeta) {
  Case c;
  c.alpha = 0.5;
  c.beta = -2.0;
  EXPECT_LT(relative_error(c), 1e-5);
}

TEST_F(CublasLt, F32WithTf32Allowed) {
  Case c;
  c.m = 128, c.n = 128, c.k = 256;
  c.allow_tf32 = true;
  EXPECT_LT(relative_error(c), 1e-2);
}

TEST_F(CublasLt, F64) {
  Case c;
  c.dtype = DType::F64;
  c.trans_b = true;
  EXPECT_LT(relative_error(c), 1e-12);
}

TEST_F(CublasLt, HalfAndBFloat16AccumulateInF32) {
  for (DType dt : {DType::F16, DType::BF16}) {
    for (bool ta : {false, true}) {
      Case c;
      c.dtype = dt;
      c.trans_a = ta;
      c.m = 16, c.n = 40, c.k = 64;
      EXPECT_LT(relative_error(c), 1e-2) << dtype_name(dt) << " trans_a=" << ta;
      c.m = 7, c.n = 33, c.k = 5;  // odd sizes: unaligned rows
      EXPECT_LT(relative_error(c), 1e-2) << dtype_name(dt) << " odd, trans_a=" << ta;
    }
  }
}

TEST_F(CublasLt, BatchedWithABroadcastOperand) {
  Case c;
  c.batch = 3;
  EXPECT_LT(relative_error(c), 1e-5);
  c.broadcast_b = true;
  EXPECT_LT(relative_error(c), 1e-5);
  c.dtype = DType::F16;
  c.trans_a = true;
  EXPECT_LT(relative_error(c), 1e-2);
}

TEST_F(CublasLt, Epilogues) {
  for (Epilogue e : {Epilogue::Bias, Epilogue::Relu, Epilogue::BiasRelu, Epilogue::Gelu, Epilogue::BiasGelu}) {
    Case c;
    c.m = 16, c.n = 24, c.k = 8;
    c.epilogue = e;
    EXPECT_LT(relative_error(c), 1e-5) << "f32 epilogue " << static_cast<int>(e);
    c.dtype = DType::F16;
    EXPECT_LT(relative_error(c), 1e-2) << "f16 epilogue " << static_cast<int>(e);
    c.dtype = DType::F32;
    c.batch = 2;
    c.trans_b = true;
    EXPECT_LT(relative_error(c), 1e-5) << "batched f32 epilogue " << static_cast<int>(e);
  }
}

TEST_F(CublasLt, KZeroGivesBetaCPlusEpilogue) {
  Case c;
  c.k = 0;
  EXPECT_EQ(relative_error(c), 0.0);  // C = 0 (max_ref tiny: exact zeros)
  c.beta = 1.5;
  EXPECT_LT(relative_error(c), 1e-6);
  c.beta = 0;
  c.epilogue = Epilogue::BiasRelu;
  c.batch = 2;
  EXPECT_LT(relative_error(c), 1e-6);
}

TEST_F(CublasLt, EmptyAndUnsupportedAreClean) {
  Stream stream;
  // m == 0: nothing to do, no pointer touched.
  gemm(DType::F32, false, false, 0, 4, 4, 1.0, nullptr, 4, nullptr, 4, 0.0, nullptr, 4, stream);
  try {
    gemm(DType::I32, false, false, 2, 2, 2, 1.0, nullptr, 2, nullptr, 2, 0.0, nullptr, 2, stream);
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("not i32"), std::string::npos) << e.what();
  }
  try {
    GemmOptions bias_missing;
    bias_missing.epilogue = Epilogue::Bias;
    gemm(DType::F32, false, false, 2, 2, 2, 1.0, nullptr, 2, nullptr, 2, 0.0, nullptr, 2, stream, bias_missing);
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs a bias"), std::string::npos) << e.what();
  }
  EXPECT_THROW(gemm(DType::F32, false, false, 2, 4, 3, 1.0, nullptr, 2, nullptr, 4, 0.0, nullptr, 4, stream),
               kiln::Error)
      << "lda 2 < k 3";
}

}  // namespace
}  // namespace kiln::runtime::cuda::testing
#endif
