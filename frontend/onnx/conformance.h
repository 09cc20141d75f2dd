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

// Where Debian's libonnx-testdata puts ONNX's suites (node, pytorch-converted, ...).
inline constexpr const char* kTestDataDir = "/usr/share/libonnx-testdata/data";

struct TestCase {
  std::string name;  // the folder's name; "suite/name" when found under a folder of suites
  std::string dir;
};

// The cases under `root`: root itself when it holds a model.onnx, else its folders that do,
// else the folders of its folders (a folder of suites), sorted by name. kiln::Error when root
// is not a folder or holds no case.
std::vector<TestCase> find_test_cases(const std::string& root);

// A case imported, with its data sets: the model's own inputs (its weights come with it) and
// the expected outputs.
struct LoadedTestCase {
  ImportedModel model;
  std::vector<std::pair<std::vector<HostTensor>, std::vector<HostTensor>>> sets;
};

struct TestResult {
  enum Verdict { Passed, Failed, Unsupported } verdict = Passed;
  // Why, in a few words each, for a table over many cases: what was refused
  // (Unsupported::causes), or the stage that failed ("import", "compile", "run", "wrong values").
  std::vector<std::string> causes;
  std::string detail;  // the full message
};
const char* verdict_name(TestResult::Verdict v);

// Imports `c` into `out`; Passed when it imported, Unsupported when kiln refused part of it by
// name, Failed when the model or its data could not be read.
TestResult load_test_case(const TestCase& c, LoadedTestCase& out);

// The graph's inputs for data set `given`: a weight where the model has one, else the next
// of the data set's inputs.
std::vector<HostTensor> graph_arguments(const ImportedModel& m, const std::vector<HostTensor>& given);

// Runs every data set of `c` through `run` (given the graph's arguments, returning its outputs)
// and compares with the expected outputs: a kiln::Error thrown by `run` fails the case as
// "run", a value off by more than rtol 1e-3 (1e-2 for f16 and bf16) + atol 1e-5 as "wrong
// values" (integers and bools exactly; NaN matches NaN).
TestResult check_test_case(const LoadedTestCase& c, const std::function<std::vector<HostTensor>(const std::vector<HostTensor>&)>& run);

// "" when `got` matches `want`; otherwise the first difference, named `name[i]`.
std::string compare_with_expected(const HostTensor& got, const HostTensor& want, const std::string& name);

}  // namespace kiln::onnx
