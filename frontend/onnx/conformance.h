#pragma once
// ONNX's backend test cases (the layout of ONNX's test data: DIR/model.onnx beside
// DIR/test_data_set_N/input_K.pb and output_K.pb), imported by kiln and run by a caller's
// runner (the reference interpreter, or a graph compiled for a device), each case judged
// passed, failed or unsupported (refused by name at import). `kiln onnx-test` and
// tests/onnx run ONNX's own suite through this; ONNX's reference computed the expected outputs.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "frontend/onnx/onnx.h"

namespace kiln::onnx {

// Where ONNX's suites (node, pytorch-converted, ...) are: $KILN_ONNX_TEST_DATA if set, else where
// Debian's libonnx-testdata puts them (/usr/share/libonnx-testdata/data).
std::string test_data_dir();

struct TestCase {
  std::string name;  // the folder's name; "suite/name" when found under a folder of suites
  std::string dir;
};

// The cases under `root`: root itself when it holds a model.onnx, else its folders that do,
// else the folders of its folders (a folder of suites), sorted by name. kiln::Error when root
// is not a folder or holds no case.
std::vector<TestCase> find_test_cases(const std::string& root);

// A case imported, with its data sets. A model input that decides a shape, an axis or a
// count (a Reshape's shape, a ReduceSum's axes, Trilu's k given as inputs) is specialized on
// each data set's value (kiln's graphs have static shapes): such a case has one model per
// data set, and the specialized inputs are named.
struct LoadedTestCase {
  std::vector<ImportedModel> models;
  struct DataSet {
    size_t model = 0;                    // which of `models`
    std::vector<HostTensor> arguments;   // the graph's inputs: weights and the data set's inputs
    std::vector<HostTensor> expected;
  };
  std::vector<DataSet> sets;
  std::vector<std::string> specialized;  // the model inputs specialized on their values
};

struct TestResult {
  enum Verdict { Passed, Failed, Unsupported } verdict = Passed;
  // Why, in a few words each, for a table over many cases: what was refused
  // (Unsupported::causes), or the stage that failed ("import", "compile", "run", "wrong values").
  std::vector<std::string> causes;
  std::string detail;  // the full message
  std::vector<std::string> specialized;  // LoadedTestCase::specialized

  static TestResult failed(std::string cause, std::string detail, std::vector<std::string> specialized = {}) {
    return {Failed, {std::move(cause)}, std::move(detail), std::move(specialized)};
  }
  static TestResult unsupported(const onnx::Unsupported& e, const std::string& prefix = "") {
    return {Unsupported, e.causes(), prefix + e.what(), {}};
  }
};
const char* verdict_name(TestResult::Verdict v);

// Imports `c` into `out` (specializing shape inputs as above); Passed when it imported,
// Unsupported when kiln refused part of it by name, Failed when the model or its data could
// not be read.
TestResult load_test_case(const TestCase& c, LoadedTestCase& out);

// The graph's inputs for data set `given`: a weight where the model has one, else the next
// of the data set's inputs.
std::vector<HostTensor> graph_arguments(const ImportedModel& m, const std::vector<HostTensor>& given);

// Runs every data set of `c` through `run` (given a graph and its arguments, returning its outputs)
// and compares with the expected outputs: a kiln::Error thrown by `run` fails the case as
// "run", a value off by more than rtol 1e-3 (1e-2 for f16 and bf16) + atol 1e-5 as "wrong
// values" (integers and bools exactly; NaN matches NaN).
TestResult check_test_case(const LoadedTestCase& c,
                           const std::function<std::vector<HostTensor>(const Graph&, const std::vector<HostTensor>&)>& run);

// "" when `got` matches `want`; otherwise the first difference, named `name[i]`.
std::string compare_with_expected(const HostTensor& got, const HostTensor& want, const std::string& name);

}  // namespace kiln::onnx
