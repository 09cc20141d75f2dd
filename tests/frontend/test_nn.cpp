// nn modules: parameter paths and counts, deterministic init, and the basic layers' maths.
#include <gtest/gtest.h>

#include <cmath>

#include "frontend/kiln.h"
#include "ir/error.h"
#include "tests/support/support.h"

using namespace kiln;
using kiln::testing::tensors_close;

TEST(Module, LinearParametersAndInitBounds) {
  nn::Linear lin(16, 8, true, 5);
  auto params = lin.named_parameters();
  ASSERT_EQ(params.size(), 2u);
  EXPECT_EQ(params[0].first, "weight");
  EXPECT_EQ(params[1].first, "bias");
  EXPECT_EQ(lin.weight.shape(), (Shape{8, 16}));
  EXPECT_EQ(lin.bias->shape(), (Shape{8}));
  EXPECT_EQ(lin.num_parameters(), 8 * 16 + 8);
  // PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) = U(-0.25, 0.25), for weight and bias.
  double lo = 1, hi = -1;
  for (const Tensor& p : lin.parameters())
    for (double v : p.to_doubles()) lo = std::min(lo, v), hi = std::max(hi, v);
  EXPECT_GE(lo, -0.25);
  EXPECT_LE(hi, 0.25);
  EXPECT_LT(lo, -0.2);  // and it spreads over the range
  EXPECT_GT(hi, 0.2);
  EXPECT_FALSE(nn::Linear(4, 4, false).bias.has_value());
  EXPECT_EQ(nn::Linear(4, 4, false).named_parameters().size(), 1u);
}

TEST(Module, InitIsDeterministicPerSeedAndPath) {
  nn::Linear a(8, 8, true, 1), b(8, 8, true, 1), c(8, 8, true, 2);
  EXPECT_EQ(a.weight.to_doubles(), b.weight.to_doubles());
  EXPECT_NE(a.weight.to_doubles(), c.weight.to_doubles());
  EXPECT_NE(a.weight.to_doubles(), std::vector<double>(a.bias->to_doubles().size() * 8, 0.0));
  nn::MiniGPT m1({}, 7), m2({}, 7);
  auto p1 = m1.named_parameters(), p2 = m2.named_parameters();
  for (size_t i = 0; i < p1.size(); ++i) EXPECT_EQ(p1[i].second.to_doubles(), p2[i].second.to_doubles()) << p1[i].first;
  // Different layers of one model get different values.
  EXPECT_NE(m1.blocks[0]->attn->qkv->weight.to_doubles(), m1.blocks[1]->attn->qkv->weight.to_doubles());
}

TEST(Module, LayerNormAndEmbeddingInit) {
  nn::LayerNorm ln(4);
  EXPECT_EQ(ln.weight.to_doubles(), (std::vector<double>{1, 1, 1, 1}));
  EXPECT_EQ(ln.bias.to_doubles(), (std::vector<double>{0, 0, 0, 0}));
  nn::Embedding emb(100, 40, 3);  // N(0, 1)
  double sum = 0, sq = 0;
  for (double v : emb.weight.to_doubles()) sum += v, sq += v * v;
  double n = 4000, mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.1);
  EXPECT_NEAR(std::sqrt(sq / n - mean * mean), 1.0, 0.1);
}

TEST(Module, BasicLayersCompute) {
  nn::Linear lin(2, 1);
  lin.weight = Tensor(HostTensor::from_doubles(DType::F32, {1, 2}, std::vector<double>{2, 3}));
  *lin.bias = Tensor(HostTensor::from_doubles(DType::F32, {1}, std::vector<double>{1}));
  EXPECT_EQ(lin(tensor({1, 1, 2, 0}, {2, 2})).to_doubles(), (std::vector<double>{6, 5}));
  nn::LayerNorm ln(2);
  EXPECT_TRUE(tensors_close(ln(tensor({1, 3}, {1, 2})).data(), kiln::testing::make(DType::F32, {1, 2}, {-1, 1}), 1e-4));
  nn::Embedding emb(3, 2);
  Tensor e = emb(tensor_of_ints({2, 2, 0}, {3}));
  EXPECT_EQ(e.shape(), (Shape{3, 2}));
  auto w = emb.weight.to_doubles(), v = e.to_doubles();
  EXPECT_EQ(v[0], w[4]);
  EXPECT_EQ(v[3], w[5]);
  EXPECT_EQ(v[4], w[0]);
}

TEST(Module, SubmoduleParametersGetDottedPaths) {
  nn::Block block(16, 2, 8);
  std::vector<std::string> names;
  for (auto& [path, p] : block.named_parameters()) {
    names.push_back(path);
    EXPECT_EQ(p.name(), path);  // the tensor carries its path, for trace's input names
  }
  std::vector<std::string> expected{"ln1.weight",      "ln1.bias",      "attn.qkv.weight", "attn.qkv.bias",
                                    "attn.proj.weight", "attn.proj.bias", "ln2.weight",      "ln2.bias",
                                    "mlp.fc.weight",   "mlp.fc.bias",   "mlp.proj.weight", "mlp.proj.bias"};
  EXPECT_EQ(names, expected);
  EXPECT_EQ(block.mlp->fc->weight.shape(), (Shape{64, 16}));  // hidden = 4 * d
}

TEST(Module, AttentionChecksItsShapes) {
  EXPECT_THROW(nn::CausalSelfAttention(10, 3, 8), Error);  // 10 is not a multiple of 3
  nn::CausalSelfAttention attn(8, 2, 4);
  EXPECT_THROW(attn(zeros({1, 5, 8})), Error);  // T = 5 > context 4
  EXPECT_THROW(attn(zeros({1, 4, 6})), Error);  // wrong width
  EXPECT_EQ(attn(randn({2, 4, 8}, 0)).shape(), (Shape{2, 4, 8}));
}

TEST(Module, AttentionIsCausal) {
  // Changing a later position must not change the outputs at earlier positions.
  nn::CausalSelfAttention attn(8, 2, 4, 11);
  Tensor x = randn({1, 4, 8}, 1);
  std::vector<double> xv = x.to_doubles();
  for (int i = 24; i < 32; ++i) xv[i] += 1.0;  // position 3
  Tensor y1 = attn(x), y2 = attn(tensor(xv, {1, 4, 8}));
  std::vector<double> a = y1.to_doubles(), b = y2.to_doubles();
  for (int i = 0; i < 24; ++i) EXPECT_EQ(a[i], b[i]) << i;
  bool changed = false;
  for (int i = 24; i < 32; ++i) changed |= a[i] != b[i];
  EXPECT_TRUE(changed);
}
