// Lowering of small fusion groups (built by hand, independent of the fusion heuristics) to
// expected kernel IR, and golden snapshots of the emitted C++ for one pointwise and one
// reduction kernel (KILN_UPDATE_GOLDEN=1 rewrites them after an intended change).
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "codegen/cpp_emitter.h"
#include "codegen/cuda_emitter.h"
#include "codegen/lower.h"
#include "codegen/schedule.h"
#include "ir/builder.h"
#include "passes/fusion/fusion.h"
#include "passes/fusion/matmul_epilogue.h"
#include "ir/parser.h"
#include "passes/pass_manager.h"
#include "tests/support/support.h"

namespace kiln::codegen {
namespace {

using kiln::testing::F;
using kiln::testing::I;
using kiln::testing::has;
using kiln::testing::occurrences;

// A plan with one group per entry, in order: (kind, nodes by result name).
fusion::FusionPlan plan_of(const Graph& g, std::vector<std::pair<fusion::KernelKind, std::vector<std::string>>> groups) {
  fusion::FusionPlan plan;
  for (auto& [kind, names] : groups) {
    fusion::FusionGroup grp;
    grp.id = static_cast<int>(plan.groups.size());
    grp.kind = kind;
    for (auto& n : names) {
      Node* node = g.find(n).node;
      EXPECT_TRUE(node) << n;
      grp.nodes.push_back(node);
      plan.group_of[node] = grp.id;
    }
    plan.groups.push_back(grp);
  }
  // Outputs: values read by another group or returned.
  for (auto& grp : plan.groups)
    for (Node* n : grp.nodes) {
      Value v = n->result(0);
      bool out = std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
      for (auto& u : n->result_info(0).uses) out = out || plan.group_of.at(u.user) != grp.id;
      if (out) grp.outputs.push_back(v);
    }
  return plan;
}

std::string body_of(const Kernel& k) { return print_stmt(k.body); }

TEST(Lower, PointwiseChainWithBroadcastIsOneLoop) {
  // 7x33 is small: the dims merge into one contiguous loop (no thread handoff).
  Graph g("pw");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var y = b.wrap(g.add_input("y", F({33})));
  Var e = b.op(Op::Exp, {b.add(x, y)}, {}, "e");
  g.set_outputs({e});
  auto plan = plan_of(g, {{fusion::KernelKind::Pointwise, {"add", "e"}}});
  LoweredGraph lg = lower(g, plan);
  ASSERT_EQ(lg.kernels.size(), 1u);
  EXPECT_EQ(body_of(lg.kernels[0]),
            "parallel for i in 0..231 {  # computes %e\n"
            "  add: f32 = add(b1[i], b2[i % 33])\n"
            "  e: f32 = exp(add)\n"
            "  b0[i] = e\n"
            "}\n");
}

TEST(Lower, LargeTensorsKeepAParallelOuterLoop) {
  Graph g("pw");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({1000, 2, 33})));
  g.set_outputs({b.op(Op::Exp, {b.transpose(x, 1, 2)}, {}, "e")});
  auto plan = plan_of(g, {{fusion::KernelKind::Pointwise, {g.outputs()[0].node->input(0).name(), "e"}}});
  EXPECT_EQ(body_of(lower(g, plan).kernels.at(0)),
            "parallel for p in 0..1000 {  # computes %e\n"
            "  parallel for i in 0..66 {\n"
            "    e: f32 = exp(b1[p*66 + (i % 2)*33 + i / 2])\n"
            "    b0[p*66 + i] = e\n"
            "  }\n"
            "}\n");
}

TEST(Lower, ViewsAreIndexTransformsAndCatIsASelect) {
  Graph g("views");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({4, 6})));
  Var t = b.transpose(x, 0, 1);            // [6,4]
  Var s = b.slice(t, 0, 1, 6, 2);          // rows 1,3,5 -> [3,4]
  Var c = b.cat({s, b.wrap(g.add_input("z", F({2, 4})))}, 0);  // [5,4]
  Var n = b.op(Op::Neg, {c}, {}, "n");
  g.set_outputs({n});
  auto plan = plan_of(g, {{fusion::KernelKind::Pointwise, {t.v.name(), s.v.name(), c.v.name(), "n"}}});
  LoweredGraph lg = lower(g, plan);
  ASSERT_EQ(lg.kernels.size(), 1u);
  EXPECT_EQ(body_of(lg.kernels[0]),
            "parallel for i in 0..20 {  # computes %n\n"
            "  n: f32 = neg(select(lt(i / 4, 3), b1[(i % 4)*6 + (i / 4)*2 + 1], b2[i - 12]))\n"
            "  b0[i] = n\n"
            "}\n");
}

TEST(Lower, SoftmaxRowIsThreeLoopsOverOneRow) {
  Graph g("softmax");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var m = b.op(Op::Amax, {x}, {{"dim", IntList{1}}, {"keepdim", true}}, "m");
  Var e = b.op(Op::Exp, {b.op(Op::Sub, {x, m}, {}, "d")}, {}, "e");
  Var s = b.op(Op::Sum, {e}, {{"dim", IntList{1}}, {"keepdim", true}}, "s");
  Var p = b.op(Op::Div, {e, s}, {}, "p");
  g.set_outputs({p, s});
  auto plan = plan_of(g, {{fusion::KernelKind::Reduction, {"m", "d", "e", "s", "p"}}});
  LoweredGraph lg = lower(g, plan);
  ASSERT_EQ(lg.kernels.size(), 1u);
  EXPECT_EQ(body_of(lg.kernels[0]),
            "parallel for row in 0..7 {  # rows of computes %s %p\n"
            "  acc m_acc: f32 = max.identity\n"
            "  reduction for r in 0..33 {  # reduces %m\n"
            "    m_acc <max>= b2[row*33 + r]\n"
            "  }\n"
            "  m: f32 = m_acc\n"
            "  acc s_acc: f32 = sum.identity\n"
            "  reduction for r in 0..33 {  # reduces %s\n"
            "    d: f32 = sub(b2[row*33 + r], m)\n"
            "    e: f32 = exp(d)\n"
            "    s_acc <sum>= e\n"
            "  }\n"
            "  s: f32 = s_acc\n"
            "  b0[row] = s\n"
            "  parallel for r in 0..33 {  # computes %p\n"
            "    d_1: f32 = sub(b2[row*33 + r], m)\n"
            "    e_1: f32 = exp(d_1)\n"
            "    p_1: f32 = div(e_1, s)\n"
            "    b1[row*33 + r] = p_1\n"
            "  }\n"
            "}\n");
}

TEST(Lower, GatherIsACheckedIndirectLoadAndMatmulABlasStep) {
  Graph g("gm");
  Builder b(g);
  Var w = b.wrap(g.add_input("w", F({10, 8})));
  Var ids = b.wrap(g.add_input("ids", I({3, 8})));
  Var gth = b.op(Op::Gather, {w, ids}, {{"dim", int64_t(0)}}, "g");
  Var wt = b.wrap(g.add_input("v", F({5, 8})));
  Var t = b.transpose(wt, 0, 1);
  Var mm = b.op(Op::Matmul, {gth, t}, {}, "mm");
  g.set_outputs({mm});
  auto plan = plan_of(g, {{fusion::KernelKind::Pointwise, {"g"}}, {fusion::KernelKind::Alias, {t.v.name()}},
                          {fusion::KernelKind::Matmul, {"mm"}}});
  LoweredGraph lg = lower(g, plan);
  ASSERT_EQ(lg.kernels.size(), 1u);
  EXPECT_EQ(body_of(lg.kernels[0]),
            "parallel for i in 0..24 {  # computes %g\n"
            "  g_index: i64 = check_index(b1[i], 10, 0)\n"
            "  b0[i] = b2[g_index*8 + i % 8]\n"
            "}\n");
  ASSERT_EQ(lg.steps.size(), 2u);
  const MatmulCall& m = lg.steps[1].matmul;
  EXPECT_EQ(lg.steps[1].kind, Step::Kind::Matmul);
  EXPECT_TRUE(!m.trans_a && m.trans_b);  // the transposed weight is a BLAS flag, not a copy
  EXPECT_EQ(m.m, 3);
  EXPECT_EQ(m.n, 5);
  EXPECT_EQ(m.k, 8);
  EXPECT_TRUE(has(print_schedule(lg), "blas f32 B4 = B3 @ B2^T"));
}

// A batch of products with one shared right-hand matrix over a contiguous [batch, m, k] is one
// product of batch * m rows (as PyTorch's linear); a transposed left-hand batch, or a batched
// right-hand side, stays a batched call.
TEST(Lower, ABatchTimesOneMatrixIsOneProductOfAllItsRows) {
  auto matmul_of = [](bool transposed_left, bool batched_right) {
    Graph g("lin3");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", F(transposed_left ? Shape{4, 5, 3} : Shape{4, 3, 5})));
    Var left = transposed_left ? b.transpose(x, 1, 2) : x;
    Var w = b.wrap(g.add_input("w", F(batched_right ? Shape{4, 5, 7} : Shape{5, 7})));
    Var mm = b.op(Op::Matmul, {left, w}, {}, "mm");
    g.set_outputs({mm});
    std::vector<std::pair<fusion::KernelKind, std::vector<std::string>>> groups{{fusion::KernelKind::Matmul, {"mm"}}};
    if (transposed_left) groups.push_back({fusion::KernelKind::Alias, {left.v.name()}});
    LoweredGraph lg = lower(g, plan_of(g, groups));
    return lg.steps.back().matmul;
  };
  MatmulCall flat = matmul_of(false, false);
  EXPECT_EQ(flat.batch, 1);
  EXPECT_EQ(flat.m, 12);
  EXPECT_EQ(flat.a_batch_stride, 0);
  EXPECT_EQ(flat.b_batch_stride, 0);
  MatmulCall transposed = matmul_of(true, false);
  EXPECT_EQ(transposed.batch, 4);
  EXPECT_TRUE(transposed.trans_a);
  EXPECT_EQ(transposed.m, 3);
  MatmulCall batched = matmul_of(false, true);
  EXPECT_EQ(batched.batch, 4);
  EXPECT_EQ(batched.m, 3);
}

// A weight gradient reads its operands through views: dyᵀ @ x over reshapes of [batch, seq,
// features] tensors. Views that keep their base's start and leave its matrices contiguous or
// transposed go to BLAS where they lie; a slice that starts further in is copied.
TEST(Lower, MatmulOperandsAreReadThroughViewChainsWithoutCopies) {
  Graph g("wgrad");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({4, 3, 5})));
  Var dy = b.wrap(g.add_input("dy", F({4, 3, 7})));
  Var xr = b.reshape(x, {12, 5});
  Var dyt = b.transpose(b.reshape(dy, {12, 7}), 0, 1);
  Var dw = b.op(Op::Matmul, {dyt, xr}, {}, "dw");
  Var head = b.slice(xr, 0, 0, 10);  // rows 0..9: the same start
  Var tail = b.slice(xr, 0, 2, 12);  // rows 2..11: starts further in
  Var w = b.wrap(g.add_input("w", F({5, 6})));
  Var mh = b.op(Op::Matmul, {head, w}, {}, "mh");
  Var mt = b.op(Op::Matmul, {tail, w}, {}, "mt");
  g.set_outputs({dw, mh, mt});
  std::vector<std::string> views;
  for (Var v : {xr, dyt, head, tail}) views.push_back(v.v.name());
  views.push_back(dyt.v.node->input(0).name());
  LoweredGraph lg = lower(g, plan_of(g, {{fusion::KernelKind::Alias, views},
                                         {fusion::KernelKind::Matmul, {"dw"}},
                                         {fusion::KernelKind::Matmul, {"mh"}},
                                         {fusion::KernelKind::Matmul, {"mt"}}}));
  ASSERT_EQ(lg.kernels.size(), 1u);  // the tail's copy alone
  EXPECT_TRUE(has(lg.kernels[0].comment, "matmul operand %" + tail.v.name())) << lg.kernels[0].comment;
  std::vector<MatmulCall> mms;
  for (const Step& s : lg.steps)
    if (s.kind == Step::Kind::Matmul) mms.push_back(s.matmul);
  ASSERT_EQ(mms.size(), 3u);
  EXPECT_TRUE(mms[0].trans_a && !mms[0].trans_b);
  EXPECT_EQ(mms[0].a, 1);  // dy's own buffer (the graph's second input)
  EXPECT_EQ(mms[0].b, 0);  // x's
  EXPECT_EQ(mms[0].m, 7);
  EXPECT_EQ(mms[0].k, 12);
  EXPECT_EQ(mms[0].n, 5);
  EXPECT_EQ(mms[1].a, 0);  // the head: x's buffer, its first 10 rows
  EXPECT_EQ(mms[1].m, 10);
  EXPECT_NE(mms[2].a, 0);  // the tail: a copy
}

// An embedding's gradient (scatter_add by an index expanded over the features): on a GPU its
// index's column is checked, sorted with its positions, and each run of equal rows added by
// the sorted scatter routine; on the CPU (and on a GPU for a non-expanded index) the ordered
// kernel runs along the index.
TEST(Lower, AScatterByAnExpandedIndexIsSortedOnAGpu) {
  auto kernels_of = [](bool expanded, const Target& t) {
    Graph g("embedding_grad");
    Builder b(g);
    Var table = b.wrap(g.add_input("table", F({100, 16})));
    Var ids = b.wrap(g.add_input("ids", I({64})));
    Var full_ids = b.wrap(g.add_input("full_ids", I({64, 16})));
    Var src = b.wrap(g.add_input("src", F({64, 16})));
    Var index = expanded ? b.op(Op::Expand, {b.unsqueeze(ids, 1)}, {{"size", IntList{64, 16}}}) : full_ids;
    Var s = b.op(Op::ScatterAdd, {table, index, src}, {{"dim", int64_t(0)}}, "s");
    g.set_outputs({s});
    std::vector<std::pair<fusion::KernelKind, std::vector<std::string>>> groups;
    if (expanded) groups.push_back({fusion::KernelKind::Alias, {index.v.node->input(0).name(), index.v.name()}});
    groups.push_back({fusion::KernelKind::Scatter, {"s"}});
    return lower(g, plan_of(g, groups), t).kernels;
  };
  std::vector<Kernel> gpu = kernels_of(true, cuda_target());
  ASSERT_EQ(gpu.size(), 4u);
  EXPECT_TRUE(has(gpu[0].comment, "copy of self")) << gpu[0].comment;
  EXPECT_TRUE(has(gpu[1].comment, "its index's column")) << gpu[1].comment;
  EXPECT_TRUE(has(print_kernel(gpu[1]), "check_index")) << print_kernel(gpu[1]);
  ASSERT_TRUE(gpu[2].sort.has_value());
  EXPECT_EQ(gpu[2].sort->n, 64);
  EXPECT_FALSE(gpu[2].sort->descending);
  ASSERT_TRUE(gpu[3].sorted_scatter.has_value());
  EXPECT_EQ(gpu[3].sorted_scatter->n, 64);
  EXPECT_EQ(gpu[3].sorted_scatter->rows, 100);
  EXPECT_EQ(gpu[3].sorted_scatter->inner, 16);
  for (const std::vector<Kernel>& ordered : {kernels_of(true, cpu_target()), kernels_of(false, cuda_target())}) {
    ASSERT_EQ(ordered.size(), 2u);
    EXPECT_FALSE(ordered[1].sorted_scatter.has_value());
    EXPECT_TRUE(has(print_kernel(ordered[1]), "in index order along its dim")) << print_kernel(ordered[1]);
  }
}

// One numbering everywhere: a kernel is named after its fusion group (as fused.kir and the
// fusion log call it), whatever the kernels before it.
TEST(Lower, KernelsAreNamedAfterTheirFusionGroup) {
  Graph g("kn");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({4, 6})));
  Var t = b.transpose(x, 0, 1);
  Var e = b.op(Op::Exp, {t}, {}, "e");
  Var s = b.op(Op::Sum, {e}, {{"dim", IntList{1}}}, "s");
  g.set_outputs({e, s});
  auto plan = plan_of(g, {{fusion::KernelKind::Alias, {t.v.name()}}, {fusion::KernelKind::Pointwise, {"e"}},
                          {fusion::KernelKind::Reduction, {"s"}}});
  LoweredGraph lg = lower(g, plan);
  ASSERT_EQ(lg.kernels.size(), 2u);
  EXPECT_EQ(lg.kernels[0].name, "k1");
  EXPECT_TRUE(has(lg.kernels[0].comment, "group 1")) << lg.kernels[0].comment;
  EXPECT_EQ(lg.kernels[1].name, "k2");
  EXPECT_TRUE(has(lg.kernels[1].comment, "group 2")) << lg.kernels[1].comment;
}

// On a target whose GEMM applies epilogues (CUDA: cuBLASLt), matmul + bias + relu/gelu(tanh)
// is one matmul step and no kernel; the CPU keeps the epilogue kernel; a matmul result that
// something else also reads, or an exact (erf) GELU, is never folded.
TEST(Lower, MatmulEpiloguesFoldOnTargetsThatHaveThem) {
  auto build = [](const char* act, bool extra_use) {
    Graph g("lin");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", F({6, 4})));
    Var w = b.wrap(g.add_input("w", F({4, 5})));
    Var bias = b.wrap(g.add_input("bias", F({5})));
    Var mm = b.op(Op::Matmul, {x, w}, {}, "mm");
    Var y = b.add(mm, bias);
    if (std::string(act) == "relu") y = b.op(Op::Relu, {y}, {}, "act");
    if (std::string(act) == "gelu") y = b.op(Op::Gelu, {y}, {{"approximate", std::string("tanh")}}, "act");
    if (std::string(act) == "erf") y = b.op(Op::Gelu, {y}, {{"approximate", std::string("none")}}, "act");
    std::vector<Value> outs{y};
    if (extra_use) outs.push_back(b.exp(mm));
    g.set_outputs(outs);
    return g;
  };
  auto lowered = [&](const char* act, bool extra_use, const Target& t) {
    Graph g = build(act, extra_use);
    std::vector<std::string> epi;  // every node after the matmul but the extra reader
    for (Node* n : g.nodes())
      if (n->name() != "mm" && !(extra_use && Value{n, 0} == g.outputs()[1])) epi.push_back(n->name());
    std::vector<std::pair<fusion::KernelKind, std::vector<std::string>>> groups{{fusion::KernelKind::Matmul, {"mm"}},
                                                                                  {fusion::KernelKind::Pointwise, epi}};
    if (extra_use) groups.push_back({fusion::KernelKind::Pointwise, {g.outputs()[1].name()}});
    auto plan = plan_of(g, groups);
    if (t.matmul_epilogues) fusion::choose_matmul_epilogues(g, plan);  // what fuse() does for such a target
    LoweredGraph lg = lower(g, plan, t);
    return std::pair{lg, print_schedule(lg)};
  };
  for (const char* act : {"none", "relu", "gelu"}) {
    SCOPED_TRACE(act);
    auto [lg, text] = lowered(act, false, cuda_target());
    EXPECT_EQ(lg.kernels.size(), 0u) << text;
    ASSERT_EQ(lg.steps.size(), 1u);
    const MatmulCall& m = lg.steps[0].matmul;
    EXPECT_EQ(m.epilogue, std::string(act) == "none" ? MatmulEpilogue::Bias
                          : std::string(act) == "relu" ? MatmulEpilogue::BiasRelu
                                                       : MatmulEpilogue::BiasGelu);
    EXPECT_EQ(lg.outputs.at(0), m.out);  // the GEMM writes the graph's output
    EXPECT_TRUE(has(text, "then bias")) << text;
    EXPECT_EQ(lowered(act, false, cpu_target()).first.kernels.size(), 1u);  // OpenBLAS has no epilogue
  }
  EXPECT_EQ(lowered("erf", false, cuda_target()).first.steps.at(0).matmul.epilogue, MatmulEpilogue::None);
  EXPECT_EQ(lowered("relu", true, cuda_target()).first.steps.at(0).matmul.epilogue, MatmulEpilogue::None);
}

// On a GPU target a long softmax row's max and sum of exp come from one sumexp accumulator
// (online softmax): one reduction loop, not two; short rows and the CPU keep two passes.
TEST(Lower, OnlineSoftmaxOnGpuTargets) {
  Graph g("sm");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 33})));
  Var m = b.op(Op::Amax, {x}, {{"dim", IntList{1}}, {"keepdim", true}}, "m");
  Var e = b.op(Op::Exp, {b.sub(x, m)}, {}, "e");
  Var s = b.op(Op::Sum, {e}, {{"dim", IntList{1}}, {"keepdim", true}}, "s");
  g.set_outputs({b.div(e, s)});
  std::vector<std::string> names;
  for (Node* n : g.nodes()) names.push_back(n->name());
  auto plan = plan_of(g, {{fusion::KernelKind::Reduction, names}});
  Target t = cuda_target();
  t.one_pass_min_row = 16;  // these rows are short; the default keeps two passes for them
  std::string gpu = body_of(lower(g, plan, t).kernels.at(0)), cpu = body_of(lower(g, plan).kernels.at(0));
  std::string gpu_short = body_of(lower(g, plan, cuda_target()).kernels.at(0));
  EXPECT_FALSE(has(gpu_short, "sumexp")) << gpu_short;
  EXPECT_TRUE(has(gpu, "acc m_acc: f32 = sumexp.identity")) << gpu;
  EXPECT_TRUE(has(gpu, "reduces %m %s (online)")) << gpu;
  EXPECT_FALSE(has(gpu, "reduces %s\n")) << gpu;
  EXPECT_TRUE(has(gpu, "select(eq(m_acc_max, -inf), nan, m_acc)")) << gpu;  // a row of -inf alone gives NaN
  EXPECT_TRUE(has(cpu, "reduces %m") && has(cpu, "reduces %s")) << cpu;
  EXPECT_FALSE(has(cpu, "sumexp")) << cpu;
}

// On a GPU target a long layer-norm row's mean and sum of squared deviations come from one
// Welford accumulator: one reduction loop instead of two; short rows and the CPU keep two.
TEST(Lower, WelfordStatisticsOnGpuTargets) {
  Graph g("ln");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({5, 64})));
  g.set_outputs({b.op(Op::LayerNorm, {x}, {{"normalized_shape", IntList{64}}, {"eps", 1e-5}}, "y")});
  Graph d = g.clone();
  PassOptions po;
  run_pipeline(d, {"decompose", "canonicalize", "cse", "dce"}, po);
  std::vector<std::string> names;
  for (Node* n : d.nodes()) names.push_back(n->name());
  auto plan = plan_of(d, {{fusion::KernelKind::Reduction, names}});
  Target t = cuda_target();
  t.one_pass_min_row = 16;
  std::string gpu = body_of(lower(d, plan, t).kernels.at(0)), cpu = body_of(lower(d, plan).kernels.at(0));
  EXPECT_FALSE(has(body_of(lower(d, plan, cuda_target()).kernels.at(0)), "welford"));  // short rows: two passes
  EXPECT_TRUE(has(gpu, "welford.identity") && has(gpu, "(welford)")) << gpu;
  EXPECT_EQ(occurrences(gpu, "reduction for r"), 1) << gpu;
  EXPECT_EQ(occurrences(cpu, "reduction for r"), 2) << cpu;
  EXPECT_FALSE(has(cpu, "welford")) << cpu;
}

// A column sum with too few columns to fill a GPU is two kernels there: partials over chunks of
// rows (one thread per column and chunk, walking its rows in order) and an ordered combine.
TEST(Lower, SplitColumnReductionOnGpuTargets) {
  Graph g("colsum");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({4096, 40})));
  g.set_outputs({b.op(Op::Sum, {x}, {{"dim", IntList{0}}}, "s")});
  auto plan = plan_of(g, {{fusion::KernelKind::Reduction, {"s"}}});
  LoweredGraph gpu = lower(g, plan, cuda_target());
  ASSERT_EQ(gpu.kernels.size(), 2u) << print_schedule(gpu);
  std::string partials = body_of(gpu.kernels[0]), combine = body_of(gpu.kernels[1]);
  EXPECT_TRUE(has(partials, "ordered for r in 0..16 {  # reduces a chunk of %s")) << partials;
  EXPECT_TRUE(has(partials, "parallel for q in 0..10240 {")) << partials;
  EXPECT_TRUE(has(combine, "ordered for j in 0..256 {  # combines the partials in chunk order")) << combine;
  EXPECT_EQ(lower(g, plan).kernels.size(), 1u);  // the CPU's column tiles
}

// A row group over so few long rows that even a cluster of blocks a row would leave most SMs
// idle (a mean loss's count of 65536 targets and its gradient scaled by it) splits on a GPU
// even where an output over the full space needs the reduced value: partials, a combine that
// also stores the combined value, and a third kernel over the full space reading it. More rows
// (a cluster each fills the machine) stay one kernel, as do column groups with such outputs.
TEST(Lower, FewLongRowsSplitWithTheirOutputsOverTheFullSpaceInAThirdKernel) {
  auto lowered = [](int64_t rows, int64_t cols) {
    Graph g("scaled");
    Builder b(g);
    Var x = b.wrap(g.add_input("x", F({rows, cols})));
    Var s = b.op(Op::Sum, {x}, {{"dim", IntList{-1}}, {"keepdim", true}}, "s");
    g.set_outputs({s, b.op(Op::Div, {x, s}, {}, "y")});
    auto plan = plan_of(g, {{fusion::KernelKind::Reduction, {"s", "y"}}});
    return lower(g, plan, cuda_target());
  };
  LoweredGraph one = lowered(1, 65536);
  ASSERT_EQ(one.kernels.size(), 3u) << print_schedule(one);
  EXPECT_TRUE(has(one.kernels[0].comment, "(partials over 32 chunks)")) << one.kernels[0].comment;
  EXPECT_TRUE(has(print_kernel(one.kernels[1]), "output %s combined")) << print_kernel(one.kernels[1]);
  EXPECT_TRUE(has(one.kernels[2].comment, "the outputs over the full space, from the combined reductions")) << one.kernels[2].comment;
  EXPECT_TRUE(has(print_kernel(one.kernels[2]), "input %s combined")) << print_kernel(one.kernels[2]);
  EXPECT_EQ(lowered(64, 65536).kernels.size(), 1u) << "64 rows: a cluster a row fills the machine";
  EXPECT_EQ(lowered(1, 4096).kernels.size(), 1u) << "a short row: one block holds it";
}

// A column tile's accumulators live in a temp buffer that three loops of the kernel touch
// (start, accumulate, finish): each column must stay with one thread in all three, so none of
// them is vectorized (a 16-byte start loop would hand columns to other threads than the
// accumulating loop's: a race with no barrier, seen on an H100 as wrong sums).
TEST(Lower, GpuColumnTilesKeepOneThreadPerColumn) {
  Graph g("col");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({5, 1000})));
  g.set_outputs({b.op(Op::Sum, {x}, {{"dim", IntList{0}}}, "s"), b.op(Op::Amax, {x}, {{"dim", IntList{0}}}, "m")});
  auto plan = plan_of(g, {{fusion::KernelKind::Reduction, {"s", "m"}}});
  LoweredGraph lg = lower(g, plan, cuda_target());
  schedule(lg, cuda_target());
  ASSERT_EQ(lg.kernels.size(), 1u);
  std::string k = emit_cuda_kernel(lg.kernels[0]);
  EXPECT_FALSE(has(k, "_vec")) << k;
  EXPECT_EQ(occurrences(k, "for (int col = threadIdx.x; col < 40; col += blockDim.x) {"), 3) << k;
}

TEST(Lower, OpsWithoutLoweringAreErrorsNamingTheNode) {
  Graph g("bad");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({3, 4})));
  Var sm = b.op(Op::Softmax, {x}, {{"dim", int64_t(1)}}, "sm");
  g.set_outputs({b.op(Op::Exp, {sm}, {}, "e")});
  auto plan = plan_of(g, {{fusion::KernelKind::Pointwise, {"sm", "e"}}});
  std::string msg = kiln::testing::error_of([&] { lower(g, plan); });
  EXPECT_TRUE(has(msg, "%sm") && has(msg, "softmax")) << msg;
}

// ---- golden snapshots of the emitted C++

void expect_golden(const std::string& name, const std::string& text) {
  std::string path = kiln::testing::data_dir() + "/codegen/golden/" + name;
  if (const char* u = std::getenv("KILN_UPDATE_GOLDEN"); u && std::string(u) == "1") {
    std::ofstream(path) << text;
    return;
  }
  std::ifstream f(path);
  ASSERT_TRUE(f) << "missing golden file " << path << " (run with KILN_UPDATE_GOLDEN=1 to write it)";
  std::string want((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, want) << "emitted C++ changed; if intended, rerun with KILN_UPDATE_GOLDEN=1";
}

TEST(EmitGolden, PointwiseKernel) {
  Graph g("pw");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", kiln::testing::T(DType::F16, {5, 1023})));
  Var y = b.wrap(g.add_input("y", F({1023})));
  Var z = b.op(Op::Gelu, {b.op(Op::Mul, {x, y}, {}, "xy")}, {{"approximate", std::string("tanh")}}, "z");
  Var c = b.op(Op::Gt, {z, b.scalar(0.5, DType::F32)}, {}, "c");
  g.set_outputs({z, c});
  auto plan = plan_of(g, {{fusion::KernelKind::Pointwise, {"xy", "z", g.outputs()[1].node->input(1).name(), "c"}}});
  LoweredGraph lg = lower(g, plan);
  schedule(lg, cpu_target());
  expect_golden("pointwise.cpp", emit_cpp_kernel(lg.kernels.at(0)));
}

TEST(EmitGolden, ReductionKernel) {
  Graph g("rd");
  Builder b(g);
  Var x = b.wrap(g.add_input("x", F({7, 1023})));
  Var m = b.op(Op::Amax, {x}, {{"dim", IntList{1}}}, "m");
  Var a = b.op(Op::Argmax, {x}, {{"dim", int64_t(1)}}, "a");
  Var s = b.op(Op::Sum, {b.op(Op::Exp, {b.op(Op::Sub, {x, b.unsqueeze(m, 1)}, {}, "d")}, {}, "e")}, {{"dim", IntList{1}}}, "s");
  g.set_outputs({s, a});
  auto plan = plan_of(g, {{fusion::KernelKind::Reduction, {"m", "a", g.find("d").node->input(1).name(), "d", "e", "s"}}});
  LoweredGraph lg = lower(g, plan);
  schedule(lg, cpu_target());
  expect_golden("reduction.cpp", emit_cpp_kernel(lg.kernels.at(0)));
}

// A norm's backward on a GPU (passes/fusion/column_partials.h, codegen/lower_column_partials.cpp):
// one kernel walks chunks of rows (a block each), holding each row of x and dy in registers
// (the next row's loads issued ahead) and the chunk's column partials in registers from row to
// row; a second kernel sums the partials in chunk order. Rows with no divisor near the SM count
// (a prime) run as the two groups' own kernels.
TEST(Lower, NormBackwardRunsAsChunksOfRowsWithColumnPartials) {
  auto lowered = [](int64_t rows) {
    Graph g = parse_graph(fmt::format(R"(
graph rms_backward(%x: f32[{0},768], %w: f32[768], %dy: f32[{0},768]) {{
  %sq = mul(%x, %x) : f32[{0},768]
  %ss = sum(%sq, dim=[1], keepdim=true) : f32[{0},1]
  %n = full(size=[], fill_value=768.0) : f32[]
  %ms = div(%ss, %n) : f32[{0},1]
  %r = rsqrt(%ms) : f32[{0},1]
  %xn = mul(%x, %r) : f32[{0},768]
  %g = mul(%dy, %xn) : f32[{0},768]
  %dw = sum(%g, dim=[0]) : f32[768]
  %dyw = mul(%dy, %w) : f32[{0},768]
  %dx = mul(%dyw, %r) : f32[{0},768]
  return (%dx, %dw)
}})", rows));
    Target t = cuda_target("sm_90", 132);
    fusion::FusionOptions fo;
    fo.column_partials_in_rows = t.column_partials_in_rows;
    fo.recompute_from_statistics = t.recompute_from_statistics;
    fusion::FusionPlan plan = fusion::fuse(g, fo);
    LoweredGraph lg = lower(g, plan, t);
    schedule(lg, t);
    return lg;
  };
  LoweredGraph lg = lowered(512);
  ASSERT_EQ(lg.kernels.size(), 2u) << print_schedule(lg);
  const Kernel& chunks = lg.kernels[0];
  std::string text = print_kernel(chunks);
  EXPECT_EQ(chunks.schedule.mapping, "block per chunk of rows") << text;
  EXPECT_EQ(chunks.launch.grid, 128) << "512 rows in 128 chunks of 4 (one an SM)";
  // x (read by the statistics and the row's values), dy (read once a row, loaded ahead) and w
  // (read by every row of the chunk: once a chunk).
  EXPECT_EQ(chunks.schedule.held, (std::vector<std::string>{"b2", "b3", "b4"})) << text;
  ASSERT_EQ(chunks.schedule.carried.size(), 1u) << text;
  EXPECT_TRUE(has(text, "parallel for q in 0..128 @gpu_blocks")) << text;
  EXPECT_TRUE(has(text, "ordered for j in 0..4 @serial hold(")) << text;
  EXPECT_TRUE(has(text, "the next iteration's loaded ahead")) << text;
  EXPECT_TRUE(has(text, "carry(" + chunks.schedule.carried[0])) << text;
  EXPECT_TRUE(has(print_schedule(chunks.schedule, chunks.launch), "carried in registers from row to row")) << text;
  std::string cuda = emit_cuda_kernel(chunks);
  EXPECT_TRUE(has(cuda, "_next[h] = ((const kiln_vec<float, 4>*)")) << cuda;
  EXPECT_TRUE(has(cuda, "stored back from registers")) << cuda;
  EXPECT_TRUE(has(lg.kernels[1].comment, "(combines 128 partials)")) << lg.kernels[1].comment;

  LoweredGraph prime = lowered(1009);
  EXPECT_EQ(prime.kernels.size(), 2u) << "the row statistics, then the column sums";
  for (const Kernel& k : prime.kernels) EXPECT_NE(k.schedule.mapping, "block per chunk of rows") << print_kernel(k);
}

}  // namespace
}  // namespace kiln::codegen

namespace kiln::codegen {
namespace {

// A kernel whose every result is 16-bit computes f32 exp and division approximately on CUDA
// (Target::approx_math_for_16bit_results); one with an f32 result, or the CPU, keeps the
// accurate forms.
TEST(Lower, SixteenBitResultsTakeApproximateExpAndDivisionOnCuda) {
  auto kernel_of = [](const std::string& dt, const Target& t) {
    Graph g = parse_graph(fmt::format(R"(
graph softmax(%x: {0}[64,1024]) {{
  %m = amax(%x, dim=[1], keepdim=true) : {0}[64,1]
  %d = sub(%x, %m) : {0}[64,1024]
  %e = exp(%d) : {0}[64,1024]
  %s = sum(%e, dim=[1], keepdim=true) : {0}[64,1]
  %y = div(%e, %s) : {0}[64,1024]
  %z = sigmoid(%y) : {0}[64,1024]
  %q = div(%z, %e) : {0}[64,1024]
  return (%q)
}})", dt));
    LoweredGraph lg = lower(g, fusion::fuse(g, {}), t);
    schedule(lg, t);
    return lg.kernels.at(0);
  };
  Kernel bf16 = kernel_of("bf16", cuda_target());
  EXPECT_TRUE(bf16.schedule.approx_f32_math);
  EXPECT_TRUE(has(print_schedule(bf16.schedule, bf16.launch), "approximate f32 exp and division (every result 16-bit)"));
  std::string cu = emit_cuda_kernel(bf16);
  EXPECT_TRUE(has(cu, "kiln_exp_approx(")) << cu;
  // The division by the row's sum is a reciprocal taken once a row (every dtype), the one by
  // each element's exp approximate.
  EXPECT_TRUE(has(cu, "kiln_rcp_scaled(")) << cu;
  EXPECT_TRUE(has(cu, "kiln_div_approx(")) << cu;
  EXPECT_FALSE(has(cu, "kiln_exp(")) << cu;
  Kernel f32 = kernel_of("f32", cuda_target());
  EXPECT_FALSE(f32.schedule.approx_f32_math);
  EXPECT_FALSE(has(emit_cuda_kernel(f32), "_approx(")) << emit_cuda_kernel(f32);
  Kernel cpu = kernel_of("bf16", cpu_target());
  EXPECT_FALSE(cpu.schedule.approx_f32_math);
  EXPECT_FALSE(has(emit_cpp_kernel(cpu), "_approx("));
}

}  // namespace
}  // namespace kiln::codegen
