// kiln onnx-test [DIR] [--device reference|cpu|cuda[:N]] [--filter RE] [--jobs J] [--verbose]:
// ONNX's backend test cases (default: ONNX's node tests from Debian's libonnx-testdata, 932
// cases, or $KILN_ONNX_TEST_DATA/node where that is set) imported, compiled for the device and
// compared with the outputs ONNX's reference computed. Prints "N passed, M failed, K unsupported", each failure, and a table of what the
// unsupported cases need, by cause. Exit code 1 if any case failed (or fewer than --min-passed
// passed).
#include <fmt/format.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include <fmt/ranges.h>
#include <sstream>

#include "backend/compile.h"
#include "frontend/onnx/conformance.h"
#include "ir/error.h"
#include "ir/reference/interpreter.h"
#include "tools/cli/commands.h"
#include "tools/cli/device.h"
#include "tools/cli/forked_jobs.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;
using onnx::TestResult;

struct OnnxTestOptions {
  std::string dir = std::string(onnx::test_data_dir()) + "/node";
  std::string device = "cpu";
  std::string filter;
  int jobs = 1;
  int case_timeout = 300;
  int min_passed = 0;
  bool verbose = false;
};

// One case: imported, compiled for the device (or interpreted), every data set compared.
TestResult run_one(const onnx::TestCase& c, const OnnxTestOptions& o) {
  onnx::LoadedTestCase loaded;
  TestResult r = onnx::load_test_case(c, loaded);
  if (r.verdict != TestResult::Passed) return r;
  if (o.device == "reference")
    return onnx::check_test_case(loaded, [](const Graph& g, const std::vector<HostTensor>& args) { return interpret(g, args); });
  backend::CompileOptions options;
  options.device = parse_device(o.device);
  options.origin = "kiln onnx-test";
  // A compile per model (a case specialized on its data sets' values has one per data set).
  std::map<const Graph*, backend::CompiledGraph> compiled;
  for (const onnx::ImportedModel& m : loaded.models) {
    try {
      compiled.emplace(&m.graph, backend::compile(m.graph, options));
    } catch (const Error& e) {
      return TestResult::failed("compile", std::string("compile: ") + e.what(), loaded.specialized);
    }
  }
  return onnx::check_test_case(loaded, [&](const Graph& g, const std::vector<HostTensor>& args) { return compiled.at(&g).run(args); });
}

struct Recorded {
  std::string name;
  TestResult result;
};

// A job's results file: "#start\tNAME" before each case (so that a crash or a hang names it),
// then "VERDICT\tNAME\tCAUSE|CAUSE\tSPECIALIZED|INPUTS\tDETAIL".
void run_job(const std::vector<onnx::TestCase>& cases, const OnnxTestOptions& o, int job, std::ostream& out) {
  for (size_t i = static_cast<size_t>(job); i < cases.size(); i += static_cast<size_t>(o.jobs)) {
    out << "#start\t" << cases[i].name << '\n';
    out.flush();
    alarm(static_cast<unsigned>(o.case_timeout));
    TestResult r = run_one(cases[i], o);
    alarm(0);
    auto joined = [](const std::vector<std::string>& xs) {
      std::string s;
      for (const std::string& x : xs) s += (s.empty() ? "" : "|") + escape_line(x);
      return s;
    };
    out << onnx::verdict_name(r.verdict) << '\t' << cases[i].name << '\t' << joined(r.causes) << '\t' << joined(r.specialized)
        << '\t' << escape_line(r.detail) << '\n';
    out.flush();
  }
}

std::vector<Recorded> read_job(const fs::path& path, std::string* last_started) {
  std::vector<Recorded> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::stringstream ss(line);
    std::string verdict, name, causes, specialized, detail;
    std::getline(ss, verdict, '\t');
    std::getline(ss, name, '\t');
    if (verdict == "#start") {
      *last_started = name;
      continue;
    }
    last_started->clear();
    std::getline(ss, causes, '\t');
    std::getline(ss, specialized, '\t');
    std::getline(ss, detail);
    Recorded r{name, {}};
    r.result.verdict = verdict == "passed" ? TestResult::Passed : verdict == "failed" ? TestResult::Failed : TestResult::Unsupported;
    auto split = [](const std::string& s) {
      std::vector<std::string> out;
      std::stringstream cs(s);
      for (std::string c; std::getline(cs, c, '|');) out.push_back(c);
      return out;
    };
    r.result.causes = split(causes);
    r.result.specialized = split(specialized);
    r.result.detail = detail;
    out.push_back(std::move(r));
  }
  return out;
}

int run_onnx_test(const OnnxTestOptions& o) {
  if (o.jobs < 1) fail("--jobs must be at least 1");
  if (std::string why; !onnx::available(&why)) fail("kiln onnx-test: {}", why);
  std::vector<onnx::TestCase> cases = onnx::find_test_cases(o.dir);
  if (!o.filter.empty()) {
    std::regex re;
    try {
      re = std::regex(o.filter);
    } catch (const std::regex_error& e) {
      fail("--filter '{}' is not a regular expression: {}", o.filter, e.what());
    }
    std::erase_if(cases, [&](const onnx::TestCase& c) { return !std::regex_search(c.name, re); });
    if (cases.empty()) fail("--filter '{}' matches none of the cases in {}", o.filter, o.dir);
  }
  if (o.device != "reference") require_runnable_in_a_child(parse_device(o.device), "kiln onnx-test");
  const auto t0 = std::chrono::steady_clock::now();
  const int jobs = std::min<int>(o.jobs, static_cast<int>(cases.size()));
  const fs::path tmp = fs::temp_directory_path() / fmt::format("kiln-onnx-test-{}", getpid());
  fs::create_directories(tmp);
  OnnxTestOptions jo = o;
  jo.jobs = jobs;
  const std::vector<std::string> endings = run_forked_jobs("kiln onnx-test", jobs, [&](int j) {
    std::ofstream f(tmp / fmt::format("job{}.tsv", j));
    run_job(cases, jo, j, f);
  });
  std::vector<Recorded> all;
  for (int j = 0; j < jobs; ++j) {
    std::string last_started;
    std::vector<Recorded> part = read_job(tmp / fmt::format("job{}.tsv", j), &last_started);
    all.insert(all.end(), part.begin(), part.end());
    if (!endings[static_cast<size_t>(j)].empty()) {
      // The case the job was running when it died (a crash, or SIGALRM past --case-timeout) fails;
      // the job's cases after it were not run.
      Recorded r{last_started.empty() ? fmt::format("(job {})", j) : last_started, {}};
      r.result = TestResult::failed("crash or hang",
                                    fmt::format("its job ended ({}) while running it; the job's later cases were not run", endings[static_cast<size_t>(j)]));
      all.push_back(std::move(r));
    }
  }
  fs::remove_all(tmp);
  std::sort(all.begin(), all.end(), [](const Recorded& a, const Recorded& b) { return a.name < b.name; });
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<TestResult::Verdict, int> counts;
  int specialized = 0;
  std::map<std::string, int> unsupported_causes;
  for (const Recorded& r : all) {
    ++counts[r.result.verdict];
    specialized += r.result.verdict == TestResult::Passed && !r.result.specialized.empty();
    if (r.result.verdict == TestResult::Unsupported)
      for (const std::string& c : r.result.causes) ++unsupported_causes[c];
    if (o.verbose || r.result.verdict == TestResult::Failed) {
      std::string why = r.result.verdict == TestResult::Failed ? r.result.detail : fmt::format("{}", fmt::join(r.result.causes, "; "));
      if (r.result.verdict == TestResult::Passed && !r.result.specialized.empty())
        why = fmt::format("specialized on the values of {}", fmt::join(r.result.specialized, ", "));
      fmt::print("{:<11} {}{}\n", onnx::verdict_name(r.result.verdict), r.name, why.empty() ? "" : ": " + why);
    }
  }
  std::vector<std::pair<int, std::string>> table;
  for (const auto& [cause, n] : unsupported_causes) table.push_back({-n, cause});
  std::sort(table.begin(), table.end());
  if (!table.empty()) {
    fmt::print("\nunsupported, by cause (a case may have several):\n  {:<64} {:>5}\n", "cause", "cases");
    for (const auto& [n, cause] : table) fmt::print("  {:<64} {:>5}\n", cause, -n);
  }
  fmt::print("\nkiln onnx-test: {} case{} of {} on {}{}, in {:.1f} s\n", cases.size(), cases.size() == 1 ? "" : "s", o.dir, o.device,
             jobs > 1 ? fmt::format(", {} jobs", jobs) : "", s);
  fmt::print("{} passed, {} failed, {} unsupported\n", counts[TestResult::Passed], counts[TestResult::Failed],
             counts[TestResult::Unsupported]);
  if (specialized)
    fmt::print("({} of the passed cases give a shape, axes or count as a model input: each data set ran on a graph "
               "specialized on its values)\n", specialized);
  if (counts[TestResult::Passed] < o.min_passed) {
    fmt::print("fewer cases passed than --min-passed {}\n", o.min_passed);
    return 1;
  }
  return counts[TestResult::Failed] ? 1 : 0;
}

}  // namespace

void add_onnx_test_command(CLI::App& app) {
  auto o = std::make_shared<OnnxTestOptions>();
  auto* cmd = app.add_subcommand("onnx-test", "Run ONNX's backend test cases (ONNX's own node tests by default) and count what passes");
  cmd->add_option("dir", o->dir, "a test case (a folder with model.onnx and test_data_set_N/), a folder of them, or a folder of such folders")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "reference (the interpreter), cpu, cuda or cuda:N")->capture_default_str();
  cmd->add_option("--filter", o->filter, "only the cases whose name this regular expression finds");
  cmd->add_option("--jobs", o->jobs, "processes sharing the cases")->capture_default_str();
  cmd->add_option("--case-timeout", o->case_timeout, "seconds a case may take before it counts as hung")->capture_default_str();
  cmd->add_option("--min-passed", o->min_passed, "exit 1 also when fewer cases than this pass (a floor for CI)");
  cmd->add_flag("--verbose", o->verbose, "print every case's verdict, not only the failures");
  cmd->callback([o] { std::exit(run_onnx_test(*o)); });
}

}  // namespace kiln::cli
