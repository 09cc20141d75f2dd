#pragma once
// Helpers shared by the test programs.
#include <gtest/gtest.h>

#include <string>

#include "ir/graph.h"
#include "ir/host_tensor.h"

namespace kiln::testing {

// Root of tests/ in the source tree (for .kir data files).
std::string data_dir();
std::string read_text(const std::string& path);

// Expects `actual` to equal `expected` elementwise within atol + rtol*|expected| (NaNs must
// match NaNs); on failure prints the first mismatching index and values.
::testing::AssertionResult tensors_close(const HostTensor& actual, const HostTensor& expected, double atol = 1e-6,
                                         double rtol = 1e-5);
// Builds a tensor from row-major values.
HostTensor make(DType dt, const Shape& shape, std::vector<double> values);

}  // namespace kiln::testing
