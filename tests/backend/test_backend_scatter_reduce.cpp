// scatter_reduce compiled for every test device (its decomposition's scatter_add, where and
// scatter_fold kernels) against the reference interpreter: every reduction with and without
// self, along the first, a middle and the last dim, repeated and negative indices, elements
// reached by nothing, src wider than the index, f32, bf16 and i64, NaN through amax and amin,
// an empty index, and the same bits on a second run.
#include <fmt/format.h>

#include <cmath>
#include <string>

#include "ir/builder.h"
#include "tests/backend/backend_check.h"

namespace kiln::testing {
namespace {

class BackendScatterReduce : public DeviceTest {};
KILN_DEVICE_TESTS(BackendScatterReduce);

Var input(Builder& b, const std::string& name, const TensorMeta& m) { return b.wrap(b.graph().add_input(name, m)); }

Var scatter_reduce(Builder& b, Var self, Var index, Var src, int64_t dim, const std::string& reduce, bool include_self) {
  return b.op(Op::ScatterReduce, {self, index, src}, Attrs{{"dim", dim}, {"reduce", reduce}, {"include_self", include_self}});
}

TEST_P(BackendScatterReduce, EveryReductionAlongEachDim) {
  KILN_REQUIRE_JIT();
  for (DType dt : {DType::F32, DType::BF16, DType::I64})
    for (const char* reduce : {"sum", "prod", "mean", "amax", "amin"})
      for (bool include_self : {true, false}) {
        if (std::string(reduce) == "mean" && !is_floating(dt)) continue;  // refused by the shape rule
        SCOPED_TRACE(fmt::format("{} {} include_self={}", dtype_name(dt), reduce, include_self));
        Graph g("scatter_reduce");
        Builder b(g);
        Var x = input(b, "x", T(dt, {5, 6, 7}));
        Var i0 = input(b, "i0", I({9, 6, 7})), s0 = input(b, "s0", T(dt, {9, 6, 8}));   // dim 0, src wider
        Var i1 = input(b, "i1", I({5, 3, 7})), s1 = input(b, "s1", T(dt, {5, 3, 7}));   // a middle dim
        Var i2 = input(b, "i2", I({2, 6, 11})), s2 = input(b, "s2", T(dt, {2, 6, 11}));  // the last, 11 into 7
        g.set_outputs({scatter_reduce(b, x, i0, s0, 0, reduce, include_self), scatter_reduce(b, x, i1, s1, -2, reduce, include_self),
                       scatter_reduce(b, x, i2, s2, 2, reduce, include_self)});
        std::vector<HostTensor> in = inputs_for(g, 11, 7);
        // Row 4 of dim 0 reached by nothing; negative indices in dim 2.
        for (int64_t i = 0; i < in[1].numel(); ++i) in[1].set_int(i, in[1].get_int(i) % 4);
        for (int64_t i = 0; i < in[3].numel(); ++i) in[3].set_int(i, in[3].get_int(i) % 6);
        for (int64_t i = 0; i < in[5].numel(); ++i) in[5].set_int(i, in[5].get_int(i) % 2 ? -in[5].get_int(i) : in[5].get_int(i));
        // Products of up to 10 factors near 1 (integers: of -1, 1, 2), as the row reductions' prods.
        if (std::string(reduce) == "prod")
          for (int k : {0, 2, 4, 6})
            for (int64_t i = 0; i < in[static_cast<size_t>(k)].numel(); ++i) {
              HostTensor& t = in[static_cast<size_t>(k)];
              if (is_floating(dt)) t.set(i, 0.9 + 0.2 * std::fmod(std::abs(t.get(i)), 1.0));
              else t.set_int(i, (t.get_int(i) % 3 + 3) % 3 - 1 == 0 ? 2 : (t.get_int(i) % 3 + 3) % 3 - 1);
            }
        expect_matches_reference(g, in, 4);
      }
}

TEST_P(BackendScatterReduce, NanEmptyIndexAndDeterminism) {
  KILN_REQUIRE_JIT();
  Graph g("scatter_reduce_edges");
  Builder b(g);
  Var x = input(b, "x", T(DType::F32, {4, 33}));
  Var i = input(b, "i", I({1000, 33})), s = input(b, "s", T(DType::F32, {1000, 33}));
  Var none = input(b, "none", I({0, 33}));
  g.set_outputs({scatter_reduce(b, x, i, s, 0, "amax", true), scatter_reduce(b, x, i, s, 0, "amin", false),
                 scatter_reduce(b, x, i, s, 0, "mean", false), scatter_reduce(b, x, none, s, 0, "prod", false),
                 scatter_reduce(b, x, none, s, 0, "mean", true)});
  std::vector<HostTensor> in = inputs_for(g, 5, 4);
  in[2].set(7, NAN);   // src row 0, column 7: NaN into one destination
  in[0].set(40, NAN);  // self row 1, column 7
  expect_matches_reference(g, in, 10);
  backend::CompileOptions o;
  o.device = test_device();
  backend::CompiledGraph c = backend::compile(g, o);
  KILN_REQUIRE_RUN();
  std::vector<HostTensor> first = c.run(in), second = c.run(in);
  for (size_t k = 0; k < first.size(); ++k) EXPECT_TRUE(tensors_close(first[k], second[k], 0, 0)) << "output " << k;
}

}  // namespace
}  // namespace kiln::testing
