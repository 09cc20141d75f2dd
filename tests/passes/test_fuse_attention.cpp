// fuse_attention beyond its .kir cases (tests/passes/cases/fuse_attention_*.kir, which fix the
// rewritten text): each case's graph computes the same values before and after the rewrite
// (the interpreter on random inputs: scale, masks, dropout's stream), and the compile pipeline
// runs it before decomposition only when optimizing.
#include <gtest/gtest.h>

#include <filesystem>

#include "ir/parser.h"
#include "ir/reference/interpreter.h"
#include "passes/fuse_attention.h"
#include "passes/pipeline.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

TEST(FuseAttention, EveryCaseComputesTheSameValuesAfterTheRewrite) {
  int cases = 0;
  for (auto& e : std::filesystem::directory_iterator(kiln::testing::data_dir() + "/passes/cases")) {
    const std::string file = e.path().filename().string();
    if (file.rfind("fuse_attention_", 0) != 0) continue;
    ++cases;
    SCOPED_TRACE(file);
    Graph g = std::move(parse_graphs(kiln::testing::read_text(e.path().string()), file)[0]);
    std::vector<HostTensor> in;
    for (size_t i = 0; i < g.inputs().size(); ++i) in.push_back(random_tensor(g.inputs()[i]->meta(), 17 + i, 2));
    std::vector<HostTensor> want = interpret(g, in);
    Graph f = g.clone();
    run_fuse_attention(f);
    std::vector<HostTensor> got = interpret(f, in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(kiln::testing::tensors_close(got[i], want[i], 1e-5, 1e-5)) << "output " << i;
  }
  EXPECT_GE(cases, 4);
}

TEST(FuseAttention, RunsBeforeDecompositionWhenOptimizing) {
  std::vector<std::string> p = compile_pipeline(true, true);
  ASSERT_GE(p.size(), 3u);
  EXPECT_EQ(p[0], "fuse_attention");
  EXPECT_EQ(p[1], "merge_linears");
  EXPECT_EQ(p[2], "decompose");
  std::vector<std::string> plain = compile_pipeline(true, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), "fuse_attention"), 0) << "an unoptimized compile keeps what was written";
}

}  // namespace
}  // namespace kiln
