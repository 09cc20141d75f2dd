#include <gtest/gtest.h>

#include "ir/parser.h"
#include "ir/printer.h"

TEST(Smoke, ParsePrintRoundTrip) {
  const char* src = "graph g(%a: f32[2,3]) {\n  %b = exp(%a) : f32[2,3]\n  return (%b)\n}\n";
  auto g = kiln::parse_graph(src);
  EXPECT_EQ(kiln::print_graph(g), src);
}
