#include "frontend/onnx/conformance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "ir/error.h"

namespace kiln::onnx {

namespace fs = std::filesystem;

namespace {

bool is_case(const fs::path& dir) { return fs::exists(dir / "model.onnx"); }

std::vector<fs::path> sorted_subfolders(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory()) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

std::string test_data_dir() {
  const char* set = std::getenv("KILN_ONNX_TEST_DATA");
  return set && *set ? set : "/usr/share/libonnx-testdata/data";
}

const char* verdict_name(TestResult::Verdict v) {
  switch (v) {
    case TestResult::Passed: return "passed";
    case TestResult::Failed: return "failed";
    case TestResult::Unsupported: return "unsupported";
  }
  return "?";
}

std::vector<TestCase> find_test_cases(const std::string& root) {
  const fs::path r(root);
  if (!fs::is_directory(r)) fail("'{}' is not a folder of ONNX test cases (DIR/model.onnx and DIR/test_data_set_N/)", root);
  if (is_case(r)) return {{r.filename().string(), r.string()}};
  std::vector<TestCase> out;
  for (const fs::path& d : sorted_subfolders(r))
    if (is_case(d)) out.push_back({d.filename().string(), d.string()});
  if (out.empty())
    for (const fs::path& suite : sorted_subfolders(r))
      for (const fs::path& d : sorted_subfolders(suite))
        if (is_case(d)) out.push_back({suite.filename().string() + "/" + d.filename().string(), d.string()});
  if (out.empty()) fail("'{}' holds no ONNX test case (a folder with model.onnx), nor folders of them", root);
  return out;
}

namespace {

// Imports the model again with `names` known from `given` (in the order of `all_inputs`),
// adding the run-time values each refusal names, as long as they are model inputs.
TestResult import_specialized(const fs::path& model, const std::vector<std::string>& all_inputs,
                              const std::vector<HostTensor>& given, std::vector<std::string>& names, ImportedModel& out) {
  for (int round = 0; round < 8; ++round) {
    ImportOptions options;
    for (const std::string& n : names) {
      size_t at = static_cast<size_t>(std::find(all_inputs.begin(), all_inputs.end(), n) - all_inputs.begin());
      options.known_inputs[n] = given.at(at);
    }
    try {
      out = load(model.string(), options);
      return {};
    } catch (const Unsupported& e) {
      bool more = !e.run_time_values().empty();
      for (const std::string& v : e.run_time_values())
        more = more && std::find(all_inputs.begin(), all_inputs.end(), v) != all_inputs.end() &&
               std::find(names.begin(), names.end(), v) == names.end();
      if (!more) return TestResult::unsupported(e);
      names.insert(names.end(), e.run_time_values().begin(), e.run_time_values().end());
    } catch (const Error& e) {
      return TestResult::failed("import", std::string("import: ") + e.what());
    }
  }
  return TestResult::failed("import", "specializing its inputs did not converge");
}

}  // namespace

TestResult load_test_case(const TestCase& c, LoadedTestCase& out) {
  const fs::path dir(c.dir);
  const fs::path model = dir / "model.onnx";
  auto add_set = [&](size_t m, const std::vector<HostTensor>& given, std::vector<HostTensor> want) -> std::string {
    const ImportedModel& im = out.models[m];
    if (given.size() != im.input_names.size())
      return fmt::format("{} inputs in a data set, {} in the model", given.size(), im.input_names.size());
    out.sets.push_back({m, graph_arguments(im, given), std::move(want)});
    return "";
  };
  std::vector<std::string> run_time;
  try {
    out.models.push_back(load(model.string()));
  } catch (const Unsupported& e) {
    // specialized below when every value it needs known is a model input
    const std::vector<std::string> inputs = model_input_names(model.string());
    for (const std::string& v : e.run_time_values())
      if (std::find(inputs.begin(), inputs.end(), v) == inputs.end()) return TestResult::unsupported(e);
    if (e.run_time_values().empty()) return TestResult::unsupported(e);
    run_time = e.run_time_values();
  } catch (const Error& e) {
    return TestResult::failed("import", std::string("import: ") + e.what());
  }
  std::vector<std::pair<std::vector<HostTensor>, std::vector<HostTensor>>> data;
  for (const fs::path& set : sorted_subfolders(dir)) {
    if (!set.filename().string().starts_with("test_data_set")) continue;
    std::vector<HostTensor> given, want;
    try {
      for (int i = 0; fs::exists(set / fmt::format("input_{}.pb", i)); ++i)
        given.push_back(read_tensor_proto((set / fmt::format("input_{}.pb", i)).string()));
      for (int i = 0; fs::exists(set / fmt::format("output_{}.pb", i)); ++i)
        want.push_back(read_tensor_proto((set / fmt::format("output_{}.pb", i)).string()));
    } catch (const Unsupported& e) {
      return TestResult::unsupported(e, "its data: ");
    } catch (const Error& e) {
      return TestResult::failed("reading its data", e.what());
    }
    data.emplace_back(std::move(given), std::move(want));
  }
  if (data.empty()) return TestResult::failed("reading its data", fmt::format("{} has no test_data_set folder", c.dir));

  if (run_time.empty()) {
    for (auto& [given, want] : data)
      if (std::string bad = add_set(0, given, std::move(want)); !bad.empty()) return TestResult::failed("import", bad);
    return {};
  }
  // Values kiln needs at import are model inputs here: each data set gets a model specialized on
  // its values.
  const std::vector<std::string> all_inputs = model_input_names(model.string());
  for (auto& [given, want] : data) {
    if (given.size() != all_inputs.size())
      return TestResult::failed("import", fmt::format("{} inputs in a data set, {} in the model", given.size(), all_inputs.size()));
    std::vector<std::string> names = run_time;
    ImportedModel m;
    TestResult r = import_specialized(model, all_inputs, given, names, m);
    if (r.verdict != TestResult::Passed) return r;
    std::vector<HostTensor> rest;
    for (size_t i = 0; i < all_inputs.size(); ++i)
      if (std::find(names.begin(), names.end(), all_inputs[i]) == names.end()) rest.push_back(given[i]);
    out.models.push_back(std::move(m));
    if (std::string bad = add_set(out.models.size() - 1, rest, std::move(want)); !bad.empty()) return TestResult::failed("import", bad);
    for (const std::string& n : names)
      if (std::find(out.specialized.begin(), out.specialized.end(), n) == out.specialized.end()) out.specialized.push_back(n);
  }
  TestResult r;
  r.specialized = out.specialized;
  return r;
}

std::vector<HostTensor> graph_arguments(const ImportedModel& m, const std::vector<HostTensor>& given) {
  std::vector<HostTensor> args;
  size_t k = 0;
  for (const Node* in : m.graph.inputs()) {
    auto w = m.weights.find(in->name());
    if (w != m.weights.end()) args.push_back(w->second);
    else if (k < given.size()) args.push_back(given[k++]);
    else fail("the data set has {} inputs; the graph needs more", given.size());
  }
  return args;
}

// rtol 1e-3, atol 1e-5: ONNX's backend tests compare with rtol 1e-3 and atol 1e-7; kiln's
// kernels compute f32 transcendental functions in f32 and sums in their own order, so values
// near 0 get a little more room.
std::string compare_with_expected(const HostTensor& got, const HostTensor& want, const std::string& name) {
  if (got.shape() != want.shape()) return fmt::format("{}: shape {} expected {}", name, shape_str(got.shape()), shape_str(want.shape()));
  if (got.dtype() != want.dtype()) return fmt::format("{}: dtype {} expected {}", name, dtype_name(got.dtype()), dtype_name(want.dtype()));
  const bool exact = !is_floating(want.dtype());
  const double rtol = want.dtype() == DType::F16 || want.dtype() == DType::BF16 ? 1e-2 : 1e-3;
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

TestResult check_test_case(const LoadedTestCase& c,
                           const std::function<std::vector<HostTensor>(const Graph&, const std::vector<HostTensor>&)>& run) {
  for (size_t s = 0; s < c.sets.size(); ++s) {
    const LoadedTestCase::DataSet& set = c.sets[s];
    const ImportedModel& m = c.models[set.model];
    std::vector<HostTensor> got;
    try {
      got = run(m.graph, set.arguments);
    } catch (const Error& e) {
      return TestResult::failed("run", std::string("run: ") + e.what(), c.specialized);
    }
    if (got.size() != set.expected.size())
      return TestResult::failed("wrong values", fmt::format("{} outputs, expected {}", got.size(), set.expected.size()), c.specialized);
    for (size_t i = 0; i < got.size(); ++i) {
      std::string d = compare_with_expected(got[i], set.expected[i], m.output_names[i]);
      if (!d.empty()) return TestResult::failed("wrong values", fmt::format("data set {}: {}", s, d), c.specialized);
    }
  }
  TestResult r;
  r.specialized = c.specialized;
  return r;
}

}  // namespace kiln::onnx
