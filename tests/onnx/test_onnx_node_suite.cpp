// ONNX's own backend test suite (Debian's libonnx-testdata: node, pytorch-converted,
// pytorch-operator and simple models, each with inputs and expected outputs computed by ONNX's
// reference) imported by kiln and run on the reference interpreter. Every case either passes
// or is refused by name (an operator, attribute or dtype kiln does not import); a case that
// imports but computes something else fails the test, unless it is listed in
// known_failures.txt with the reason. A listed case that passes fails the test too, so the list
// stays true.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "frontend/onnx/conformance.h"
#include "ir/reference/interpreter.h"
#include "tests/backend/backend_check.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

using onnx::LoadedTestCase;
using onnx::TestResult;

std::vector<onnx::TestCase> cases_of(const char* suite) {
  return onnx::find_test_cases((fs::path(onnx::test_data_dir()) / suite).string());
}

TestResult run_case(const onnx::TestCase& c) {
  LoadedTestCase loaded;
  TestResult r = onnx::load_test_case(c, loaded);
  if (r.verdict != TestResult::Passed) return r;
  return onnx::check_test_case(loaded, [](const Graph& g, const std::vector<HostTensor>& args) { return interpret(g, args); });
}

std::map<std::string, std::string> known_failures() {
  std::map<std::string, std::string> out;
  std::ifstream f(std::string(KILN_TEST_DATA_DIR) + "/onnx/known_failures.txt");
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t sp = line.find(' ');
    out[line.substr(0, sp)] = sp == std::string::npos ? "" : line.substr(sp + 1);
  }
  return out;
}

TEST(OnnxTestData, EveryCasePassesOrIsRefusedByName) {
  if (!fs::exists(onnx::test_data_dir())) GTEST_SKIP() << "ONNX's test data is not installed (libonnx-testdata)";
  auto known = known_failures();
  std::map<std::string, int> passed, refused, failed;
  std::map<std::string, int> refused_causes;
  std::vector<std::string> unexpected;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    for (const onnx::TestCase& c : cases_of(suite)) {
      const std::string& name = c.name;
      TestResult r = run_case(c);
      bool listed = known.count(name) != 0;
      if (r.verdict == TestResult::Passed) {
        ++passed[suite];
        if (listed) unexpected.push_back(name + " passes but is listed in known_failures.txt: take it out");
      } else if (r.verdict == TestResult::Unsupported) {
        ++refused[suite];
        for (const std::string& cause : r.causes) ++refused_causes[cause];
        if (r.causes.empty()) unexpected.push_back(name + ": refused with no cause given: " + r.detail);
        // A refusal must say what it refuses.
        if (r.detail.find("not supported") == std::string::npos && r.detail.find("does not import") == std::string::npos &&
            r.detail.find("cannot import") == std::string::npos && r.detail.find("kiln needs it known") == std::string::npos)
          unexpected.push_back(name + ": refused without naming why: " + r.detail);
      } else {
        ++failed[suite];
        if (!listed) unexpected.push_back(name + ": " + r.detail);
      }
    }
  }
  std::string summary;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"})
    summary += fmt::format("\n  {:<18} {:>4} pass, {:>4} refused, {:>3} known failures", suite, passed[suite], refused[suite], failed[suite]);
  std::vector<std::pair<int, std::string>> ops;
  for (const auto& [op, n] : refused_causes) ops.push_back({-n, op});
  std::sort(ops.begin(), ops.end());
  std::string top;
  for (size_t i = 0; i < ops.size() && i < 25; ++i) top += fmt::format(" {}({})", ops[i].second, -ops[i].first);
  std::cout << "ONNX test data:" << summary << "\n  most common causes of refusal (cases):" << top << "\n";
  for (const std::string& u : unexpected) ADD_FAILURE() << u;
  // A floor, so that a converter that goes missing from the table (its cases then refused, not
  // failed) is noticed: raise it as operators are added.
  EXPECT_GE(passed["node"], 748);
}

}  // namespace
}  // namespace kiln

namespace kiln::testing {
namespace {

class OnnxTestDataCompiled : public DeviceTest {};
KILN_DEVICE_TESTS(OnnxTestDataCompiled);

// Every case kiln imports, compiled for the test device and compared with ONNX's expected
// outputs; where the device cannot run (no GPU), each graph is still compiled (NVRTC).
TEST_P(OnnxTestDataCompiled, EveryImportedCaseMatchesTheExpectedOutputs) {
  if (!fs::exists(onnx::test_data_dir())) GTEST_SKIP() << "ONNX's test data is not installed (libonnx-testdata)";
  KILN_REQUIRE_JIT();
  std::string why;
  bool can_run = device_can_run(&why);
  auto known = known_failures();
  int compiled = 0, passed = 0;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    for (const onnx::TestCase& tc : cases_of(suite)) {
      const std::string& name = tc.name;
      LoadedTestCase c;
      if (onnx::load_test_case(tc, c).verdict != TestResult::Passed || known.count(name)) continue;
      std::map<const Graph*, backend::CompiledGraph> cgs;
      try {
        for (const onnx::ImportedModel& m : c.models) cgs.emplace(&m.graph, compile_for_test(m.graph));
      } catch (const Error& e) {
        ADD_FAILURE() << name << ": compile: " << e.what();
        continue;
      }
      ++compiled;
      if (!can_run) continue;
      TestResult r = onnx::check_test_case(c, [&](const Graph& g, const std::vector<HostTensor>& args) { return cgs.at(&g).run(args); });
      if (r.verdict == TestResult::Failed) ADD_FAILURE() << name << ": " << r.detail;
      else ++passed;
    }
  }
  std::cout << fmt::format("ONNX test data compiled for {}: {} cases compiled, {} run and matched{}\n",
                           device_param_name({GetParam(), 0}), compiled, passed, can_run ? "" : " (" + why + ")");
  EXPECT_GE(compiled, 867);
}

}  // namespace
}  // namespace kiln::testing
