// Mutation fuzzing of the .kir front door: every mutated file must either parse into a graph
// that verifies, prints and parses back to the same text, and runs on the reference
// interpreter (or fails there with kiln::Error) — or be rejected with a kiln::Error. Any
// other exception (an InternalError, std::out_of_range, ...) or a crash fails the test.
// Deterministic: a fixed seed and std::mt19937, whose output the standard fixes.
#include <gtest/gtest.h>

#include <filesystem>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "ir/verifier.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

std::vector<std::string> corpus() {
  std::vector<std::string> texts;
  for (auto& e : std::filesystem::recursive_directory_iterator(testing::data_dir()))
    if (e.path().extension() == ".kir") texts.push_back(testing::read_text(e.path().string()));
  std::sort(texts.begin(), texts.end());  // directory order is not fixed
  return texts;
}

const char* const kSnippets[] = {
    "%", "(", ")", "[", "]", ",", "=", ":", "{", "}", "@cuda:0", "\n", "#", "\"", "-1", "0", "3", "1.5",
    "99999999999999999999", "1e400", "-inf", "nan", "f16", "i64", "bool", "bf16", "%x", "%y_1", "add",
    "split", "reshape", "slice", "expand", "matmul", "cat", "sum", "dim=", "dim=-1", "shape=[-1]",
    "size=[4611686018427387904,4]", "split_size=0", "step=-1", "keepdim=true", "graph", "return", "[]",
    "f32[2,3]{1,2}", "f32[0]", "%a, %b = ", "= split(", "value=nan"};

std::string mutate(std::string s, std::mt19937& rng) {
  int n = rng() % 4 == 0 ? 2 : 1;  // mostly one mutation, so that many mutants still parse
  for (int k = 0; k < n && !s.empty(); ++k) {
    size_t at = rng() % s.size();
    switch (rng() % 9) {
      case 0: s.erase(at, 1 + rng() % 6); break;
      case 1: s.insert(at, kSnippets[rng() % std::size(kSnippets)]); break;
      case 2: {  // duplicate a line
        size_t b = s.rfind('\n', at), e = s.find('\n', at);
        b = b == std::string::npos ? 0 : b + 1;
        if (e != std::string::npos) s.insert(b, s.substr(b, e - b + 1));
        break;
      }
      case 3: {  // replace a digit run by another number
        size_t d = s.find_first_of("0123456789", at);
        if (d == std::string::npos) break;
        size_t e = s.find_first_not_of("0123456789", d);
        const char* nums[] = {"0", "1", "2", "7", "64", "100000", "9223372036854775807"};
        s.replace(d, (e == std::string::npos ? s.size() : e) - d, nums[rng() % std::size(nums)]);
        break;
      }
      case 4: s.resize(at); break;  // truncate
      default: {  // replace one value name by another of the same file
        size_t p = s.find('%', at), q = s.rfind('%', at);
        if (p == std::string::npos || q == std::string::npos) break;
        size_t pe = s.find_first_of(",): \n", p), qe = s.find_first_of(",): \n", q);
        if (pe == std::string::npos || qe == std::string::npos) break;
        s.replace(p, pe - p, s.substr(q, qe - q));
        break;
      }
    }
  }
  return s;
}

// Runs the interpreter on graphs small enough to be quick.
void try_interpret(const Graph& g) {
  int64_t total = 0;
  for (Node* in : g.inputs()) total += in->meta().numel();
  for (Node* n : g.nodes())
    for (int i = 0; i < n->num_results(); ++i) total += n->meta(i).numel();
  if (total > 200000) return;
  std::vector<HostTensor> inputs;
  uint64_t seed = 1;
  for (Node* in : g.inputs()) inputs.push_back(random_tensor(in->meta(), seed++, 3));
  try {
    interpret(g, inputs);
  } catch (const Error&) {
    // A user error (an index out of range, ...) is a fine outcome.
  }
}

TEST(FuzzParser, MutatedFilesGiveGraphsOrKilnErrors) {
  auto texts = corpus();
  ASSERT_GT(texts.size(), 50u);
  // KILN_FUZZ_ITERATIONS / KILN_FUZZ_SEED run a longer or different hunt locally.
  const char* iters_env = std::getenv("KILN_FUZZ_ITERATIONS");
  const char* seed_env = std::getenv("KILN_FUZZ_SEED");
  const int iterations = iters_env ? std::atoi(iters_env) : 6000;
  std::mt19937 rng(seed_env ? std::atoi(seed_env) : 20261121);
  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < iterations; ++iter) {
    std::string text = mutate(texts[rng() % texts.size()], rng);
    try {
      std::vector<Graph> graphs = parse_graphs(text, "fuzz.kir");
      for (const Graph& g : graphs) {
        ASSERT_TRUE(verify(g).empty()) << text;
        std::string printed = print_graph(g);
        ASSERT_EQ(print_graph(parse_graph(printed)), printed) << text;
        try_interpret(g);
      }
      ++parsed;
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL() << "iteration " << iter << ": " << typeid(e).name() << ": " << e.what() << "\n--- input ---\n" << text;
    }
  }
  // Both outcomes must be exercised, or the mutations are too weak or too strong.
  EXPECT_GT(parsed, iterations / 10);
  EXPECT_GT(rejected, iterations / 10);
  std::printf("fuzz: %d mutants parsed and ran, %d rejected with kiln::Error\n", parsed, rejected);
}

}  // namespace
}  // namespace kiln
