#include "tests/support/support.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/reference.h"

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
    // NaN matches only NaN, and an infinity only the same infinity: with an infinite e the
    // tolerance atol + rtol * |e| is infinite too and would accept any finite value (or -inf
    // for +inf), hiding a wrong result at exactly the positions edge-case tests check.
    bool ok = std::isfinite(a) && std::isfinite(e) ? std::abs(a - e) <= atol + rtol * std::abs(e)
                                                   : (std::isnan(a) && std::isnan(e)) || a == e;
    if (!ok)
      return ::testing::AssertionFailure() << "element " << i << ": got " << a << ", expected " << e << " (shape "
                                           << shape_str(actual.shape()) << ")";
  }
  return ::testing::AssertionSuccess();
}

HostTensor make(DType dt, const Shape& shape, std::vector<double> values) {
  return HostTensor::from_doubles(dt, shape, values);
}

HostTensor ints(DType dt, const Shape& shape, std::vector<int64_t> values) {
  return HostTensor::from_ints(dt, shape, values);
}

std::vector<double> vals(const HostTensor& t) { return t.to_doubles(); }

TensorMeta T(DType dt, Shape shape) { return TensorMeta(dt, std::move(shape)); }
TensorMeta F(const Shape& shape) { return TensorMeta(DType::F32, shape); }
TensorMeta I(const Shape& shape) { return TensorMeta(DType::I64, shape); }

HostTensor run1(Op op, std::vector<HostTensor> inputs, const Attrs& attrs) {
  return run_reference(op, inputs, attrs).at(0);
}

TensorMeta meta(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs) {
  return infer_meta(op_info(op), inputs, attrs).at(0);
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

int occurrences(const std::string& text, const std::string& part) {
  int n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++n;
  return n;
}

std::string meta_error(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs) {
  return error_of([&] { infer_meta(op_info(op), inputs, attrs); });
}

namespace {
// Whether `fn` throws a kiln::Error whose message contains `text`.
template <class Fn>
::testing::AssertionResult fails_with(Fn&& fn, const std::string& text) {
  try {
    fn();
  } catch (const Error& e) {
    if (has(e.what(), text)) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the error \"" << e.what() << "\" does not say \"" << text << "\"";
  }
  return ::testing::AssertionFailure() << "no error; expected one saying \"" << text << "\"";
}
}  // namespace

::testing::AssertionResult meta_fails(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs, const std::string& text) {
  return fails_with([&] { infer_meta(op_info(op), inputs, attrs); }, text);
}

::testing::AssertionResult run_fails(Op op, std::vector<HostTensor> inputs, const Attrs& attrs, const std::string& text) {
  return fails_with([&] { run_reference(op, inputs, attrs); }, text);
}

Graph one_op_graph(Op op, const std::vector<TensorMeta>& inputs, const Attrs& attrs) {
  Graph g("one_op");
  std::vector<Value> vs;
  for (size_t i = 0; i < inputs.size(); ++i) vs.push_back(g.add_input("x" + std::to_string(i), inputs[i]));
  Node* n = g.add_node(op, vs, attrs, "y");
  std::vector<Value> outs;
  for (int i = 0; i < n->num_results(); ++i) outs.push_back(n->result(i));
  g.set_outputs(outs);
  return g;
}

std::string one_node_round_trip(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs) {
  SCOPED_TRACE(std::string(op_name(op)));
  Graph g = one_op_graph(op, inputs, attrs);
  std::string text = print_graph(g);
  EXPECT_NE(text.find(std::string(" = ") + std::string(op_name(op)) + "("), std::string::npos) << text;
  EXPECT_EQ(print_graph(parse_graph(text)), text);
  return print_node(*g.find("y").node);
}

double max_rel_diff(const HostTensor& a, const HostTensor& b) {
  double scale = 0, diff = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    scale = std::max(scale, std::abs(b.get(i)));
    diff = std::max(diff, std::abs(a.get(i) - b.get(i)));
  }
  return diff / std::max(scale, 1e-30);
}

HostTensor rows(const HostTensor& t, int64_t from, int64_t n) {
  const int64_t cols = t.shape()[1];
  std::vector<double> v;
  for (int64_t i = from * cols; i < (from + n) * cols; ++i) v.push_back(t.get(i));
  return HostTensor::from_doubles(t.dtype(), {n, cols}, v);
}

}  // namespace kiln::testing
