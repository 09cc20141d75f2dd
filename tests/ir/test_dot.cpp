// Graphviz export: what the .dot text shows, escaping, and rendering (skipped without Graphviz).
#include <gtest/gtest.h>

#include <filesystem>

#include "ir/dot.h"
#include "ir/error.h"
#include "ir/parser.h"
#include "tests/support/support.h"

namespace {

namespace fs = std::filesystem;

const char* kGraph = R"(graph g(%x: f32[2,4], %w: f32[3,4]) {
  %y = linear(%x, %w) : f32[2,3]
  %a, %b = split(%y, split_size=2, dim=1) : f32[2,2]{3,1}, f32[2,1]{3,1}
  %g = gelu(%a, approximate="tanh") : f32[2,2]
  return (%g, %b)
}
)";

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(Dot, ShowsInputsNodesEdgesAndOutputs) {
  std::string dot = kiln::to_dot(kiln::parse_graph(kGraph));
  EXPECT_TRUE(contains(dot, "digraph \"g\" {")) << dot;
  // Inputs are drawn apart from nodes, with their types.
  EXPECT_TRUE(contains(dot, "in0 [label=\"%x\\nf32[2,4]\", style=\"rounded,filled\"")) << dot;
  // A node: results, op, types, attributes (defaults left out).
  EXPECT_TRUE(contains(dot, "n2 [label=\"%y = linear\\nf32[2,3]\"]")) << dot;
  EXPECT_TRUE(contains(dot, "n3 [label=\"%a, %b = split\\nf32[2,2]{3,1}\\nf32[2,1]{3,1}\\nsplit_size=2\\ndim=1\"]")) << dot;
  // Edges carry the value's type, and the result's name when the producer has several.
  EXPECT_TRUE(contains(dot, "in0 -> n2 [label=\"f32[2,4]\"]")) << dot;
  EXPECT_TRUE(contains(dot, "n3 -> n4 [label=\"%a: f32[2,2]{3,1}\"]")) << dot;
  // Outputs meet in the return box, numbered.
  EXPECT_TRUE(contains(dot, "n4 -> return [label=\"#0 f32[2,2]\"]")) << dot;
  EXPECT_TRUE(contains(dot, "n3 -> return [label=\"#1 %b: f32[2,1]{3,1}\"]")) << dot;
}

TEST(Dot, EscapesQuotesBackslashesAndNewlines) {
  EXPECT_EQ(kiln::dot_escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  std::string dot = kiln::to_dot(kiln::parse_graph(kGraph));
  EXPECT_TRUE(contains(dot, "approximate=\\\"tanh\\\"")) << dot;
}

TEST(Dot, LongAttributesAreCut) {
  std::string values;
  for (int i = 0; i < 100; ++i) values += (i ? "," : "") + std::to_string(i) + ".5";
  auto g = kiln::parse_graph("graph c() {\n  %c = constant(size=[100], dtype=f32, values=[" + values +
                             "]) : f32[100]\n  return (%c)\n}\n");
  kiln::DotOptions opts;
  opts.max_attr_chars = 20;
  std::string dot = kiln::to_dot(g, opts);
  EXPECT_TRUE(contains(dot, "values=[0.5,1.5,2...")) << dot;
  EXPECT_FALSE(contains(dot, "99.5")) << dot;
}

TEST(Dot, EdgeTypesCanBeLeftOff) {
  kiln::DotOptions opts;
  opts.edge_types = false;
  std::string dot = kiln::to_dot(kiln::parse_graph(kGraph), opts);
  EXPECT_TRUE(contains(dot, "in0 -> n2;")) << dot;
}

TEST(Dot, WritesDotTextWithoutGraphviz) {
  fs::path p = fs::temp_directory_path() / "kiln_test_dot.dot";
  kiln::write_graph_image(kiln::parse_graph(kGraph), p.string());
  EXPECT_TRUE(contains(kiln::testing::read_text(p.string()), "digraph"));
  fs::remove(p);
}

TEST(Dot, UnknownExtensionIsAnError) {
  try {
    kiln::write_graph_image(kiln::parse_graph(kGraph), "graph.jpeg");
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_TRUE(contains(e.what(), "use .dot, .svg or .png")) << e.what();
  }
}

TEST(Dot, RendersSvgWhenGraphvizIsInstalled) {
  if (!kiln::find_dot_program()) GTEST_SKIP() << "Graphviz is not installed";
  fs::path p = fs::temp_directory_path() / "kiln_test_dot.svg";
  kiln::write_graph_image(kiln::parse_graph(kGraph), p.string());
  EXPECT_TRUE(contains(kiln::testing::read_text(p.string()), "<svg"));
  fs::remove(p);
}

TEST(Dot, MissingGraphvizIsAClearError) {
  // With an empty PATH there is no `dot` to find.
  std::string old = getenv("PATH") ? getenv("PATH") : "";
  setenv("PATH", "/nonexistent-kiln-dir", 1);
  bool found = kiln::find_dot_program().has_value();
  std::string msg;
  try {
    kiln::render_dot("digraph {}", (fs::temp_directory_path() / "never.svg").string(), "svg");
  } catch (const kiln::Error& e) {
    msg = e.what();
  }
  setenv("PATH", old.c_str(), 1);
  EXPECT_FALSE(found);
  EXPECT_TRUE(contains(msg, "Graphviz is not installed")) << msg;
}

TEST(Dot, GraphvizFailureCarriesItsMessage) {
  if (!kiln::find_dot_program()) GTEST_SKIP() << "Graphviz is not installed";
  try {
    kiln::render_dot("digraph { this is not dot", (fs::temp_directory_path() / "bad.svg").string(), "svg");
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_TRUE(contains(e.what(), "Graphviz 'dot' failed")) << e.what();
  }
}

}  // namespace
