// The pattern helper of passes/pattern.h, on rules written here for the purpose.
#include <gtest/gtest.h>

#include <cstdlib>

#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/canonicalize.h"
#include "passes/pattern.h"

namespace kiln {
namespace {

using namespace rewrite;

const char* kMuls = R"(graph g(%a: f32[4], %b: f32[4]) {
  %p = mul(%a, %a) : f32[4]
  %q = mul(%a, %b) : f32[4]
  return (%p, %q)
}
)";

TEST(Pattern, ARepeatedVarMatchesOneValue) {
  Var x("x");
  std::vector<Rule> rules{rule("x*x -> square(x)", op(Op::Mul, x, x),
                               [x](const Match& m, Why&) -> Rewrite { return NewNode{Op::Square, {m[x]}, {}}; })};
  Graph g = parse_graph(kMuls);
  EXPECT_TRUE(apply_rules(g, rules, "test_pattern"));
  // The new node takes the replaced node's name and place; mul(a, b) is no square.
  EXPECT_EQ(print_graph(g), R"(graph g(%a: f32[4], %b: f32[4]) {
  %p = square(%a) : f32[4]
  %q = mul(%a, %b) : f32[4]
  return (%p, %q)
}
)");
}

TEST(Pattern, NothingChangesUnlessTheReplacementKeepsTheType) {
  Var x("x");
  // to(x, f64) has another dtype than mul's f32 result: the rule must not fire.
  std::vector<Rule> rules{rule("x*x -> to(x)", op(Op::Mul, x, x), [x](const Match& m, Why&) -> Rewrite {
    return NewNode{Op::To, {m[x]}, Attrs{{"dtype", DType::F64}}};
  })};
  Graph g = parse_graph(kMuls);
  EXPECT_FALSE(apply_rules(g, rules, "test_pattern"));
  EXPECT_EQ(print_graph(g), kMuls);
}

TEST(Pattern, ARewriteCanDecline) {
  Var x("x");
  int calls = 0;
  std::vector<Rule> rules{rule("never", op(Op::Mul, x, x), [&calls](const Match&, Why& why) -> Rewrite {
    ++calls;
    return why.no("declined on purpose");
  })};
  Graph g = parse_graph(kMuls);
  EXPECT_FALSE(apply_rules(g, rules, "test_pattern"));
  EXPECT_EQ(calls, 1);  // only mul(a, a) matched the pattern
  EXPECT_EQ(print_graph(g), kMuls);
}

TEST(Pattern, TheLogSaysWhyARuleDidNotApply) {
  Graph g = parse_graph(R"(graph g(%x: f32[4], %y: f32[4]) {
  %z = zeros(size=[3,4]) : f32[3,4]
  %a = add(%x, %z) : f32[3,4]
  %b = add(%x, %y) : f32[4]
  %t = transpose(%x, dim0=0, dim1=0) : f32[4]
  %c = neg(%t) : f32[4]
  return (%a, %b, %c)
}
)");
  setenv("KILN_LOGS", "graph,canonicalize", 1);
  ::testing::internal::CaptureStderr();
  bool changed = run_canonicalize(g);
  std::string log = ::testing::internal::GetCapturedStderr();
  unsetenv("KILN_LOGS");
  EXPECT_FALSE(changed);
  EXPECT_NE(log.find("[canonicalize] 'x+0 -> x' does not apply to %a = add(%x, %z) : f32[3,4]: the result would be "
                     "f32[4] instead of f32[3,4]"),
            std::string::npos)
      << log;
  EXPECT_NE(log.find("'x+0 -> x' does not apply to %b = add(%x, %y) : f32[4]: %y is not a constant"), std::string::npos)
      << log;
  EXPECT_NE(log.find("'neg(neg(x)) -> x' does not apply to %c = neg(%t) : f32[4]: %t is transpose, not neg"),
            std::string::npos)
      << log;
}

TEST(Pattern, NoLogUnlessAsked) {
  unsetenv("KILN_LOGS");
  Graph g = parse_graph(kMuls);
  ::testing::internal::CaptureStderr();
  run_canonicalize(g);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace kiln
