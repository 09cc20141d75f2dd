// Eager op calls (the CPU key: reference kernels) against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/cpu_kernel.h"
#include "frontend/kiln.h"
#include "ir/reference/reference.h"
#include "runtime/cpu/jit.h"
#include "ir/error.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::make;
using kiln::testing::tensors_close;

namespace {
std::vector<double> vals(const Tensor& t) { return t.to_doubles(); }
}  // namespace

TEST(EagerOps, PointwiseArithmetic) {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}), b = tensor({10, 20}, {2});
  EXPECT_EQ(vals(a + b), (std::vector<double>{11, 22, 13, 24}));  // broadcasting
  EXPECT_EQ(vals(a - b), (std::vector<double>{-9, -18, -7, -16}));
  EXPECT_EQ(vals(a * 2.0), (std::vector<double>{2, 4, 6, 8}));
  EXPECT_EQ(vals(1.0 - a), (std::vector<double>{0, -1, -2, -3}));
  EXPECT_EQ(vals(a / 2), (std::vector<double>{0.5, 1, 1.5, 2}));
  EXPECT_EQ(vals(-a), (std::vector<double>{-1, -2, -3, -4}));
  EXPECT_EQ(vals(pow(a, 2)), (std::vector<double>{1, 4, 9, 16}));
  EXPECT_EQ(vals(maximum(a, tensor({2.5}, {1}))), (std::vector<double>{2.5, 2.5, 3, 4}));
  EXPECT_EQ(vals(clamp(a, 2, 3)), (std::vector<double>{2, 2, 3, 3}));
  EXPECT_EQ(vals(clamp(a, std::nullopt, 2.5)), (std::vector<double>{1, 2, 2.5, 2.5}));
}

TEST(EagerOps, UnaryFunctions) {
  Tensor x = tensor({0, 1}, {2});
  EXPECT_TRUE(tensors_close(exp(x).data(), make(DType::F32, {2}, {1, std::exp(1.0)})));
  EXPECT_TRUE(tensors_close(tanh(x).data(), make(DType::F32, {2}, {0, std::tanh(1.0)})));
  EXPECT_TRUE(tensors_close(sigmoid(x).data(), make(DType::F32, {2}, {0.5, 1 / (1 + std::exp(-1.0))})));
  EXPECT_EQ(vals(relu(tensor({-1, 2}, {2}))), (std::vector<double>{0, 2}));
  EXPECT_EQ(vals(abs(tensor({-1, 2}, {2}))), (std::vector<double>{1, 2}));
  EXPECT_EQ(vals(sqrt(tensor({4, 9}, {2}))), (std::vector<double>{2, 3}));
  EXPECT_TRUE(tensors_close(gelu(tensor({1}, {1})).data(), make(DType::F32, {1}, {0.5 * (1 + std::erf(1 / std::sqrt(2.0)))})));
}

TEST(EagerOps, ComparisonsGiveBoolTensors) {
  Tensor a = tensor({1, 2, 3}, {3});
  Tensor lt2 = a < 2;
  EXPECT_EQ(lt2.dtype(), DType::Bool);
  EXPECT_EQ(vals(lt2), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(vals(a >= 2.0), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(vals(a == tensor({1, 0, 3}, {3})), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(vals(a != 2), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(vals(2 > a), (std::vector<double>{1, 0, 0}));
  EXPECT_EQ(vals(logical_not(a <= 1)), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(vals(where(a > 1, a, 0.0)), (std::vector<double>{0, 2, 3}));
  EXPECT_EQ(vals(masked_fill(a, a == 2, -1.0)), (std::vector<double>{1, -1, 3}));
}

TEST(EagerOps, Reductions) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(vals(sum(a)), (std::vector<double>{21}));
  EXPECT_EQ(sum(a).dim(), 0);
  EXPECT_EQ(vals(sum(a, {1})), (std::vector<double>{6, 15}));
  EXPECT_EQ(a.sum(0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(vals(a.sum(0, true)), (std::vector<double>{5, 7, 9}));
  EXPECT_EQ(vals(mean(a, {0, 1})), (std::vector<double>{3.5}));
  EXPECT_EQ(vals(amax(a, -1)), (std::vector<double>{3, 6}));
  EXPECT_EQ(vals(amin(a)), (std::vector<double>{1}));
  Tensor am = argmax(tensor({1, 9, 3, 7, 2, 8}, {2, 3}), 1);
  EXPECT_EQ(am.dtype(), DType::I64);
  EXPECT_EQ(am.to_ints(), (std::vector<int64_t>{1, 2}));
  EXPECT_TRUE(tensors_close(var(tensor({1, 2, 3, 4}, {4})).data(), make(DType::F32, {}, {5.0 / 3.0})));
  EXPECT_EQ(vals(var(tensor({1, 2, 3, 4}, {4}), {}, 0)), (std::vector<double>{1.25}));
  EXPECT_EQ(vals(prod(a, 1)), (std::vector<double>{6, 120}));
}

TEST(EagerOps, ViewsAndShapes) {
  Tensor a = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(vals(a.transpose(0, 1).contiguous()), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(a.transpose(0, 1).shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(a.reshape({3, 2})), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(a.reshape({-1}).shape(), (Shape{6}));
  EXPECT_EQ(vals(permute(a, {1, 0})), (std::vector<double>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(a.unsqueeze(0).shape(), (Shape{1, 2, 3}));
  EXPECT_EQ(a.unsqueeze(0).squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(expand(tensor({1, 2}, {2, 1}), {2, 3})), (std::vector<double>{1, 1, 1, 2, 2, 2}));
  EXPECT_EQ(vals(slice(a, 1, 1)), (std::vector<double>{2, 3, 5, 6}));
  EXPECT_EQ(vals(slice(a, 1, 0, 3, 2)), (std::vector<double>{1, 3, 4, 6}));
  EXPECT_EQ(vals(cat({a, a}, 0)), (std::vector<double>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  std::vector<Tensor> parts = split(a, 2, 1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(vals(parts[0]), (std::vector<double>{1, 2, 4, 5}));
  EXPECT_EQ(vals(parts[1]), (std::vector<double>{3, 6}));
  std::vector<Tensor> parts2 = split(a, IntList{1, 2}, 1);
  EXPECT_EQ(parts2[1].shape(), (Shape{2, 2}));
}

TEST(EagerOps, Creation) {
  EXPECT_EQ(vals(zeros({2})), (std::vector<double>{0, 0}));
  EXPECT_EQ(ones({2}, DType::I32).dtype(), DType::I32);
  EXPECT_EQ(vals(full({2, 2}, 7)), (std::vector<double>{7, 7, 7, 7}));
  EXPECT_EQ(full({1}, 7).dtype(), DType::I64);
  EXPECT_EQ(full({1}, 7.0).dtype(), DType::F32);
  EXPECT_EQ(arange(4).to_ints(), (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(arange(4).dtype(), DType::I64);
  EXPECT_EQ(vals(arange(1, 2, 0.25)), (std::vector<double>{1, 1.25, 1.5, 1.75}));
  EXPECT_EQ(vals(constant({2}, DType::F64, {0.5, 1.5})), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(vals(tril({3, 3}, 0, DType::Bool)), (std::vector<double>{1, 0, 0, 1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(vals(triu({2, 2})), (std::vector<double>{1, 1, 0, 1}));
  EXPECT_EQ(vals(tril(tensor({1, 2, 3, 4}, {2, 2}))), (std::vector<double>{1, 0, 3, 4}));
}

TEST(EagerOps, LinearAlgebra) {
  Tensor a = tensor({1, 2, 3, 4}, {2, 2}), b = tensor({5, 6, 7, 8}, {2, 2});
  EXPECT_EQ(vals(matmul(a, b)), (std::vector<double>{19, 22, 43, 50}));
  EXPECT_EQ(vals(a.matmul(b)), (std::vector<double>{19, 22, 43, 50}));
  EXPECT_EQ(vals(bmm(a.unsqueeze(0), b.unsqueeze(0))), (std::vector<double>{19, 22, 43, 50}));
  // linear(x, w, b) = x @ w^T + b
  EXPECT_EQ(vals(linear(a, b, tensor({1, -1}, {2}))), (std::vector<double>{18, 22, 40, 52}));
  EXPECT_EQ(vals(linear(a, b)), (std::vector<double>{17, 23, 39, 53}));
  EXPECT_EQ(vals(addmm(tensor({1, 1}, {2}), a, b, 2, 1)), (std::vector<double>{21, 24, 45, 52}));
}

TEST(EagerOps, SoftmaxAndLosses) {
  Tensor x = tensor({0, std::log(3.0)}, {1, 2});
  EXPECT_TRUE(tensors_close(softmax(x, -1).data(), make(DType::F32, {1, 2}, {0.25, 0.75})));
  EXPECT_TRUE(tensors_close(log_softmax(x, 1).data(), make(DType::F32, {1, 2}, {std::log(0.25), std::log(0.75)})));
  Tensor target = tensor_of_ints({1}, {1});
  EXPECT_TRUE(tensors_close(cross_entropy(x, target).data(), make(DType::F32, {}, {-std::log(0.75)})));
  EXPECT_TRUE(tensors_close(nll_loss(log_softmax(x, 1), target).data(), make(DType::F32, {}, {-std::log(0.75)})));
  Tensor none = cross_entropy(x, target, -100, "none");
  EXPECT_EQ(none.shape(), (Shape{1}));
}

TEST(EagerOps, LayerNormEmbeddingDropout) {
  Tensor x = tensor({1, 3}, {1, 2});
  EXPECT_TRUE(tensors_close(layer_norm(x, {2}).data(), make(DType::F32, {1, 2}, {-1, 1}), 1e-4));
  EXPECT_TRUE(tensors_close(layer_norm(x, {2}, tensor({2, 2}, {2}), tensor({1, 1}, {2})).data(),
                            make(DType::F32, {1, 2}, {-1, 3}), 1e-4));
  Tensor w = tensor({0, 0, 1, 1, 2, 2}, {3, 2});
  Tensor e = embedding(tensor_of_ints({2, 0}, {2}), w);
  EXPECT_EQ(e.shape(), (Shape{2, 2}));
  EXPECT_EQ(vals(e), (std::vector<double>{2, 2, 0, 0}));
  Tensor ones8 = ones({1000});
  EXPECT_EQ(vals(dropout(ones8, 0.5, false)), vals(ones8));
  Tensor d1 = dropout(ones8, 0.5, true, 7), d2 = dropout(ones8, 0.5, true, 7);
  EXPECT_EQ(vals(d1), vals(d2));  // same seed, same mask
  for (double v : vals(d1)) EXPECT_TRUE(v == 0 || v == 2);
}

TEST(EagerOps, ToConvertsDtype) {
  Tensor t = tensor({1.7, -2.2}, {2});
  EXPECT_EQ(t.to(DType::I64).to_ints(), (std::vector<int64_t>{1, -2}));
  EXPECT_EQ(to(t, DType::F16).dtype(), DType::F16);
}

TEST(EagerOps, ShapeErrorsNameTheOpAndShapes) {
  Tensor a = zeros({2, 3}), b = zeros({4});
  try {
    (void)(a + b);
    FAIL() << "expected a shape error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[2,3]"), std::string::npos) << msg;
    EXPECT_NE(msg.find("f32[4]"), std::string::npos) << msg;
  }
  EXPECT_THROW(matmul(zeros({2, 3}), zeros({2, 3})), Error);
  EXPECT_THROW(a.reshape({5}), Error);
  EXPECT_THROW(add(1.0, 2.0), Error);  // two numbers: no tensor to type the result
}

namespace kiln {
namespace {

// An eager op with enough work is compiled once per signature by the CPU backend (not run on
// its reference kernel): a second call of the same signature does not compile again, a new
// shape does, and the results agree with the reference kernel within f32's tolerance.
TEST(EagerCpuCompiled, LargeOpsCompileOncePerSignatureAndMatchTheReference) {
  if (!runtime::cpu::jit_available() || eager_cpu_uses_reference()) GTEST_SKIP() << "no CPU JIT, or KILN_EAGER_CPU=reference";
  Tensor x = randn({4, 32, 64}, 1), w = randn({176, 64}, 2), b = randn({176}, 3);
  const int before = cpu_kernel_compiles();
  Tensor y = linear(x, w, b);
  EXPECT_EQ(cpu_kernel_compiles(), before + 1);
  Tensor y2 = linear(x, w, b);
  EXPECT_EQ(cpu_kernel_compiles(), before + 1) << "the same signature compiled twice";
  EXPECT_EQ(y.to_doubles(), y2.to_doubles());
  std::vector<HostTensor> args{x.data(), w.data(), b.data()};
  std::vector<HostTensor> want = run_reference(Op::Linear, args, {});
  std::vector<double> got = y.to_doubles(), ref = want[0].to_doubles();
  ASSERT_EQ(got.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(got[i], ref[i], 1e-5 + 1e-5 * std::abs(ref[i])) << i;
  (void)linear(randn({2, 32, 64}, 4), w, b);
  EXPECT_EQ(cpu_kernel_compiles(), before + 2) << "a new shape is a new signature";
  // small ops stay on the reference kernels
  (void)(randn({4, 4}, 5) + 1.0);
  EXPECT_EQ(cpu_kernel_compiles(), before + 2);
}

}  // namespace
}  // namespace kiln
