// fuse_attention beyond its .kir cases (tests/passes/cases/fuse_attention_*.kir, which fix the
// rewritten text): each case's graph computes the same values before and after the rewrite
// (the interpreter on random inputs: scale, masks, dropout's stream), and the compile pipeline
// runs it before decomposition only when optimizing.
#include <gtest/gtest.h>

#include "passes/fuse_attention.h"
#include "passes/pipeline.h"
#include "tests/passes/case_values.h"

namespace kiln {
namespace {

TEST(FuseAttention, EveryCaseComputesTheSameValuesAfterTheRewrite) {
  EXPECT_GE(kiln::testing::expect_cases_keep_their_values("fuse_attention_", [](Graph& g) { run_fuse_attention(g); }, 1e-5, 1e-5, 17),
            4);
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
