// Parser and printer: print(parse(x)) == x for canonical text, and non-canonical text
// (comments, blank lines, spacing, default attributes spelled out) prints canonically.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/error.h"
#include "ir/parser.h"
#include "tests/support/support.h"
#include "ir/printer.h"

namespace {

std::string round_trip(const std::string& text) {
  std::string out;
  for (auto& g : kiln::parse_graphs(text)) out += (out.empty() ? "" : "\n") + kiln::print_graph(g);
  return out;
}

// A user op with a free-form string attribute, to round-trip strings with escapes.
kiln::Op label_op() {
  static kiln::Op op = [] {
    if (auto* info = kiln::find_op("test_label")) return info->op;
    return kiln::register_op(
        "test_label", kiln::OpCategory::Pointwise, "Tensor self, str label=\"\"",
        [](std::span<const kiln::TensorMeta> in, const kiln::Attrs&) { return std::vector{in[0].contiguous()}; },
        nullptr);
  }();
  return op;
}

TEST(Parser, CanonicalTextRoundTrips) {
  const std::string text = R"(graph g(%x: f32[2,3], %i: i64[4]) {
  %c = clamp(%x, min=-inf, max=inf) : f32[2,3]
  %f = full(size=[2], fill_value=nan) : f32[2]
  %k = constant(size=[3], dtype=f64, values=[1.5,-inf,nan]) : f64[3]
  %s = sum(%x, dim=[0,1], keepdim=true) : f32[1,1]
  %p = permute(%x, dims=[1,0]) : f32[3,2]{1,3}
  %m = mul(%c, %s) : f32[2,3]
  return (%m, %f, %k, %p, %i)
}
)";
  EXPECT_EQ(round_trip(text), text);
}

TEST(Parser, FloatAttributesKeepTheirValues) {
  auto g = kiln::parse_graph(
      "graph g(%x: f32[2]) {\n  %c = clamp(%x, min=-inf, max=1e-30) : f32[2]\n  %k = constant(size=[2], dtype=f32, "
      "values=[nan, 0.1]) : f32[2]\n  return (%c, %k)\n}\n");
  auto nodes = g.nodes();
  EXPECT_EQ(nodes[0]->attrs().get_float("min"), -INFINITY);
  EXPECT_EQ(nodes[0]->attrs().get_float("max"), 1e-30);
  auto values = nodes[1]->attrs().get_floats("values");
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_EQ(values[1], 0.1);
}

// nan_to_num's attributes are named nan, posinf and neginf: before '=' `nan` is a name, after
// it a number.
TEST(Parser, NanIsAnAttributesNameBeforeEqualsAndANumberAfter) {
  const std::string text = R"(graph g(%x: f32[2]) {
  %y = nan_to_num(%x, nan=nan, posinf=inf, neginf=-inf) : f32[2]
  %z = nan_to_num(%x, nan=0.5) : f32[2]
  return (%y, %z)
}
)";
  EXPECT_EQ(round_trip(text), text);
  auto g = kiln::parse_graph("graph g(%x: f32[2]) {\n  %y = nan_to_num(%x, nan = 2.0) : f32[2]\n  return (%y)\n}\n");
  EXPECT_EQ(g.nodes()[0]->attrs().get_float("nan"), 2.0);
  EXPECT_TRUE(std::isnan(kiln::parse_graph(text).nodes()[0]->attrs().get_float("nan")));
}

TEST(Parser, StringsWithEscapesRoundTrip) {
  label_op();
  const std::string text =
      "graph g(%x: f32[2]) {\n  %y = test_label(%x, label=\"say \\\"hi\\\"\\nback\\\\slash # not a comment\") : f32[2]\n"
      "  return (%y)\n}\n";
  auto g = kiln::parse_graph(text);
  EXPECT_EQ(g.nodes()[0]->attrs().get_string("label"), "say \"hi\"\nback\\slash # not a comment");
  EXPECT_EQ(kiln::print_graph(g), text);
}

TEST(Parser, MultiGraphFilesRoundTrip) {
  const std::string text = R"(graph forward(%x: f32[4]) {
  %y = exp(%x) : f32[4]
  return (%y)
}

graph backward(%y: f32[4], %gy: f32[4]) {
  %gx = mul(%gy, %y) : f32[4]
  return (%gx)
}
)";
  auto graphs = kiln::parse_graphs(text);
  ASSERT_EQ(graphs.size(), 2u);
  EXPECT_EQ(graphs[0].name(), "forward");
  EXPECT_EQ(graphs[1].name(), "backward");
  EXPECT_EQ(round_trip(text), text);
  EXPECT_THROW(kiln::parse_graph(text), kiln::Error);  // parse_graph wants exactly one
}

TEST(Parser, AResultAnnotationWithoutStridesChecksDtypeAndShapeOnly) {
  using namespace kiln;
  Graph g = parse_graph(
      "graph v(%x: f32[8,4,6]) {\n"
      "  %t = transpose(%x, dim0=0, dim1=2) : f32[6,4,8]\n"
      "  return (%t)\n"
      "}\n");
  EXPECT_EQ(g.outputs()[0].meta().strides, (Strides{1, 6, 24}));
  EXPECT_NE(print_graph(g).find("f32[6,4,8]{1,6,24}"), std::string::npos);  // the printer writes them
  // Written strides must still match, and so must the shape.
  EXPECT_THROW(parse_graph("graph v(%x: f32[8,4,6]) {\n  %t = transpose(%x, dim0=0, dim1=2) : f32[6,4,8]{24,6,1}\n  return (%t)\n}\n"),
               Error);
  try {
    parse_graph("graph v(%x: f32[8,4,6]) {\n  %t = transpose(%x, dim0=0, dim1=2) : f32[6,4,9]\n  return (%t)\n}\n");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the annotated type f32[6,4,9] differs from the inferred type f32[6,4,8]{1,6,24}"),
              std::string::npos)
        << e.what();
  }
}

TEST(Parser, StridesAndDevicesRoundTrip) {
  const std::string text = R"(graph g(%a: f32[4,8]{1,4}, %b: bf16[2]@cuda:0, %c: f16[3]@cuda:1, %d: i32[2,2]{2,1}) {
  %t = transpose(%a, dim0=0, dim1=1) : f32[8,4]
  return (%t, %b, %c, %d)
}
)";
  auto g = kiln::parse_graph(text);
  EXPECT_EQ(g.inputs()[0]->meta().strides, (kiln::Strides{1, 4}));
  EXPECT_EQ(g.inputs()[1]->meta().device, kiln::Device::cuda(0));
  EXPECT_EQ(g.inputs()[2]->meta().device, kiln::Device::cuda(1));
  // {2,1} is contiguous: printed without strides. @cpu is the default: printed without.
  std::string expected = text;
  expected.replace(expected.find("i32[2,2]{2,1}"), 13, "i32[2,2]");
  EXPECT_EQ(round_trip(text), expected);
  EXPECT_EQ(kiln::parse_type("f32[2]@cpu"), kiln::TensorMeta(kiln::DType::F32, {2}));
}

TEST(Parser, CommentsBlankLinesAndSpacingPrintCanonically) {
  const std::string messy = R"(# a file with comments
graph   g( %x : f32[ 2 , 3 ] ,
           %y: f32[3] )   {   # the body

  # a comment line
  %s   =   softmax( %x , dim = -1 )   :   f32[2,3]   # trailing comment
  %z = add(%s, %y)   # no type annotation: inferred
  %g = gelu(%z, approximate="none") : f32[2,3]
  return ( %g )
}
# after the graph
)";
  const std::string canonical = R"(graph g(%x: f32[2,3], %y: f32[3]) {
  %s = softmax(%x, dim=-1) : f32[2,3]
  %z = add(%s, %y) : f32[2,3]
  %g = gelu(%z) : f32[2,3]
  return (%g)
}
)";
  EXPECT_EQ(round_trip(messy), canonical);
  EXPECT_EQ(round_trip(canonical), canonical);
}

TEST(Parser, EmptyParameterAndReturnLists) {
  const std::string text = "graph g() {\n  %z = zeros(size=[2]) : f32[2]\n  return (%z)\n}\n";
  EXPECT_EQ(round_trip(text), text);
  EXPECT_EQ(round_trip("graph h() {\n  return ()\n}\n"), "graph h() {\n  return ()\n}\n");
}

TEST(Parser, ParseFileNamesAMissingFile) {
  try {
    kiln::parse_file("/nonexistent/x.kir");
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open '/nonexistent/x.kir'"), std::string::npos) << e.what();
  }
  try {
    kiln::parse_file(kiln::testing::data_dir());
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory, not a .kir file"), std::string::npos) << e.what();
  }
}

TEST(Parser, ErrorsCarryTheFileName) {
  try {
    kiln::parse_graphs("graph g() {\n  return (%q)\n}\n", "model.kir");
    FAIL();
  } catch (const kiln::Error& e) {
    EXPECT_EQ(std::string(e.what()), "model.kir:2:11: error: return of undefined value '%q'");
    EXPECT_EQ(e.loc().line, 2);
    EXPECT_EQ(e.loc().column, 11);
  }
}

}  // namespace
