// Tensor handles and the concrete factories.
#include <gtest/gtest.h>

#include <set>

#include "frontend/kiln.h"
#include "ir/error.h"
#include "tests/support/support.h"

using namespace kiln;

TEST(Tensor, AccessorsOfAnEagerTensor) {
  Tensor t = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_TRUE(t.defined());
  EXPECT_FALSE(t.is_traced());
  EXPECT_EQ(t.dtype(), DType::F32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.meta().str(), "f32[2,3]");
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{1, 2, 3, 4, 5, 6}));
  EXPECT_THROW(t.size(2), Error);
}

TEST(Tensor, CopiesShareTheirImpl) {
  Tensor a = tensor({1}, {1});
  Tensor b = a;
  b.set_name("w");
  EXPECT_EQ(a.name(), "w");
  EXPECT_EQ(a.impl(), b.impl());
}

TEST(Tensor, UndefinedTensorIsAnError) {
  Tensor t;
  EXPECT_FALSE(t.defined());
  EXPECT_THROW(t.meta(), Error);
  EXPECT_THROW(t.data(), Error);
}

TEST(Tensor, ValueCountMustMatchShape) {
  EXPECT_THROW(tensor({1, 2, 3}, {2, 2}), Error);
  EXPECT_THROW(tensor_of_ints({1, 2, 3}, {2}), Error);
}

TEST(Tensor, IntTensorsAreExact) {
  Tensor t = tensor_of_ints({int64_t{1} << 60, -3}, {2});
  EXPECT_EQ(t.dtype(), DType::I64);
  EXPECT_EQ(t.to_ints(), (std::vector<int64_t>{int64_t{1} << 60, -3}));
}

TEST(Tensor, ScalarTensorPicksPythonTypes) {
  EXPECT_EQ(scalar_tensor(2.5).dtype(), DType::F32);
  EXPECT_EQ(scalar_tensor(2).dtype(), DType::I64);
  EXPECT_EQ(scalar_tensor(true).dtype(), DType::Bool);
  EXPECT_EQ(scalar_tensor(7, DType::I32).item(), 7);
  EXPECT_EQ(scalar_tensor(2.5).shape(), Shape{});
}

TEST(Tensor, RandnIsReproducibleAndSeedDependent) {
  Tensor a = randn({4, 5}, 42), b = randn({4, 5}, 42), c = randn({4, 5}, 43);
  EXPECT_EQ(a.to_doubles(), b.to_doubles());
  EXPECT_NE(a.to_doubles(), c.to_doubles());
  // Counter-based: element i depends on (seed, i) only, so a bigger tensor extends a smaller one.
  Tensor big = randn({40}, 42);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(big.data().get(i), a.data().get(i));
  double mean = 0;
  Tensor many = randn({4000}, 1);
  for (double v : many.to_doubles()) mean += v / 4000;
  EXPECT_NEAR(mean, 0.0, 0.1);
}

TEST(Tensor, RandIsInUnitInterval) {
  Tensor r = rand({1000}, 3);
  for (double v : r.to_doubles()) {
    EXPECT_GE(v, 0.0);
    EXPECT_LT(v, 1.0);
  }
  EXPECT_THROW(rand({2}, 0, DType::I64), Error);
}

TEST(Tensor, RandintStaysInRange) {
  Tensor r = randint(5, 9, {2, 500}, 4);
  EXPECT_EQ(r.dtype(), DType::I64);
  std::set<int64_t> seen;
  for (int64_t v : r.to_ints()) {
    EXPECT_GE(v, 5);
    EXPECT_LT(v, 9);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 4u);
  EXPECT_EQ(r.to_ints(), randint(5, 9, {2, 500}, 4).to_ints());
  EXPECT_THROW(randint(3, 3, {1}, 0), Error);
}

TEST(Tensor, StrDescribesTheTensor) {
  Tensor t = tensor({1, 2}, {2});
  t.set_name("w");
  EXPECT_EQ(t.str(), "f32[2] 'w' (eager)");
}
