// libFuzzer target for the .kir parser and verifier (issue 12). Built only with
// -DKILN_LIBFUZZER=ON under clang (scripts/fuzz-parser.sh), with AddressSanitizer and
// UndefinedBehaviorSanitizer. What counts as a finding, besides a crash, hang or leak:
//  - any exception other than kiln::Error (an InternalError is a broken invariant, a
//    std::out_of_range or bad_alloc a missing check);
//  - a kiln::Error without a "file:line:column" location: every rejected input must say where;
//  - an accepted graph that does not survive print -> parse -> print unchanged.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace {

[[noreturn]] void finding(const char* what, std::string_view input, const std::string& detail) {
  std::fprintf(stderr, "kir_parser_fuzzer: %s\n--- input ---\n%.*s\n--- detail ---\n%s\n", what,
               static_cast<int>(input.size()), input.data(), detail.c_str());
  std::abort();
}

void check_round_trip(std::string_view input, const kiln::Graph& g) {
  std::string printed = kiln::print_graph(g);
  std::string reprinted;
  try {
    reprinted = kiln::print_graph(kiln::parse_graph(printed, "<printed>"));
  } catch (const std::exception& e) {
    finding("an accepted graph's printed form does not parse back", input, printed + "\n" + e.what());
  }
  if (reprinted != printed) finding("print(parse(print(g))) differs from print(g)", input, printed + "\n---\n" + reprinted);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    for (const kiln::Graph& g : kiln::parse_graphs(text, "fuzz.kir")) check_round_trip(text, g);
  } catch (const kiln::Error& e) {
    if (!e.loc().valid()) finding("a rejected input's diagnostic has no location", text, e.what());
  } catch (const std::exception& e) {
    finding("an exception other than kiln::Error escaped the parser", text, e.what());
  }
  return 0;
}
