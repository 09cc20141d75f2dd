#pragma once
// Helpers shared by the test programs.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ir/error.h"
#include "ir/graph.h"
#include "ir/host_tensor.h"
#include "ir/op_registry.h"

namespace kiln::testing {

// Root of tests/ in the source tree (for .kir data files).
std::string data_dir();
std::string read_text(const std::string& path);

// Expects `actual` to equal `expected` elementwise within atol + rtol*|expected|; NaN and
// +-inf must sit at the same positions (a NaN matches any NaN, an infinity only the same
// infinity). On failure prints the first mismatching index and values.
::testing::AssertionResult tensors_close(const HostTensor& actual, const HostTensor& expected, double atol = 1e-6,
                                         double rtol = 1e-5);
// max |a - b| / max |b| over the elements (b the expected): one number for how far apart two
// tensors of the same shape are.
double max_rel_diff(const HostTensor& a, const HostTensor& b);
// Rows [from, from + n) of a [rows, cols] tensor (a rank's part of a batch).
HostTensor rows(const HostTensor& t, int64_t from, int64_t n);
// Builds a tensor from row-major values.
HostTensor make(DType dt, const Shape& shape, std::vector<double> values);
// Builds an integer (or bool) tensor from row-major values, exactly.
HostTensor ints(DType dt, const Shape& shape, std::vector<int64_t> values);
// The values of a tensor, in row-major order, as doubles.
std::vector<double> vals(const HostTensor& t);

// Tensor types: T(dtype, shape), and the common F(shape) for f32 and I(shape) for i64.
TensorMeta T(DType dt, Shape shape);
TensorMeta F(const Shape& shape);
TensorMeta I(const Shape& shape);

// The first result of the reference kernel of `op`.
HostTensor run1(Op op, std::vector<HostTensor> inputs, const Attrs& attrs = {});
// The type of the first result the shape rule of `op` gives for these inputs.
TensorMeta meta(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs = {});

// Whether `text` contains `part`.
bool has(const std::string& text, const std::string& part);
// How many times `part` occurs in `text`, not overlapping.
int occurrences(const std::string& text, const std::string& part);

// The message of the kiln::Error that `fn` throws, or "" if it throws none.
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
// The message of the kiln::Error the shape rule of `op` throws for these inputs ("" if none).
std::string meta_error(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs = {});
// Whether the shape rule rejects these inputs with a kiln::Error whose message contains `text`.
::testing::AssertionResult meta_fails(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs, const std::string& text);
// Whether running the reference kernel throws a kiln::Error whose message contains `text`.
::testing::AssertionResult run_fails(Op op, std::vector<HostTensor> inputs, const Attrs& attrs, const std::string& text);

// Builds a graph of inputs %x0, %x1, ... of these types and one `op` node %y (every result an
// output), prints it, parses it back and EXPECTs the reprint to equal the print and the print to
// show the op's name; returns the node's line, e.g. "%y = tril(%x0, diagonal=1) : f32[2,4,4]".
// The graph `one_op(%x0: inputs[0], ...) { %y = op(%x0, ...) ; return (every result) }`.
Graph one_op_graph(Op op, const std::vector<TensorMeta>& inputs, const Attrs& attrs = {});
std::string one_node_round_trip(Op op, std::vector<TensorMeta> inputs, const Attrs& attrs = {});

}  // namespace kiln::testing
