// The one cache policy of kiln::compile's callables (frontend/guards.h's GuardedCache): newest
// entry first, the nearest miss named, grad mode guarded only where asked, the size limit.
#include <gtest/gtest.h>

#include <vector>

#include "frontend/compile.h"
#include "frontend/guards.h"
#include "frontend/ops.h"
#include "tests/support/support.h"

namespace kiln::testing {
namespace {

EntryGuards guards_for(const std::vector<Tensor>& ts, TraceState state = {}) {
  EntryGuards g;
  for (size_t i = 0; i < ts.size(); ++i) g.tensors.push_back(guard_of(ts[i], "input " + std::to_string(i)));
  g.state = state;
  return g;
}

TEST(GuardedCache, FindsTheNewestMatchNamesTheNearestMissAndStopsAtTheLimit) {
  Tensor a = randn({4, 8}, 1), b = randn({4, 8}, 2), wide = randn({4, 16}, 3), f64 = randn({4, 8}, 4).to(DType::F64);
  const EntryGuards first = guards_for({a, a}), second = guards_for({a, b});  // same types: both match
  std::vector<const EntryGuards*> entries{&first, &second};
  GuardedCache cache("'f'", "runs eagerly", /*limit=*/3, /*checks_grad_mode=*/true);
  const TraceState on{true, std::nullopt};
  EXPECT_EQ(cache.find(entries, {a, b}, on), 1) << "newest first";
  EXPECT_EQ(cache.find(entries, {a, b}, on, [](size_t k) { return k == 0; }), 0) << "an entry the caller rejects is skipped";
  EXPECT_EQ(cache.find(entries, {a, b}, TraceState{false, std::nullopt}), -1) << "grad mode is guarded";
  GuardedCache step("training step 's'", "runs on the reference interpreter", 3, /*checks_grad_mode=*/false);
  EXPECT_EQ(step.find(entries, {a, b}, TraceState{false, std::nullopt}), 1) << "a training step does not guard grad mode";

  // The nearest miss: the entry whose guards held longest. A wider second input fails later in
  // `first` than a new dtype of the first input does.
  const EntryGuards f64_entry = guards_for({f64, a});
  std::vector<const EntryGuards*> three{&first, &f64_entry};
  CompileStats stats;
  EXPECT_FALSE(cache.miss(three, {a, wide}, on, stats));
  ASSERT_EQ(stats.recompile_reasons.size(), 1u);
  EXPECT_EQ(stats.recompile_reasons[0], "input 1: shape [4,8] -> [4,16]");
  EXPECT_EQ(stats.recompiles, 1);
  EXPECT_FALSE(cache.full());

  // The autocast scope is part of every entry's guards and is named first.
  CompileStats s2;
  cache.miss(entries, {a, b}, TraceState{true, DType::BF16}, s2);
  EXPECT_EQ(s2.recompile_reasons.at(0), "autocast off -> bf16");

  // At the limit the callable stops compiling: no recompile counted.
  const EntryGuards third = guards_for({b, b});
  std::vector<const EntryGuards*> full{&first, &second, &third};
  CompileStats s3;
  EXPECT_TRUE(cache.miss(full, {a, wide}, on, s3));
  EXPECT_TRUE(cache.full());
  EXPECT_EQ(s3.recompiles, 0);
}

}  // namespace
}  // namespace kiln::testing
