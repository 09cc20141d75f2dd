// Fusion: decomposed graphs written as .kir text, fused, and checked for the number of
// kernels, which nodes share a group, the contract every plan obeys, and that fusing
// (which may reorder the graph) leaves what the graph computes unchanged.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <set>

#include "frontend/kiln.h"
#include "frontend/nn/minigpt.h"
#include "ir/dot.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/reference/interpreter.h"
#include "passes/fusion/fusion.h"
#include "passes/fusion/space.h"
#include "tests/passes/arena_of.h"
#include "passes/pass_manager.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

using fusion::FusionPlan;
using fusion::KernelKind;
using kiln::testing::has;

std::vector<HostTensor> random_inputs(const Graph& g, uint64_t seed) {
  std::vector<HostTensor> out;
  for (const Node* in : g.inputs()) out.push_back(random_tensor(in->meta(), seed++, 8));
  return out;
}

// Every node in exactly one group; groups in an order they can run; inputs and outputs
// as the contract says; kinds as their nodes say.
void check_contract(const Graph& g, const FusionPlan& plan) {
  std::set<const Node*> seen;
  int position = 0;
  std::vector<Node*> nodes = g.nodes();
  for (const auto& grp : plan.groups) {
    EXPECT_EQ(grp.id, &grp - plan.groups.data());
    for (const Node* n : grp.nodes) {
      EXPECT_TRUE(seen.insert(n).second) << "%" << n->name() << " is in two groups";
      EXPECT_EQ(plan.group_of.at(n), grp.id);
      ASSERT_LT(position, static_cast<int>(nodes.size()));
      EXPECT_EQ(nodes[position++], n) << "the graph's nodes are in group order";
      for (Value v : n->inputs()) {
        if (v.node->is_input()) continue;
        int from = plan.group_of.at(v.node);
        EXPECT_LE(from, grp.id) << "k" << grp.id << " reads k" << from << " before it runs";
        if (from != grp.id) {
          const auto& outs = plan.groups[from].outputs;
          EXPECT_NE(std::find(outs.begin(), outs.end(), v), outs.end()) << "%" << v.name() << " is an output of k" << from;
        }
      }
    }
    int reductions = 0, externs = 0;
    for (const Node* n : grp.nodes) {
      reductions += n->category() == OpCategory::Reduction;
      externs += n->category() == OpCategory::Matmul || n->category() == OpCategory::Scatter;
    }
    if (externs) {
      EXPECT_EQ(grp.nodes.size(), 1u) << grp.label();
    }
    if (grp.kind == KernelKind::Pointwise) {
      for (const Value& v : grp.outputs) EXPECT_EQ(v.meta().shape, grp.outputs[0].meta().shape) << grp.label();
    }
    if (reductions) {
      EXPECT_EQ(grp.kind, KernelKind::Reduction);
      // A reduction kernel stores each output in its space's loops or once per row, so every
      // value it writes has one of those shapes.
      const Node* red = *std::find_if(grp.nodes.begin(), grp.nodes.end(),
                                      [](const Node* n) { return n->category() == OpCategory::Reduction; });
      const Shape& s = red->input(0).meta().shape;
      const std::vector<int64_t> r = fusion::reduced_dims(*red);
      for (const Value& v : grp.outputs) {
        const Shape& sh = v.meta().shape;
        EXPECT_TRUE(sh == s || sh == fusion::keepdim_shape(s, r) || sh == fusion::removed_shape(s, r))
            << "%" << v.name() << " " << shape_str(sh) << " is outside the rows of " << grp.label();
      }
    }
  }
  EXPECT_EQ(seen.size(), g.num_nodes());
}

struct Fused {
  Graph g;
  FusionPlan plan;
  // The group of the node whose result is named `name`.
  const fusion::FusionGroup& of(const std::string& name) const {
    Value v = g.find(name);
    if (!v) throw std::runtime_error("no value %" + name);
    return plan.group(v.node);
  }
  bool together(std::initializer_list<const char*> names) const {
    int id = of(*names.begin()).id;
    for (const char* n : names)
      if (of(n).id != id) return false;
    return true;
  }
  std::string dump() const { return print_fused(g, plan); }
};

// Fuses, checks the contract and that the (possibly reordered) graph computes what the
// original did (on random inputs unless given).
Fused fuse_graph(Graph g, const fusion::FusionOptions& options = {}, std::vector<HostTensor> inputs = {}) {
  Fused f{std::move(g), {}};
  Graph original = f.g.clone();
  f.plan = fusion::fuse(f.g, options);
  check_contract(f.g, f.plan);
  if (inputs.empty()) inputs = random_inputs(original, 11);
  auto expected = interpret(original, inputs);
  auto actual = interpret(f.g, inputs);
  EXPECT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size() && i < expected.size(); ++i)
    EXPECT_TRUE(kiln::testing::tensors_close(actual[i], expected[i])) << "output " << i;
  return f;
}

Fused fuse_text(const std::string& text, const fusion::FusionOptions& options = {}) {
  return fuse_graph(parse_graph(text), options);
}

const char* kLayerNormForward = R"(
graph ln(%x: f32[8,64], %w: f32[64], %b: f32[64]) {
  %n = full(size=[], fill_value=64.0) : f32[]
  %s = sum(%x, dim=[1], keepdim=true) : f32[8,1]
  %mean = div(%s, %n) : f32[8,1]
  %xc = sub(%x, %mean) : f32[8,64]
  %sq = mul(%xc, %xc) : f32[8,64]
  %ss = sum(%sq, dim=[1], keepdim=true) : f32[8,1]
  %var = div(%ss, %n) : f32[8,1]
  %eps = full(size=[], fill_value=0.00001) : f32[]
  %ve = add(%var, %eps) : f32[8,1]
  %rstd = rsqrt(%ve) : f32[8,1]
  %xhat = mul(%xc, %rstd) : f32[8,64]
  %yw = mul(%xhat, %w) : f32[8,64]
  %y = add(%yw, %b) : f32[8,64]
  return (%y, %mean, %rstd)
})";

TEST(Fusion, LayerNormForwardIsOneKernel) {
  Fused f = fuse_text(kLayerNormForward);
  ASSERT_EQ(f.plan.groups.size(), 1u) << f.dump();
  EXPECT_EQ(f.plan.num_kernels(), 1);
  const auto& k = f.plan.groups[0];
  EXPECT_EQ(k.kind, KernelKind::Reduction);
  EXPECT_EQ(k.space, (Shape{8, 64}));
  EXPECT_EQ(k.reduce_dims, (std::vector<int64_t>{1}));
  EXPECT_EQ(k.outputs.size(), 3u);  // y, mean, rstd
  EXPECT_EQ(k.inputs.size(), 3u);   // x, w, b: the scalar constants are inlined
}

TEST(Fusion, SoftmaxIsOneKernel) {
  Fused f = fuse_text(R"(
graph sm(%x: f32[8,64]) {
  %m = amax(%x, dim=[-1], keepdim=true) : f32[8,1]
  %d = sub(%x, %m) : f32[8,64]
  %e = exp(%d) : f32[8,64]
  %s = sum(%e, dim=[-1], keepdim=true) : f32[8,1]
  %y = div(%e, %s) : f32[8,64]
  return (%y)
})");
  ASSERT_EQ(f.plan.num_kernels(), 1) << f.dump();
  EXPECT_EQ(f.plan.groups[0].label(), "k0 reduction [amax, sub, exp, sum, div]");
  EXPECT_EQ(f.plan.groups[0].outputs, std::vector<Value>{f.g.find("y")});
}

TEST(Fusion, LogSoftmaxIsOneKernel) {
  Fused f = fuse_text(R"(
graph lsm(%x: f32[4,3,16]) {
  %m = amax(%x, dim=[2], keepdim=true) : f32[4,3,1]
  %d = sub(%x, %m) : f32[4,3,16]
  %e = exp(%d) : f32[4,3,16]
  %s = sum(%e, dim=[2], keepdim=true) : f32[4,3,1]
  %l = log(%s) : f32[4,3,1]
  %y = sub(%d, %l) : f32[4,3,16]
  return (%y)
})");
  EXPECT_EQ(f.plan.num_kernels(), 1) << f.dump();
}

// A transpose of a square row space has the rows' shape but not their order: fused into the
// softmax's kernel, element (i,j) was computed with row (j,i)'s max and sum (kiln fuzz found
// it). It is refused, naming why; a transpose of the size-1 dims only moves nothing and joins.
TEST(Fusion, ATransposeThatReordersRowsStaysOutOfTheReduction) {
  Fused f = fuse_text(R"(
graph t(%x: f32[4,4,2]) {
  %m = amax(%x, dim=[2], keepdim=true) : f32[4,4,1]
  %d = sub(%x, %m) : f32[4,4,2]
  %e = exp(%d) : f32[4,4,2]
  %s = sum(%e, dim=[2], keepdim=true) : f32[4,4,1]
  %y = div(%e, %s) : f32[4,4,2]
  %t = transpose(%y, dim0=0, dim1=1) : f32[4,4,2]{2,8,1}
  %u = exp(%t) : f32[4,4,2]
  return (%u)
})");
  EXPECT_TRUE(f.together({"m", "y"})) << f.dump();
  EXPECT_FALSE(f.together({"y", "t"})) << f.dump();
  std::string log;
  for (const auto& grp : f.plan.groups)
    for (const std::string& r : grp.reasons) log += r + "\n";
  EXPECT_TRUE(has(log, "refused: %t = transpose with k0: %t = transpose moves elements to other rows of [4,4,2]")) << log;
  Fused g = fuse_text(R"(
graph t1(%x: f32[4,1,2]) {
  %m = amax(%x, dim=[2], keepdim=true) : f32[4,1,1]
  %y = sub(%x, %m) : f32[4,1,2]
  %t = transpose(%y, dim0=1, dim1=1) : f32[4,1,2]
  return (%t)
})");
  EXPECT_TRUE(g.together({"m", "y", "t"})) << g.dump();
}

// Views of buffers the group does not compute are index arithmetic on their loads, whatever
// their shape, so a reduction may absorb them: the grad scaler's sum(cat(flattened gradients)
// * 0) reads each gradient in place. A view of a value the group computes stays in the rows
// (the transpose test above), and so does one the group would have to write out.
TEST(Fusion, ViewsOfBuffersFeedingAReductionJoinIt) {
  Fused f = fuse_text(R"(
graph g(%a: f32[4,8], %b: f32[3], %c: f32[2,5]) {
  %fa = reshape(%a, shape=[-1]) : f32[32]
  %fb = reshape(%b, shape=[-1]) : f32[3]
  %tc = transpose(%c, dim0=0, dim1=1) : f32[5,2]{1,5}
  %fc = reshape(%tc, shape=[-1]) : f32[10]
  %all = cat(%fa, %fb, %fc, dim=0) : f32[45]
  %z = full(size=[], fill_value=0.0) : f32[]
  %p = mul(%all, %z) : f32[45]
  %s = sum(%p) : f32[]
  %found = ne(%s, %s) : bool[]
  return (%found)
})");
  EXPECT_EQ(f.plan.groups.size(), 1u) << f.dump();
  EXPECT_TRUE(f.together({"fa", "fb", "all", "s", "found"})) << f.dump();
  Fused g = fuse_text(R"(
graph h(%a: f32[4,8]) {
  %e = exp(%a) : f32[4,8]
  %fa = reshape(%e, shape=[-1]) : f32[32]
  %s = sum(%fa) : f32[]
  return (%s, %fa)
})");
  EXPECT_FALSE(g.together({"e", "s"})) << g.dump();
}

// A bf16 layer_norm whose f32 weight and bias are cast where they are read: the casts are loads
// that convert, in any shape, so they join the rows that read them and the whole norm is one
// kernel (before, each cast was a kernel of its own and the norm three). The rows here are as
// many as the weight's elements, so the weight's cast [16] also has the reduced shape of the
// rows [16]: broadcast against the row space it is still a plain load, not a per-row value.
TEST(Fusion, ACastOfAWeightJoinsTheRowsThatReadIt) {
  Fused f = fuse_text(R"(
graph ln(%x: bf16[16,16], %w: f32[16], %b: f32[16]) {
  %n = full(size=[], fill_value=16.0, dtype=bf16) : bf16[]
  %s = sum(%x, dim=[1], keepdim=true) : bf16[16,1]
  %mean = div(%s, %n) : bf16[16,1]
  %xc = sub(%x, %mean) : bf16[16,16]
  %sq = mul(%xc, %xc) : bf16[16,16]
  %ss = sum(%sq, dim=[1], keepdim=true) : bf16[16,1]
  %var = div(%ss, %n) : bf16[16,1]
  %eps = full(size=[], fill_value=0.00001, dtype=bf16) : bf16[]
  %ve = add(%var, %eps) : bf16[16,1]
  %rstd = rsqrt(%ve) : bf16[16,1]
  %xhat = mul(%xc, %rstd) : bf16[16,16]
  %wc = to(%w, dtype=bf16) : bf16[16]
  %bc = to(%b, dtype=bf16) : bf16[16]
  %yw = mul(%xhat, %wc) : bf16[16,16]
  %y = add(%yw, %bc) : bf16[16,16]
  return (%y, %mean, %rstd)
})");
  EXPECT_EQ(f.plan.num_kernels(), 1) << f.dump();
  EXPECT_TRUE(f.together({"wc", "bc", "s", "ss", "y"})) << f.dump();
  // A cast of a value the group computes is not a load: exp(x) cast and stored stays a value
  // of the rows it is computed in.
  Fused g = fuse_text(R"(
graph h(%x: f32[4,8]) {
  %e = exp(%x) : f32[4,8]
  %c = to(%e, dtype=bf16) : bf16[4,8]
  %s = sum(%c, dim=[1]) : bf16[4]
  return (%s, %c)
})");
  EXPECT_EQ(g.plan.num_kernels(), 1) << g.dump();
}

// A gather along a row dim of a value computed in a reduction group reads another row, and the
// kernel would recompute that row's value with this row's accumulators (found by kiln fuzz on
// the GPU and the CPU: exp(softmax(x)) gathered along dim 0). Along the reduced dim, or from a
// buffer the group does not compute, it may join.
TEST(Fusion, AGatherAcrossRowsOfAValueTheGroupComputesStaysOut) {
  Fused f = fuse_text(R"(
graph g(%x: f32[2,3]) {
  %i = full(size=[2,3], fill_value=1, dtype=i64) : i64[2,3]
  %m = amax(%x, dim=[1], keepdim=true) : f32[2,1]
  %d = sub(%x, %m) : f32[2,3]
  %e = exp(%d) : f32[2,3]
  %g = gather(%e, %i, dim=0) : f32[2,3]
  return (%g)
})");
  EXPECT_TRUE(f.together({"m", "e"})) << f.dump();
  EXPECT_FALSE(f.together({"e", "g"})) << f.dump();
  std::string log;
  for (const auto& grp : f.plan.groups)
    for (const std::string& r : grp.reasons) log += r + "\n";
  EXPECT_TRUE(has(log, "%g = gather reads other rows of %e, computed in the group")) << log;

  Fused along_row = fuse_text(R"(
graph g(%x: f32[2,3]) {
  %i = full(size=[2,3], fill_value=1, dtype=i64) : i64[2,3]
  %m = amax(%x, dim=[1], keepdim=true) : f32[2,1]
  %d = sub(%x, %m) : f32[2,3]
  %g = gather(%d, %i, dim=1) : f32[2,3]
  return (%g)
})");
  EXPECT_TRUE(along_row.together({"m", "d", "g"})) << along_row.dump();
  Fused from_input = fuse_text(R"(
graph g(%w: f32[5,3]) {
  %i = full(size=[2,3], fill_value=4, dtype=i64) : i64[2,3]
  %g = gather(%w, %i, dim=0) : f32[2,3]
  %m = amax(%g, dim=[1], keepdim=true) : f32[2,1]
  %d = sub(%g, %m) : f32[2,3]
  return (%d)
})");
  EXPECT_TRUE(from_input.together({"g", "m", "d"})) << from_input.dump();
}

// A reduced value without keepdim, broadcast back into the row space, aligns to the right
// (numpy's rule): over leading dims that is its rows, over other dims it is not, and the group
// would pair element (i,j,k) with row i's value where the graph says row k's (found by kiln fuzz).
TEST(Fusion, AReducedValueBroadcastAgainstOtherDimsStaysOut) {
  Fused f = fuse_text(R"(
graph g(%x: f32[5,17,5]) {
  %m = amin(%x, dim=[1,2]) : f32[5]
  %y = maximum(%x, %m) : f32[5,17,5]
  %e = expand(%m, size=[5,17,5]) : f32[5,17,5]{0,0,1}
  %z = add(%x, %e) : f32[5,17,5]
  return (%y, %z)
})");
  EXPECT_FALSE(f.together({"m", "y"})) << f.dump();
  EXPECT_FALSE(f.together({"m", "z"})) << f.dump();
  std::string log;
  for (const auto& grp : f.plan.groups)
    for (const std::string& r : grp.reasons) log += r + "\n";
  EXPECT_TRUE(has(log, "%y = maximum broadcasts %m [5] against other dims than its rows")) << log;

  Fused leading = fuse_text(R"(
graph g(%x: f32[5,17,4]) {
  %m = amax(%x, dim=[0,1]) : f32[4]
  %y = sub(%x, %m) : f32[5,17,4]
  return (%y)
})");
  EXPECT_TRUE(leading.together({"m", "y"})) << leading.dump();
  Fused keepdim = fuse_text(R"(
graph g(%x: f32[5,17,5]) {
  %m = amin(%x, dim=[1,2], keepdim=true) : f32[5,1,1]
  %y = maximum(%x, %m) : f32[5,17,5]
  return (%y)
})");
  EXPECT_TRUE(keepdim.together({"m", "y"})) << keepdim.dump();
}

TEST(Fusion, LayerNormBackwardIsTwoKernels) {
  Fused f = fuse_text(R"(
graph ln_bwd(%x: f32[8,64], %g: f32[8,64], %w: f32[64], %mean: f32[8,1], %rstd: f32[8,1]) {
  %xc = sub(%x, %mean) : f32[8,64]
  %xhat = mul(%xc, %rstd) : f32[8,64]
  %gw = mul(%g, %w) : f32[8,64]
  %s1 = sum(%gw, dim=[1], keepdim=true) : f32[8,1]
  %gwx = mul(%gw, %xhat) : f32[8,64]
  %s2 = sum(%gwx, dim=[1], keepdim=true) : f32[8,1]
  %n = full(size=[], fill_value=64.0) : f32[]
  %m1 = div(%s1, %n) : f32[8,1]
  %m2 = div(%s2, %n) : f32[8,1]
  %t1 = sub(%gw, %m1) : f32[8,64]
  %t2 = mul(%xhat, %m2) : f32[8,64]
  %t3 = sub(%t1, %t2) : f32[8,64]
  %dx = mul(%t3, %rstd) : f32[8,64]
  %gx = mul(%g, %xhat) : f32[8,64]
  %dw = sum(%gx, dim=[0]) : f32[64]
  %db = sum(%g, dim=[0]) : f32[64]
  return (%dx, %dw, %db)
})");
  EXPECT_LE(f.plan.num_kernels(), 2) << f.dump();
  EXPECT_TRUE(f.together({"xhat", "s1", "s2", "dx"}));
  EXPECT_TRUE(f.together({"dw", "db"}));
  EXPECT_EQ(f.of("dw").reduce_dims, (std::vector<int64_t>{0}));
}

// The backward as kiln's decomposition writes it: the row statistics recomputed from x. With
// recompute_from_statistics (a GPU target's choice), the column kernel and the dx pass
// recompute x̂ = (x - mean) * rstd from x and the two [8,1] statistics: the row kernel writes
// only small values. Without it, the row kernel writes x̂ as a full tensor for the others.
TEST(Fusion, RecomputeFromStatisticsKeepsFullTensorsOutOfMemory) {
  const char* text = R"(
graph ln_bwd(%x: f32[8,64], %g: f32[8,64], %w: f32[64]) {
  %n = full(size=[], fill_value=64.0) : f32[]
  %s = sum(%x, dim=[1], keepdim=true) : f32[8,1]
  %mean = div(%s, %n) : f32[8,1]
  %xc = sub(%x, %mean) : f32[8,64]
  %sq = mul(%xc, %xc) : f32[8,64]
  %ss = sum(%sq, dim=[1], keepdim=true) : f32[8,1]
  %var = div(%ss, %n) : f32[8,1]
  %eps = full(size=[], fill_value=0.00001) : f32[]
  %ve = add(%var, %eps) : f32[8,1]
  %rstd = rsqrt(%ve) : f32[8,1]
  %xhat = mul(%xc, %rstd) : f32[8,64]
  %gw = mul(%g, %w) : f32[8,64]
  %gwx = mul(%gw, %xhat) : f32[8,64]
  %s2 = sum(%gwx, dim=[1], keepdim=true) : f32[8,1]
  %m2 = div(%s2, %n) : f32[8,1]
  %t2 = mul(%xhat, %m2) : f32[8,64]
  %dx = mul(%t2, %rstd) : f32[8,64]
  %gx = mul(%g, %xhat) : f32[8,64]
  %dw = sum(%gx, dim=[0]) : f32[64]
  return (%dx, %dw)
})";
  auto full_outputs = [](const Fused& f) {
    int n = 0;
    for (const auto& grp : f.plan.groups)
      for (Value v : grp.outputs) n += v.meta().numel() == 8 * 64 && v.name() != "dx";
    return n;
  };
  fusion::FusionOptions on;
  on.recompute_from_statistics = true;
  Fused f = fuse_text(text, on);
  EXPECT_EQ(full_outputs(f), 0) << f.dump();
  std::string log;
  for (const auto& grp : f.plan.groups)
    for (const std::string& r : grp.reasons) log += r + "\n";
  EXPECT_TRUE(has(log, "from the graph's inputs and small values")) << log;
  Fused off = fuse_text(text);
  EXPECT_GE(full_outputs(off), 1) << "without it a full-size x̂ (or a product of it) is written\n" << off.dump();
}

const char* kCrossEntropy = R"(
graph ce(%z: f32[8,10], %t: i64[8,1], %gl: f32[]) {
  %m = amax(%z, dim=[1], keepdim=true) : f32[8,1]
  %zc = sub(%z, %m) : f32[8,10]
  %e = exp(%zc) : f32[8,10]
  %se = sum(%e, dim=[1], keepdim=true) : f32[8,1]
  %lse = log(%se) : f32[8,1]
  %lp = sub(%zc, %lse) : f32[8,10]
  %ign = full(size=[], fill_value=3, dtype=i64) : i64[]
  %valid = ne(%t, %ign) : bool[8,1]
  %zi = full(size=[], fill_value=0, dtype=i64) : i64[]
  %ts = where(%valid, %t, %zi) : i64[8,1]
  %picked = gather(%lp, %ts, dim=1) : f32[8,1]
  %nll = neg(%picked) : f32[8,1]
  %zf = full(size=[], fill_value=0.0) : f32[]
  %masked = where(%valid, %nll, %zf) : f32[8,1]
  %total = sum(%masked) : f32[]
  %vf = to(%valid, dtype=f32) : f32[8,1]
  %cnt = sum(%vf) : f32[]
  %loss = div(%total, %cnt) : f32[]
  %p = exp(%lp) : f32[8,10]
  %ar = arange(end=10, dtype=i64) : i64[10]
  %hot = eq(%ar, %ts) : bool[8,10]
  %hotf = to(%hot, dtype=f32) : f32[8,10]
  %d = sub(%p, %hotf) : f32[8,10]
  %scale = div(%gl, %cnt) : f32[]
  %wrow = mul(%vf, %scale) : f32[8,1]
  %dz = mul(%d, %wrow) : f32[8,10]
  return (%loss, %dz)
})";

TEST(Fusion, CrossEntropyForwardAndBackward) {
  Fused f = fuse_text(kCrossEntropy);
  // Three kernels, one pass over the logits: the count of counted rows and the gradient's
  // scale first, then the rows' kernel, which writes the loss terms and the gradient itself,
  // then the scalar loss.
  EXPECT_EQ(f.plan.num_kernels(), 3) << f.dump();
  EXPECT_TRUE(f.together({"cnt", "scale"})) << f.dump();
  EXPECT_TRUE(f.together({"m", "lp", "picked", "masked", "p", "hot", "d", "wrow", "dz"})) << f.dump();
  EXPECT_TRUE(f.together({"total", "loss"})) << f.dump();
  EXPECT_LT(f.of("cnt").id, f.of("dz").id);
  EXPECT_LT(f.of("dz").id, f.of("loss").id);
  EXPECT_EQ(f.of("total").reduce_dims, (std::vector<int64_t>{0, 1}));
  // Nothing of the gradient's size leaves the rows' kernel but the gradient.
  for (const Value& v : f.of("dz").outputs) {
    if (v.meta().numel() == 80) {
      EXPECT_EQ(v.name(), "dz") << f.dump();
    }
  }
  // %ar is inlined where it is read, never a kernel of its own.
  EXPECT_EQ(f.of("ar").id, f.of("hot").id);
  // The decisions that made it so are in the log.
  bool split = false, recomputed = false;
  for (const auto& grp : f.plan.groups)
    for (const auto& r : grp.reasons) {
      split |= has(r, "split off") && has(r, "do not wait on k1");
      recomputed |= has(r, "recomputes %vf from the graph's inputs");
    }
  EXPECT_TRUE(split) << f.dump();
  EXPECT_TRUE(recomputed) << f.dump();
}

TEST(Fusion, AViewSplitOffWithAReductionFitsItsRows) {
  // %grad_add joins k1 by splitting [unsqueeze, div, sum] off the pointwise group that reads
  // %u. The part took the alias %u [1,8,1] along and, as %div still reads it, wrote it once
  // per row of a sum over [0,1] of [1,8,7]: 7 of its 8 elements (kiln fuzz, CPU seed 3604,
  // a NaN in %div). The split happens only when %u can stay index arithmetic.
  Fused f = fuse_text(R"(
graph split(%x: bf16[1,8], %a: bf16[16,7], %ta: bf16[16,7], %td: bf16[1,8,7]) {
  %u = unsqueeze(%x, dim=-1) : bf16[1,8,1]
  %s = sum(%a, dim=[0], keepdim=true) : bf16[1,7]
  %s1 = sum(%s, dim=[0]) : bf16[7]
  %div = div(%s1, %u) : bf16[1,8,7]
  %rec = reciprocal(%a) : bf16[16,7]
  %m = mul(%rec, %rec) : bf16[16,7]
  %n = neg(%ta) : bf16[16,7]
  %m1 = mul(%n, %m) : bf16[16,7]
  %gd = div(%td, %u) : bf16[1,8,7]
  %gs = sum(%gd, dim=[0,1], keepdim=true) : bf16[1,1,7]
  %gr = reshape(%gs, shape=[7]) : bf16[7]
  %gd1 = div(%s1, %u) : bf16[1,8,7]
  %gd2 = div(%gd1, %u) : bf16[1,8,7]
  %n1 = neg(%td) : bf16[1,8,7]
  %m2 = mul(%n1, %gd2) : bf16[1,8,7]
  %gs1 = sum(%m2, dim=[2], keepdim=true) : bf16[1,8,1]
  %gr1 = reshape(%gr, shape=[1,7]) : bf16[1,7]
  %ge = expand(%gr1, size=[16,7]) : bf16[16,7]
  %gadd = add(%m1, %ge) : bf16[16,7]
  %gx = reshape(%gs1, shape=[1,8]) : bf16[1,8]
  return (%rec, %div, %gx, %gadd)
})");
  for (const Value& v : f.of("gs").outputs) EXPECT_NE(v.name(), "u") << f.dump();
}

TEST(Fusion, CheapValueOfTheInputsIsRecomputedNotRead) {
  // %mf is made from %t alone: the sum over everything recomputes it rather than wait on the
  // rows' kernel for it, and nothing materializes it.
  Fused f = fuse_text(R"(
graph mask(%x: f32[8,64], %t: i64[8,64]) {
  %zero = full(size=[], fill_value=0, dtype=i64) : i64[]
  %mask = gt(%t, %zero) : bool[8,64]
  %mf = to(%mask, dtype=f32) : f32[8,64]
  %a = mul(%x, %mf) : f32[8,64]
  %s1 = sum(%a, dim=[1]) : f32[8]
  %s0 = sum(%mf) : f32[]
  return (%s1, %s0)
})");
  EXPECT_EQ(f.plan.num_kernels(), 2) << f.dump();
  for (const auto& grp : f.plan.groups) EXPECT_EQ(grp.outputs.size(), 1u) << f.dump();
  EXPECT_TRUE(testing::arena_of(f.g, f.plan).buffers.empty()) << f.dump();
}

TEST(Fusion, BroadcastValueOfTheInputsIsReadNotRecomputed) {
  // %mf [64] is broadcast into the [8,64] loop: a copy there would keep the row sum from
  // absorbing that loop, so it is read from the kernel that makes it.
  Fused f = fuse_text(R"(
graph mask(%x: f32[8,64], %t: i64[64]) {
  %zero = full(size=[], fill_value=0, dtype=i64) : i64[]
  %mask = gt(%t, %zero) : bool[64]
  %mf = to(%mask, dtype=f32) : f32[64]
  %s0 = sum(%mf) : f32[]
  %a = mul(%x, %mf) : f32[8,64]
  %s1 = sum(%a, dim=[1]) : f32[8]
  return (%s1, %s0)
})");
  EXPECT_EQ(f.plan.num_kernels(), 2) << f.dump();
  EXPECT_TRUE(f.together({"a", "s1"})) << f.dump();
}

TEST(Fusion, ChainOfTenPointwiseOpsIsOneKernel) {
  Fused f = fuse_text(R"(
graph chain(%x: f32[16,32], %y: f32[16,32]) {
  %a1 = exp(%x) : f32[16,32]
  %a2 = neg(%a1) : f32[16,32]
  %a3 = add(%a2, %y) : f32[16,32]
  %a4 = tanh(%a3) : f32[16,32]
  %a5 = mul(%a4, %a4) : f32[16,32]
  %a6 = sigmoid(%a5) : f32[16,32]
  %a7 = sub(%a6, %x) : f32[16,32]
  %a8 = abs(%a7) : f32[16,32]
  %a9 = sqrt(%a8) : f32[16,32]
  %a10 = relu(%a9) : f32[16,32]
  return (%a10)
})");
  ASSERT_EQ(f.plan.groups.size(), 1u) << f.dump();
  EXPECT_EQ(f.plan.groups[0].kind, KernelKind::Pointwise);
  EXPECT_EQ(f.plan.groups[0].nodes.size(), 10u);
  EXPECT_EQ(f.plan.groups[0].space, (Shape{16, 32}));
}

TEST(Fusion, GroupSizeCapSplitsTheChain) {
  fusion::FusionOptions options;
  options.max_group_nodes = 4;
  Fused f = fuse_text(R"(
graph chain(%x: f32[16]) {
  %a1 = exp(%x) : f32[16]
  %a2 = neg(%a1) : f32[16]
  %a3 = tanh(%a2) : f32[16]
  %a4 = abs(%a3) : f32[16]
  %a5 = sqrt(%a4) : f32[16]
  %a6 = relu(%a5) : f32[16]
  return (%a6)
})",
                      options);
  EXPECT_EQ(f.plan.num_kernels(), 2) << f.dump();
  EXPECT_TRUE(has(f.of("a5").reasons.front(), "cap of 4")) << f.of("a5").reasons.front();
}

TEST(Fusion, MatmulBiasGeluIsMatmulPlusOneEpilogue) {
  Fused f = fuse_text(R"(
graph mlp(%x: f32[8,32], %w: f32[32,16], %b: f32[16]) {
  %mm = matmul(%x, %w) : f32[8,16]
  %h = add(%mm, %b) : f32[8,16]
  %y = gelu(%h) : f32[8,16]
  return (%y)
})");
  ASSERT_EQ(f.plan.groups.size(), 2u) << f.dump();
  EXPECT_EQ(f.plan.groups[0].kind, KernelKind::Matmul);
  EXPECT_EQ(f.plan.groups[1].kind, KernelKind::Pointwise);
  EXPECT_TRUE(f.together({"h", "y"}));
  EXPECT_EQ(f.plan.groups[1].inputs, (std::vector<Value>{f.g.find("mm"), f.g.find("b")}));
}

TEST(Fusion, ReductionsOverDifferentDimsAreTwoKernels) {
  Fused f = fuse_text(R"(
graph two(%x: f32[8,64]) {
  %a = sum(%x, dim=[0]) : f32[64]
  %b = sum(%x, dim=[1]) : f32[8]
  return (%a, %b)
})");
  EXPECT_EQ(f.plan.num_kernels(), 2) << f.dump();
  bool explained = false;
  for (const auto& r : f.of("b").reasons) explained |= has(r, "refused") && has(r, "sum over [1]") && has(r, "[0]");
  EXPECT_TRUE(explained) << f.dump();
}

TEST(Fusion, HorizontalSiblingsShareAKernel) {
  Fused f = fuse_text(R"(
graph siblings(%x: f32[8,64], %w: f32[64,64]) {
  %a = exp(%x) : f32[8,64]
  %mm = matmul(%x, %w) : f32[8,64]
  %b = cos(%x) : f32[8,64]
  return (%a, %mm, %b)
})");
  EXPECT_TRUE(f.together({"a", "b"})) << f.dump();
  EXPECT_EQ(f.plan.num_kernels(), 2);
  // Horizontal fusion moved %b next to %a: the graph was reordered and still runs (checked
  // against the interpreter by fuse_text).
  EXPECT_EQ(f.g.nodes()[1]->name(), "b");
  fusion::FusionOptions no_horizontal;
  no_horizontal.horizontal = false;
  EXPECT_EQ(fuse_text(print_graph(f.g), no_horizontal).plan.num_kernels(), 3);
}

TEST(Fusion, PermuteBetweenPointwiseOpsAddsNoKernel) {
  Fused f = fuse_text(R"(
graph perm(%x: f32[8,64]) {
  %a = exp(%x) : f32[8,64]
  %t = permute(%a, dims=[1,0]) : f32[64,8]{1,64}
  %y = relu(%t) : f32[64,8]
  return (%y)
})");
  ASSERT_EQ(f.plan.num_kernels(), 1) << f.dump();
  EXPECT_EQ(f.plan.groups[0].space, (Shape{64, 8}));
}

TEST(Fusion, TransposeFeedingAMatmulIsAnAlias) {
  Fused f = fuse_text(R"(
graph lin(%x: f32[8,32], %w: f32[16,32]) {
  %wt = transpose(%w, dim0=0, dim1=1) : f32[32,16]{1,32}
  %mm = matmul(%x, %wt) : f32[8,16]
  return (%mm)
})");
  ASSERT_EQ(f.plan.groups.size(), 2u) << f.dump();
  EXPECT_EQ(f.of("wt").kind, KernelKind::Alias);
  EXPECT_EQ(f.of("mm").kind, KernelKind::Matmul);
  EXPECT_EQ(f.plan.num_kernels(), 1);
}

TEST(Fusion, TransposeOfAComputedValueFeedingAMatmulStaysAnAlias) {
  Fused f = fuse_text(R"(
graph lin(%x: f32[8,32], %w: f32[16,32]) {
  %r = relu(%w) : f32[16,32]
  %wt = transpose(%r, dim0=0, dim1=1) : f32[32,16]{1,32}
  %mm = matmul(%x, %wt) : f32[8,16]
  return (%mm)
})");
  EXPECT_EQ(f.of("wt").kind, KernelKind::Alias) << f.dump();
  EXPECT_EQ(f.of("r").outputs, std::vector<Value>{f.g.find("r")});
  // The alias keeps its base alive until the matmul has read it.
  testing::Arena mem = testing::arena_of(f.g, f.plan);
  ASSERT_EQ(mem.buffers.size(), 1u);
  EXPECT_EQ(mem.buffers[0].value, "r");
  EXPECT_EQ(mem.buffers[0].last_step, mem.step_of_group.at(f.of("mm").id));
}

TEST(Fusion, AValueReadByTwoGroupsIsMaterializedOnce) {
  // Five ops are more than a group recomputes (four): %a is made once and read once.
  Fused f = fuse_text(R"(
graph shared(%x: f32[8,64]) {
  %a1 = exp(%x) : f32[8,64]
  %a2 = neg(%a1) : f32[8,64]
  %a3 = tanh(%a2) : f32[8,64]
  %a4 = abs(%a3) : f32[8,64]
  %a = sqrt(%a4) : f32[8,64]
  %s0 = sum(%a, dim=[0]) : f32[64]
  %s1 = sum(%a, dim=[1]) : f32[8]
  return (%s0, %s1)
})");
  EXPECT_EQ(f.plan.num_kernels(), 2) << f.dump();
  int producers = 0, readers = 0;
  for (const auto& grp : f.plan.groups) {
    producers += std::count(grp.outputs.begin(), grp.outputs.end(), f.g.find("a"));
    readers += std::count(grp.inputs.begin(), grp.inputs.end(), f.g.find("a"));
  }
  EXPECT_EQ(producers, 1);
  EXPECT_EQ(readers, 1);
  testing::Arena mem = testing::arena_of(f.g, f.plan);
  ASSERT_EQ(mem.buffers.size(), 1u);
  EXPECT_EQ(mem.buffers[0].bytes, 8 * 64 * 4);
}

TEST(Fusion, ShortChainOfTheInputsReadByTwoGroupsIsRecomputedInEach) {
  Fused f = fuse_text(R"(
graph shared(%x: f32[8,64]) {
  %a = exp(%x) : f32[8,64]
  %s0 = sum(%a, dim=[0]) : f32[64]
  %s1 = sum(%a, dim=[1]) : f32[8]
  return (%s0, %s1)
})");
  EXPECT_EQ(f.plan.num_kernels(), 2) << f.dump();
  for (const auto& grp : f.plan.groups) EXPECT_EQ(grp.outputs.size(), 1u) << f.dump();
  EXPECT_TRUE(testing::arena_of(f.g, f.plan).buffers.empty()) << f.dump();
}

TEST(Fusion, DiamondThatWouldCycleIsRefused) {
  // %c reads %a directly and through the matmul: putting %c with %a would make the matmul
  // both read from and feed that group.
  Fused f = fuse_text(R"(
graph diamond(%x: f32[8,8], %w: f32[8,8]) {
  %a = exp(%x) : f32[8,8]
  %m = matmul(%a, %w) : f32[8,8]
  %c = add(%a, %m) : f32[8,8]
  return (%c)
})");
  ASSERT_EQ(f.plan.groups.size(), 3u) << f.dump();
  EXPECT_LT(f.of("a").id, f.of("m").id);
  EXPECT_LT(f.of("m").id, f.of("c").id);
  bool explained = false;
  for (const auto& r : f.of("c").reasons) explained |= has(r, "refused") && has(r, "cycle through k1");
  EXPECT_TRUE(explained) << f.dump();
}

TEST(Fusion, SharedConstantIsCopiedIntoEachReadingGroup) {
  Fused f = fuse_text(R"(
graph consts(%x: f32[8,64], %y: f32[64]) {
  %two = full(size=[], fill_value=2.0) : f32[]
  %a = mul(%x, %two) : f32[8,64]
  %b = mul(%y, %two) : f32[64]
  return (%a, %b)
})");
  ASSERT_EQ(f.plan.num_kernels(), 2) << f.dump();
  EXPECT_EQ(f.plan.groups[0].inputs, std::vector<Value>{f.g.find("x")});
  EXPECT_EQ(f.plan.groups[1].inputs, std::vector<Value>{f.g.find("y")});
  EXPECT_EQ(f.g.num_nodes(), 4u);  // %two and its copy
}

TEST(Fusion, ConstantReadByAMatmulIsMaterialized) {
  Fused f = fuse_text(R"(
graph c(%x: f32[4,4]) {
  %id = constant(size=[4,4], dtype=f32, values=[1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1]) : f32[4,4]
  %m = matmul(%x, %id) : f32[4,4]
  return (%m)
})");
  EXPECT_EQ(f.of("id").kind, KernelKind::Constant) << f.dump();
  EXPECT_EQ(f.plan.num_kernels(), 2);
}

TEST(Fusion, CompositeOpsAreAnError) {
  Graph g = parse_graph(R"(
graph sm(%x: f32[8,64]) {
  %y = softmax(%x, dim=1) : f32[8,64]
  return (%y)
})");
  std::string msg = kiln::testing::error_of([&] { fusion::fuse(g); });
  EXPECT_TRUE(has(msg, "%y = softmax")) << msg;
  EXPECT_TRUE(has(msg, "decompose")) << msg;
}

TEST(Fusion, FusedPrintParsesBackToTheSameGraph) {
  Fused f = fuse_text(kCrossEntropy);
  std::string text = f.dump();
  EXPECT_TRUE(has(text, "# kernel k1 (reduction): rows [8,10] over [1] [amax, sub")) << text;
  Graph back = parse_graph(text);
  EXPECT_EQ(print_graph(back), print_graph(f.g));
}

TEST(Fusion, DotDrawsOneClusterPerGroup) {
  Fused f = fuse_text(R"(
graph mlp(%x: f32[8,32], %w: f32[16,32], %b: f32[16]) {
  %wt = transpose(%w, dim0=0, dim1=1) : f32[32,16]{1,32}
  %mm = matmul(%x, %wt) : f32[8,16]
  %h = add(%mm, %b) : f32[8,16]
  %y = gelu(%h) : f32[8,16]
  return (%y)
})");
  std::string dot = fusion::fused_to_dot(f.g, f.plan);
  for (const auto& grp : f.plan.groups) {
    EXPECT_TRUE(has(dot, "subgraph cluster_k" + std::to_string(grp.id) + " {")) << dot;
    EXPECT_TRUE(has(dot, "label=\"" + grp.label() + "\"")) << dot;
  }
  EXPECT_TRUE(has(dot, "label=\"k2 pointwise [add, gelu]\"")) << dot;
  EXPECT_TRUE(has(dot, "dashed")) << "the alias is drawn dashed\n" << dot;
  // Without a plan the drawing has no clusters.
  EXPECT_FALSE(has(to_dot(f.g), "cluster"));
}

// Sets KILN_LOGS for one test and puts back what was there.
class ScopedLogs {
 public:
  explicit ScopedLogs(const char* value) {
    if (const char* old = std::getenv("KILN_LOGS")) saved_ = old;
    ::setenv("KILN_LOGS", value, 1);
  }
  ~ScopedLogs() {
    if (saved_) ::setenv("KILN_LOGS", saved_->c_str(), 1);
    else ::unsetenv("KILN_LOGS");
  }

 private:
  std::optional<std::string> saved_;
};

TEST(Fusion, LogExplainsEachDecision) {
  std::string log;
  {
    ScopedLogs logs("fusion");
    ::testing::internal::CaptureStderr();
    fuse_text(R"(
graph two(%x: f32[8,64]) {
  %e = exp(%x) : f32[8,64]
  %a = sum(%e, dim=[0]) : f32[64]
  %b = sum(%x, dim=[1]) : f32[8]
  return (%a, %b)
})");
    log = ::testing::internal::GetCapturedStderr();
  }
  EXPECT_TRUE(has(log, "[fusion] graph two: 3 nodes -> 2 kernels")) << log;
  EXPECT_TRUE(has(log, "k0: %a = sum joins k0 (reduction over [0] absorbs its producers in [8,64])")) << log;
  EXPECT_TRUE(has(log, "refused: %b = sum with k0: sum over [1] of [8,64] vs sum over [0] of [8,64]")) << log;
  // Off by default.
  ScopedLogs off("");
  ::testing::internal::CaptureStderr();
  fuse_text(kLayerNormForward);
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(Fusion, DecomposedMiniGPTForwardAndLoss) {
  nn::MiniGPTConfig cfg{.vocab_size = 50, .d_model = 16, .n_heads = 2, .context = 8};
  nn::MiniGPT model(cfg, 5);
  std::vector<int64_t> ids, next;
  for (int64_t i = 0; i < 14; ++i) {
    ids.push_back((i * 7919 + 31) % 50);
    next.push_back((i * 7919 + 62) % 50);
  }
  Tensor tokens = tensor_of_ints(ids, {2, 7}), targets = tensor_of_ints(next, {2, 7});
  const std::vector<std::string> lowering = {"decompose", "canonicalize", "cse", "dce"};

  TracedGraph fwd = trace([&](const Tensor& t) { return model.forward(t); }, tokens, "forward");
  run_pipeline(fwd.graph, lowering);
  size_t nodes = fwd.graph.num_nodes();
  Fused f = fuse_graph(std::move(fwd.graph), {}, fwd.graph_inputs({tokens.data()}));
  int matmuls = 0, reductions = 0, attention = 0;
  for (const auto& grp : f.plan.groups) {
    matmuls += grp.kind == KernelKind::Matmul;
    reductions += grp.kind == KernelKind::Reduction;
    attention += grp.kind == KernelKind::Attention;
  }
  // Per block: the qkv projection, the attention's output projection and the MLP's two GEMMs,
  // then the head; the attention itself is one flash kernel per block.
  EXPECT_GE(matmuls, 2 * 4 + 1) << f.dump();
  EXPECT_EQ(attention, 2) << f.dump();
  // Each block's two layer norms are one kernel each, plus the final norm.
  EXPECT_LE(reductions, 2 * 2 + 1 + 2) << f.dump();
  EXPECT_LT(f.plan.num_kernels(), static_cast<int>(nodes) / 3) << f.dump();
  testing::Arena mem = testing::arena_of(f.g, f.plan);
  EXPECT_LT(mem.plan.arena_bytes, mem.plan.naive_bytes) << mem.plan.report();
  if (std::getenv("KILN_FUSION_DUMP")) std::printf("%s\n", f.dump().c_str());
  std::printf("MiniGPT forward: %zu nodes -> %d kernels (%d matmuls, %d reductions); %s\n", nodes,
              f.plan.num_kernels(), matmuls, reductions, mem.plan.report().c_str());

  TracedGraph loss = trace(
      [&](const std::vector<Tensor>& in) { return std::vector<Tensor>{model.loss(in[0], in[1])}; }, {tokens, targets},
      "loss");
  run_pipeline(loss.graph, lowering);
  nodes = loss.graph.num_nodes();
  Fused l = fuse_graph(std::move(loss.graph), {}, loss.graph_inputs({tokens.data(), targets.data()}));
  std::printf("MiniGPT loss: %zu nodes -> %d kernels; %s\n", nodes, l.plan.num_kernels(),
              testing::arena_of(l.g, l.plan).plan.report().c_str());
}

}  // namespace
namespace {

// Column partials in rows are fusion's decision (passes/fusion/column_partials.h): where the
// target asks, a column group (dW: a sum over the rows) that reads a row group's statistics
// (each row's rstd) computes that group itself, row by row; the row group is folded into it
// and both record why. A statistic the graph returns is a near miss that says so; without the
// option nothing folds.
TEST(Fusion, AColumnSumComputesTheRowStatisticsItReads) {
  const char* text = R"(
graph rms_backward(%x: f32[8,16], %w: f32[16], %dy: f32[8,16]) {
  %sq = mul(%x, %x) : f32[8,16]
  %ss = sum(%sq, dim=[1], keepdim=true) : f32[8,1]
  %n = full(size=[], fill_value=16.0) : f32[]
  %ms = div(%ss, %n) : f32[8,1]
  %r = rsqrt(%ms) : f32[8,1]
  %xn = mul(%x, %r) : f32[8,16]
  %g = mul(%dy, %xn) : f32[8,16]
  %dw = sum(%g, dim=[0]) : f32[16]
  %dyw = mul(%dy, %w) : f32[8,16]
  %dx = mul(%dyw, %r) : f32[8,16]
  return (%dx, %dw RETURNED)
})";
  auto with = [&](const std::string& extra) {
    std::string t = text;
    t.replace(t.find(" RETURNED"), 9, extra);
    return t;
  };
  fusion::FusionOptions on;
  on.column_partials_in_rows = true;
  on.recompute_from_statistics = true;  // as for a GPU: the row group hands on rstd, not x̂
  Fused f = fuse_text(with(""), on);
  const fusion::FusionGroup& rows = f.of("ss");
  const fusion::FusionGroup& cols = f.of("dw");
  ASSERT_NE(rows.id, cols.id) << f.dump();
  EXPECT_EQ(cols.rows_of, rows.id) << f.dump();
  EXPECT_EQ(rows.folded_into, cols.id);
  EXPECT_EQ(f.plan.num_kernels(), 1) << "the column group's kernel computes the rows";
  EXPECT_TRUE(has(cols.reasons.back(), fmt::format("column partials in the rows of k{}", rows.id))) << cols.reasons.back();
  EXPECT_TRUE(has(rows.reasons.back(), fmt::format("computed row by row in the chunks of k{}", cols.id))) << rows.reasons.back();
  EXPECT_TRUE(has(print_fused(f.g, f.plan), fmt::format("# rows in the chunks of k{},", cols.id))) << print_fused(f.g, f.plan);

  Fused returned = fuse_text(with(", %r"), on);
  EXPECT_EQ(returned.of("dw").rows_of, -1);
  EXPECT_TRUE(has(returned.of("dw").reasons.back(), "no column partials in the rows of")) << returned.dump();
  EXPECT_TRUE(has(returned.of("dw").reasons.back(), "%r is an output of the graph")) << returned.of("dw").reasons.back();

  fusion::FusionOptions off_opt = on;
  off_opt.column_partials_in_rows = false;
  Fused off = fuse_text(with(""), off_opt);
  EXPECT_EQ(off.of("dw").rows_of, -1);
  EXPECT_EQ(off.plan.num_kernels(), 2);
}

// A column sum read back over the rows in its own group (x - sum(x, dim=0)) is whole only after
// every chunk of rows: that group does not take the row statistics into its chunks, and says
// why (kiln fuzz, seed 5111015963: logsumexp over dim 0 with its gradient failed to lower).
TEST(Fusion, AColumnSumReadOverTheRowsKeepsItsRowGroupApart) {
  fusion::FusionOptions on;
  on.column_partials_in_rows = true;
  Fused f = fuse_text(R"(
graph colsum_used(%x: f32[8,16], %t: f32[8,16]) {
  %rs = sum(%x, dim=[1], keepdim=true) : f32[8,1]
  %a = mul(%t, %rs) : f32[8,16]
  %cs = sum(%a, dim=[0], keepdim=true) : f32[1,16]
  %d = sub(%a, %cs) : f32[8,16]
  return (%d)
})", on);
  const fusion::FusionGroup& cols = f.of("cs");
  EXPECT_EQ(cols.rows_of, -1) << f.dump();
  EXPECT_EQ(f.plan.num_kernels(), 2) << f.dump();
  ASSERT_FALSE(cols.reasons.empty());
  EXPECT_TRUE(has(cols.reasons.back(), "no column partials in the rows of")) << cols.reasons.back();
  EXPECT_TRUE(has(cols.reasons.back(), "%d reads a column sum over the rows")) << cols.reasons.back();
}

// Matmul epilogues are fusion's decision (passes/fusion/matmul_epilogue.h): where the target's
// GEMM has them, the bias add and ReLU after a matmul fold into it, recorded in both groups'
// reasons; an exact GELU is a near miss that says why; without the option nothing folds.
TEST(Fusion, AMatmulFoldsItsBiasAndReluWhereTheTargetsGemmCan) {
  const char* text = R"(
graph lin(%x: f32[6,4], %w: f32[4,5], %b: f32[5]) {
  %mm = matmul(%x, %w) : f32[6,5]
  %y = add(%mm, %b) : f32[6,5]
  %act = ACT : f32[6,5]
  return (%act)
})";
  auto with = [&](const std::string& act) {
    std::string t = text;
    t.replace(t.find("ACT"), 3, act);
    return t;
  };
  fusion::FusionOptions epilogues;
  epilogues.matmul_epilogues = true;
  Fused f = fuse_text(with("relu(%y)"), epilogues);
  const fusion::FusionGroup& mm = f.of("mm");
  const fusion::FusionGroup& act = f.of("act");
  EXPECT_EQ(mm.epilogue, fusion::MatmulEpilogue::BiasRelu) << f.dump();
  EXPECT_EQ(mm.epilogue_bias, f.g.find("b"));
  EXPECT_EQ(mm.epilogue_result, f.g.find("act"));
  EXPECT_EQ(act.folded_into, mm.id);
  EXPECT_EQ(f.plan.num_kernels(), 1) << "the GEMM computes the epilogue group";
  EXPECT_TRUE(has(mm.reasons.back(), "epilogue bias+relu: the GEMM adds %b and writes %act")) << mm.reasons.back();
  EXPECT_TRUE(has(print_fused(f.g, f.plan), fmt::format("# epilogue of k{},", mm.id))) << print_fused(f.g, f.plan);

  Fused exact = fuse_text(with("gelu(%y)"), epilogues);
  EXPECT_EQ(exact.of("mm").epilogue, fusion::MatmulEpilogue::None);
  EXPECT_EQ(exact.of("act").folded_into, -1);
  EXPECT_TRUE(has(exact.of("mm").reasons.back(), "is not a ReLU or a tanh GELU")) << exact.of("mm").reasons.back();

  Fused off = fuse_text(with("relu(%y)"));
  EXPECT_EQ(off.of("mm").epilogue, fusion::MatmulEpilogue::None);
  EXPECT_EQ(off.plan.num_kernels(), 2);
}

// A training step reads the ReLU's mask (relu <= 0) in its backward. Joined to the bias and
// ReLU after a matmul, the mask would keep that group a kernel of its own (a second result);
// where the GEMM has the epilogue, the mask stays out, the GEMM writes the ReLU, and the mask is
// computed by its reader from the ReLU's result. Without epilogues the mask joins as before.
TEST(Fusion, AReluMaskStaysOutOfAGemmEpilogueAndJoinsItsReader) {
  const char* text = R"(
graph step(%x: f32[6,4], %w: f32[4,5], %b: f32[5], %g: f32[6,5]) {
  %mm = matmul(%x, %w) : f32[6,5]
  %y = add(%mm, %b) : f32[6,5]
  %act = relu(%y) : f32[6,5]
  %zero = full(size=[], fill_value=0.0, dtype=f32) : f32[]
  %mask = le(%act, %zero) : bool[6,5]
  %dy = where(%mask, %zero, %g) : f32[6,5]
  %db = sum(%dy, dim=[0]) : f32[5]
  return (%act, %db)
})";
  fusion::FusionOptions epilogues;
  epilogues.matmul_epilogues = true;
  Fused f = fuse_text(text, epilogues);
  EXPECT_EQ(f.of("mm").epilogue, fusion::MatmulEpilogue::BiasRelu) << f.dump();
  EXPECT_EQ(f.of("mask").id, f.of("db").id) << "the mask is computed where it is read\n" << f.dump();
  EXPECT_EQ(f.plan.num_kernels(), 2) << "the GEMM with its epilogue, and the masked sum";
  bool noted = false;
  for (const std::string& r : f.of("mask").reasons) noted |= has(r, "stays out of") && has(r, "epilogue");
  EXPECT_TRUE(noted) << f.dump();

  Fused off = fuse_text(text);
  EXPECT_EQ(off.of("mask").id, off.of("act").id) << off.dump();
  EXPECT_EQ(off.of("mm").epilogue, fusion::MatmulEpilogue::None);
}

}  // namespace

}  // namespace kiln
