#include "tests/support/support.h"

#include <cmath>
#include <fstream>
#include <sstream>

namespace kiln::testing {

std::string data_dir() { return KILN_TEST_DATA_DIR; }

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

::testing::AssertionResult tensors_close(const HostTensor& actual, const HostTensor& expected, double atol, double rtol) {
  if (actual.dtype() != expected.dtype())
    return ::testing::AssertionFailure() << "dtype " << dtype_name(actual.dtype()) << " != " << dtype_name(expected.dtype());
  if (actual.shape() != expected.shape())
    return ::testing::AssertionFailure() << "shape " << shape_str(actual.shape()) << " != " << shape_str(expected.shape());
  for (int64_t i = 0; i < actual.numel(); ++i) {
    double a = actual.get(i), e = expected.get(i);
    bool ok = (std::isnan(a) && std::isnan(e)) || a == e || std::abs(a - e) <= atol + rtol * std::abs(e);
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << ": got " << a << ", expected " << e << " (shape "
                                           << shape_str(actual.shape()) << ")";
  }
  return ::testing::AssertionSuccess();
}

HostTensor make(DType dt, const Shape& shape, std::vector<double> values) {
  return HostTensor::from_doubles(dt, shape, values);
}

}  // namespace kiln::testing
