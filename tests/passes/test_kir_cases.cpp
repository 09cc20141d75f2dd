// The .kir cases in tests/passes/cases/: each file holds the input graph and the expected
// graph, and names its pipeline on its first line ("# RUN: cse,dce"). One test per file.
// A case whose expected graph equals its input also checks that no pass claimed a change.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "passes/pipeline.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

std::string cases_dir() { return kiln::testing::data_dir() + "/passes/cases"; }

std::vector<std::string> case_files() {
  std::vector<std::string> files;
  for (auto& e : std::filesystem::directory_iterator(cases_dir()))
    if (e.path().extension() == ".kir") files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  return files;
}

// "# RUN: cse,dce" on the first line -> "cse,dce".
std::string run_line(const std::string& text, const std::string& file) {
  const std::string prefix = "# RUN:";
  if (text.rfind(prefix, 0) != 0) throw std::runtime_error(file + ": the first line must be '# RUN: <passes>'");
  return text.substr(prefix.size(), text.find('\n') - prefix.size());
}

class KirCase : public ::testing::TestWithParam<std::string> {};

TEST_P(KirCase, Pipeline) {
  std::string path = cases_dir() + "/" + GetParam();
  std::string text = kiln::testing::read_text(path);
  std::vector<Graph> graphs = parse_graphs(text, path);
  ASSERT_EQ(graphs.size(), 2u) << path << ": a case holds the input graph and the expected graph";
  Graph& g = graphs[0];
  std::string input = print_graph(g), expected = print_graph(graphs[1]);

  PassReport report = run_pipeline(g, parse_pipeline(run_line(text, path)));

  EXPECT_EQ(print_graph(g), expected) << path << "\n" << format_report(report);
  EXPECT_EQ(report.changed(), input != expected) << "a pass reported a change it did not make, or hid one\n"
                                                 << format_report(report);
}

std::string test_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string name = std::filesystem::path(info.param).stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Cases, KirCase, ::testing::ValuesIn(case_files()), test_name);

}  // namespace
}  // namespace kiln
