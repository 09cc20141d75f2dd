#pragma once
// Values set by formulas that a PyTorch script computes the same way (tools/torch_check's
// *_expected.py), so a test compares kiln's module with PyTorch's on identical numbers without
// shipping weights: parameter j of a module (named_parameters order), element k:
// 0.3 sin(0.7 k + 1.3 j); input element k: 0.5 cos(0.37 k).
#include <string>
#include <vector>

#include "frontend/nn/module.h"
#include "frontend/tensor.h"

namespace kiln::testing {

void set_formula_parameters(nn::Module& m, double scale = 1.0);  // the formula times scale
Tensor formula_input(const Shape& shape, DType dtype = DType::F32);
// `got` (on any device) element by element against `want`, within tol (1 + |want|).
void expect_values_near(const Tensor& got, const std::vector<double>& want, const std::string& what, double tol = 2e-5);

}  // namespace kiln::testing
