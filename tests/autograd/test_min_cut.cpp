// The max-flow / min-cut solver the min-cut partitioner is built on.
#include <gtest/gtest.h>

#include "passes/autograd/min_cut.h"

namespace kiln::autograd {
namespace {

TEST(MinCut, SingleEdge) {
  FlowNetwork net(2);
  net.add_edge(0, 1, 7);
  auto cut = net.min_cut(0, 1);
  EXPECT_EQ(cut.value, 7);
  EXPECT_TRUE(cut.source_side[0]);
  EXPECT_FALSE(cut.source_side[1]);
}

TEST(MinCut, ClassicNetwork) {
  // CLRS figure 26.1: max flow 23.
  FlowNetwork net(6);
  net.add_edge(0, 1, 16);
  net.add_edge(0, 2, 13);
  net.add_edge(2, 1, 4);
  net.add_edge(1, 3, 12);
  net.add_edge(3, 2, 9);
  net.add_edge(2, 4, 14);
  net.add_edge(4, 3, 7);
  net.add_edge(3, 5, 20);
  net.add_edge(4, 5, 4);
  auto cut = net.min_cut(0, 5);
  EXPECT_EQ(cut.value, 23);
  // The residual source side is {s, v1, v2, v4}; the cut edges v1->v3, v4->v3, v4->t sum to 23.
  EXPECT_EQ(cut.source_side, (std::vector<bool>{true, true, true, false, true, false}));
}

TEST(MinCut, InfiniteEdgesAreNeverCut) {
  // s -inf-> a -5-> b -inf-> t and s -inf-> a -3-> c -inf-> b: the cut must take both finite edges.
  FlowNetwork net(5);
  net.add_edge(0, 1, FlowNetwork::kInfinite);
  net.add_edge(1, 2, 5);
  net.add_edge(2, 4, FlowNetwork::kInfinite);
  net.add_edge(1, 3, 3);
  net.add_edge(3, 2, FlowNetwork::kInfinite);
  auto cut = net.min_cut(0, 4);
  EXPECT_EQ(cut.value, 8);
  EXPECT_FALSE(cut.infinite());
  EXPECT_TRUE(cut.source_side[1]);
  EXPECT_FALSE(cut.source_side[2]);
  EXPECT_FALSE(cut.source_side[3]);
}

TEST(MinCut, ChoosesTheNarrowPointOfAChain) {
  // A chain of values with sizes 40, 10, 40 between source and sink: save the 10.
  FlowNetwork net(8);
  int src = 0, sink = 7;
  net.add_edge(src, 1, FlowNetwork::kInfinite);
  net.add_edge(1, 2, 40);
  net.add_edge(2, 3, FlowNetwork::kInfinite);
  net.add_edge(3, 4, 10);
  net.add_edge(4, 5, FlowNetwork::kInfinite);
  net.add_edge(5, 6, 40);
  net.add_edge(6, sink, FlowNetwork::kInfinite);
  auto cut = net.min_cut(src, sink);
  EXPECT_EQ(cut.value, 10);
  EXPECT_TRUE(cut.source_side[3]);
  EXPECT_FALSE(cut.source_side[4]);
}

TEST(MinCut, UncuttableNetworkIsInfinite) {
  FlowNetwork net(3);
  net.add_edge(0, 1, FlowNetwork::kInfinite);
  net.add_edge(1, 2, FlowNetwork::kInfinite);
  auto cut = net.min_cut(0, 2);
  EXPECT_TRUE(cut.infinite());
}

TEST(MinCut, DisconnectedSinkHasZeroCut) {
  FlowNetwork net(3);
  net.add_edge(0, 1, 4);
  auto cut = net.min_cut(0, 2);
  EXPECT_EQ(cut.value, 0);
  EXPECT_TRUE(cut.source_side[1]);
  EXPECT_FALSE(cut.source_side[2]);
}

TEST(MinCut, MatchesBruteForceOnSmallRandomNetworks) {
  // Every s-t cut of a 6-vertex network enumerated: the min equals Dinic's flow.
  uint64_t state = 12345;
  auto next = [&] {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % 1000);
  };
  for (int trial = 0; trial < 50; ++trial) {
    const int n = 6;
    std::vector<std::vector<int64_t>> cap(n, std::vector<int64_t>(n, 0));
    FlowNetwork net(n);
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (a != b && next() % 3 == 0) {
          int64_t c = next() % 20;
          cap[a][b] += c;
          net.add_edge(a, b, c);
        }
    int64_t best = INT64_MAX;
    for (int mask = 0; mask < (1 << n); ++mask) {
      if (!(mask & 1) || (mask & (1 << (n - 1)))) continue;  // source in S, sink not
      int64_t total = 0;
      for (int a = 0; a < n; ++a)
        for (int b = 0; b < n; ++b)
          if ((mask >> a & 1) && !(mask >> b & 1)) total += cap[a][b];
      best = std::min(best, total);
    }
    auto cut = net.min_cut(0, n - 1);
    ASSERT_EQ(cut.value, best) << "trial " << trial;
    int64_t across = 0;
    for (int a = 0; a < n; ++a)
      for (int b = 0; b < n; ++b)
        if (cut.source_side[a] && !cut.source_side[b]) across += cap[a][b];
    EXPECT_EQ(across, best) << "trial " << trial;
  }
}

}  // namespace
}  // namespace kiln::autograd
