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
#include <regex>
#include <set>

#include "frontend/onnx/onnx.h"
#include "ir/reference/interpreter.h"
#include "tests/backend/backend_check.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

const char* kTestData = "/usr/share/libonnx-testdata/data";

struct CaseResult {
  enum Kind { Pass, Refused, Fail } kind = Pass;
  std::string detail;
};

// rtol 1e-3, atol 1e-5: ONNX's backend tests compare with rtol 1e-3 and atol 1e-7; kiln's
// reference kernels compute f32 transcendental functions in f32 and sums in their own order, so
// values near 0 get a little more room.
std::string compare(const HostTensor& got, const HostTensor& want, const std::string& name) {
  if (got.shape() != want.shape()) return fmt::format("{}: shape {} expected {}", name, shape_str(got.shape()), shape_str(want.shape()));
  if (got.dtype() != want.dtype()) return fmt::format("{}: dtype {} expected {}", name, dtype_name(got.dtype()), dtype_name(want.dtype()));
  bool exact = !is_floating(want.dtype());
  double rtol = want.dtype() == DType::F16 || want.dtype() == DType::BF16 ? 1e-2 : 1e-3;
  for (int64_t i = 0; i < want.numel(); ++i) {
    if (exact) {
      if (got.get_int(i) != want.get_int(i)) return fmt::format("{}[{}] = {} expected {}", name, i, got.get_int(i), want.get_int(i));
      continue;
    }
    double g = got.get(i), w = want.get(i);
    if (std::isnan(w) && std::isnan(g)) continue;
    if (std::isinf(w) && g == w) continue;
    if (!(std::abs(g - w) <= 1e-5 + rtol * std::abs(w))) return fmt::format("{}[{}] = {} expected {}", name, i, g, w);
  }
  return "";
}

// A case imported, with its data sets: the model's own inputs (the weights come with the
// model) and the expected outputs.
struct LoadedCase {
  onnx::ImportedModel model;
  std::vector<std::pair<std::vector<HostTensor>, std::vector<HostTensor>>> sets;
};

CaseResult load_case(const fs::path& dir, LoadedCase& out) {
  try {
    out.model = onnx::load((dir / "model.onnx").string());
  } catch (const onnx::Unsupported& e) {
    return {CaseResult::Refused, e.what()};
  } catch (const Error& e) {
    return {CaseResult::Fail, std::string("import: ") + e.what()};
  }
  for (const auto& set : fs::directory_iterator(dir)) {
    if (!set.is_directory() || set.path().filename().string().rfind("test_data_set", 0) != 0) continue;
    std::vector<HostTensor> given, want;
    try {
      for (int i = 0; fs::exists(set.path() / fmt::format("input_{}.pb", i)); ++i)
        given.push_back(onnx::read_tensor_proto((set.path() / fmt::format("input_{}.pb", i)).string()));
      for (int i = 0; fs::exists(set.path() / fmt::format("output_{}.pb", i)); ++i)
        want.push_back(onnx::read_tensor_proto((set.path() / fmt::format("output_{}.pb", i)).string()));
    } catch (const onnx::Unsupported& e) {
      return {CaseResult::Refused, std::string("its data: ") + e.what()};
    }
    if (given.size() != out.model.input_names.size())
      return {CaseResult::Fail, fmt::format("{} inputs in the data set, {} in the model", given.size(), out.model.input_names.size())};
    out.sets.emplace_back(std::move(given), std::move(want));
  }
  return {};
}

// Runs every data set of `c` through `run` (the interpreter, or a compiled graph) and compares.
CaseResult check_case(const LoadedCase& c, const std::function<std::vector<HostTensor>(const std::vector<HostTensor>&)>& run) {
  const onnx::ImportedModel& m = c.model;
  for (const auto& [given, want] : c.sets) {
    std::vector<HostTensor> args;
    size_t k = 0;
    for (const Node* in : m.graph.inputs()) {
      auto w = m.weights.find(in->name());
      args.push_back(w != m.weights.end() ? w->second : given[k++]);
    }
    std::vector<HostTensor> got;
    try {
      got = run(args);
    } catch (const Error& e) {
      return {CaseResult::Fail, std::string("run: ") + e.what()};
    }
    if (got.size() != want.size()) return {CaseResult::Fail, fmt::format("{} outputs, expected {}", got.size(), want.size())};
    for (size_t i = 0; i < got.size(); ++i) {
      std::string d = compare(got[i], want[i], m.output_names[i]);
      if (!d.empty()) return {CaseResult::Fail, d};
    }
  }
  return {};
}

CaseResult run_case(const fs::path& dir) {
  LoadedCase c;
  CaseResult r = load_case(dir, c);
  if (r.kind != CaseResult::Pass) return r;
  return check_case(c, [&](const std::vector<HostTensor>& args) { return interpret(c.model.graph, args); });
}

std::vector<fs::path> case_dirs(const char* suite) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::directory_iterator(fs::path(kTestData) / suite))
    if (fs::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  std::sort(dirs.begin(), dirs.end());
  return dirs;
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
  if (!fs::exists(kTestData)) GTEST_SKIP() << "ONNX's test data is not installed (libonnx-testdata)";
  auto known = known_failures();
  std::map<std::string, int> passed, refused, failed;
  std::map<std::string, int> refused_ops;
  std::vector<std::string> unexpected;
  std::regex op_line(R"(\n  ([A-Za-z.]+) \(\d+ node)");
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    for (const fs::path& dir : case_dirs(suite)) {
      std::string name = dir.filename().string();
      CaseResult r = run_case(dir);
      bool listed = known.count(name) != 0;
      if (r.kind == CaseResult::Pass) {
        ++passed[suite];
        if (listed) unexpected.push_back(name + " passes but is listed in known_failures.txt: take it out");
      } else if (r.kind == CaseResult::Refused) {
        ++refused[suite];
        for (std::sregex_iterator it(r.detail.begin(), r.detail.end(), op_line), end; it != end; ++it) ++refused_ops[(*it)[1]];
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
  for (const auto& [op, n] : refused_ops) ops.push_back({-n, op});
  std::sort(ops.begin(), ops.end());
  std::string top;
  for (size_t i = 0; i < ops.size() && i < 25; ++i) top += fmt::format(" {}({})", ops[i].second, -ops[i].first);
  std::cout << "ONNX test data:" << summary << "\n  most refused operators (cases):" << top << "\n";
  for (const std::string& u : unexpected) ADD_FAILURE() << u;
  // A floor, so that a converter that goes missing from the table (its cases then refused, not
  // failed) is noticed: raise it as operators are added.
  EXPECT_GE(passed["node"], 500);
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
  if (!fs::exists(kTestData)) GTEST_SKIP() << "ONNX's test data is not installed (libonnx-testdata)";
  KILN_REQUIRE_JIT();
  std::string why;
  bool can_run = device_can_run(&why);
  auto known = known_failures();
  int compiled = 0, passed = 0;
  for (const char* suite : {"node", "pytorch-converted", "pytorch-operator", "simple"}) {
    for (const fs::path& dir : case_dirs(suite)) {
      std::string name = dir.filename().string();
      LoadedCase c;
      if (load_case(dir, c).kind != CaseResult::Pass || known.count(name)) continue;
      backend::CompiledGraph cg;
      try {
        cg = compile_for_test(c.model.graph);
      } catch (const Error& e) {
        ADD_FAILURE() << name << ": compile: " << e.what();
        continue;
      }
      ++compiled;
      if (!can_run) continue;
      CaseResult r = check_case(c, [&](const std::vector<HostTensor>& args) { return cg.run(args); });
      if (r.kind == CaseResult::Fail) ADD_FAILURE() << name << ": " << r.detail;
      else ++passed;
    }
  }
  std::cout << fmt::format("ONNX test data compiled for {}: {} cases compiled, {} run and matched{}\n",
                           device_param_name({GetParam(), 0}), compiled, passed, can_run ? "" : " (" + why + ")");
  EXPECT_GE(compiled, 550);
}

}  // namespace
}  // namespace kiln::testing
