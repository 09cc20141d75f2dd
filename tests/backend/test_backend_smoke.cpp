// First end-to-end checks: one pointwise chain, one reduction, one matmul.
#include "ir/builder.h"
#include "tests/backend/backend_check.h"
#include "tests/support/support.h"

namespace kiln::testing {
namespace {

class BackendSmoke : public DeviceTest {};
KILN_DEVICE_TESTS(BackendSmoke);

TEST_P(BackendSmoke, PointwiseChain) {
  KILN_REQUIRE_JIT();
  Graph g("chain");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var y = b.wrap(g.add_input("y", F({33})));
  g.set_outputs({b.exp(b.add(x, y))});
  expect_matches_reference(g);
}

TEST_P(BackendSmoke, SoftmaxRow) {
  KILN_REQUIRE_JIT();
  Graph g("softmax");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var m = b.amax(x, {1}, true);
  Var e = b.exp(b.sub(x, m));
  Var s = b.sum(e, {1}, true);
  g.set_outputs({b.div(e, s)});
  expect_matches_reference(g);
}

TEST_P(BackendSmoke, Matmul) {
  KILN_REQUIRE_JIT();
  Graph g("mm");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var w = b.wrap(g.add_input("w", F({5, 33})));
  g.set_outputs({b.relu(b.matmul(x, b.transpose(w, 0, 1)))});
  expect_matches_reference(g);
}

}  // namespace
}  // namespace kiln::testing
