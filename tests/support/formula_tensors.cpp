#include "tests/support/formula_tensors.h"

#include <gtest/gtest.h>

#include <cmath>

namespace kiln::testing {

void set_formula_parameters(nn::Module& m, double scale) {
  int64_t j = 0;
  for (auto& [path, p] : m.named_parameters()) {
    std::vector<double> v(static_cast<size_t>(p.numel()));
    for (size_t k = 0; k < v.size(); ++k) v[k] = scale * 0.3 * std::sin(0.7 * static_cast<double>(k) + 1.3 * static_cast<double>(j));
    Tensor t = tensor(v, p.shape(), p.dtype());
    p.impl()->set_storage_from(*(p.device() == t.device() ? t : t.to(p.device())).impl());
    ++j;
  }
}

Tensor formula_input(const Shape& shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = 0.5 * std::cos(0.37 * static_cast<double>(k));
  return tensor(v, shape, dtype);
}

void expect_values_near(const Tensor& got, const std::vector<double>& want, const std::string& what, double tol) {
  std::vector<double> g = got.to_doubles();
  ASSERT_EQ(g.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], tol * (1 + std::abs(want[i]))) << what << "[" << i << "]";
}

}  // namespace kiln::testing
