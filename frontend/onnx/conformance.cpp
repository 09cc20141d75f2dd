#include "frontend/onnx/conformance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

TestResult load_test_case(const TestCase& c, LoadedTestCase& out) {
  const fs::path dir(c.dir);
  try {
    out.model = load((dir / "model.onnx").string());
  } catch (const Unsupported& e) {
    return {TestResult::Unsupported, e.causes(), e.what()};
  } catch (const Error& e) {
    return {TestResult::Failed, {"import"}, std::string("import: ") + e.what()};
  }
  std::vector<fs::path> sets;
  for (const fs::path& d : sorted_subfolders(dir))
    if (d.filename().string().starts_with("test_data_set")) sets.push_back(d);
  for (const fs::path& set : sets) {
    std::vector<HostTensor> given, want;
    try {
      for (int i = 0; fs::exists(set / fmt::format("input_{}.pb", i)); ++i)
        given.push_back(read_tensor_proto((set / fmt::format("input_{}.pb", i)).string()));
      for (int i = 0; fs::exists(set / fmt::format("output_{}.pb", i)); ++i)
        want.push_back(read_tensor_proto((set / fmt::format("output_{}.pb", i)).string()));
    } catch (const Unsupported& e) {
      return {TestResult::Unsupported, e.causes(), std::string("its data: ") + e.what()};
    } catch (const Error& e) {
      return {TestResult::Failed, {"reading its data"}, e.what()};
    }
    size_t own_inputs = out.model.input_names.size();
    if (given.size() != own_inputs)
      return {TestResult::Failed, {"import"}, fmt::format("{} inputs in {}, {} in the model", given.size(), set.filename().string(), own_inputs)};
    out.sets.emplace_back(std::move(given), std::move(want));
  }
  if (out.sets.empty()) return {TestResult::Failed, {"reading its data"}, fmt::format("{} has no test_data_set folder", c.dir)};
  return {};
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

TestResult check_test_case(const LoadedTestCase& c, const std::function<std::vector<HostTensor>(const std::vector<HostTensor>&)>& run) {
  const ImportedModel& m = c.model;
  for (size_t s = 0; s < c.sets.size(); ++s) {
    const auto& [given, want] = c.sets[s];
    std::vector<HostTensor> got;
    try {
      got = run(graph_arguments(m, given));
    } catch (const Error& e) {
      return {TestResult::Failed, {"run"}, std::string("run: ") + e.what()};
    }
    if (got.size() != want.size())
      return {TestResult::Failed, {"wrong values"}, fmt::format("{} outputs, expected {}", got.size(), want.size())};
    for (size_t i = 0; i < got.size(); ++i) {
      std::string d = compare_with_expected(got[i], want[i], m.output_names[i]);
      if (!d.empty()) return {TestResult::Failed, {"wrong values"}, fmt::format("test_data_set_{}: {}", s, d)};
    }
  }
  return {};
}

}  // namespace kiln::onnx
