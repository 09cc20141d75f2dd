// The pass manager: pipelines by name, verification after each pass, dumps, the report,
// fixpoint rounds.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass_manager.h"
#include "passes/pass_registry.h"
#include "passes/pipeline.h"
#include "tests/support/support.h"

namespace kiln {
namespace {

// neg(neg(x)) plus a dead exp: canonicalize leaves the inner neg dead for dce.
const char* kSample = R"(graph g(%x: f32[4]) {
  %dead = exp(%x) : f32[4]
  %a = neg(%x) : f32[4]
  %b = neg(%a) : f32[4]
  %y = relu(%b) : f32[4]
  return (%y)
}
)";

PassOptions fixpoint(int max_rounds = 10) {
  PassOptions o;
  o.fixpoint = true;
  o.max_rounds = max_rounds;
  return o;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no kiln::Error)";
}

TEST(Pipeline, ParsesNamesAndDefault) {
  EXPECT_EQ(parse_pipeline(" dce, cse ,canonicalize"), (std::vector<std::string>{"dce", "cse", "canonicalize"}));
  EXPECT_EQ(parse_pipeline("default"), default_pipeline());
  EXPECT_TRUE(parse_pipeline("").empty());
  for (const std::string& name : default_pipeline()) EXPECT_NE(find_pass(name), nullptr) << name;
  EXPECT_NE(error_of([] { parse_pipeline("dce,,cse"); }).find("empty pass name"), std::string::npos);
}

TEST(Pipeline, UnknownPassListsKnownOnes) {
  std::string msg = error_of([] { parse_pipeline("dce,fuse_everything"); });
  EXPECT_NE(msg.find("unknown pass 'fuse_everything'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dce, cse, constant_fold, canonicalize"), std::string::npos) << msg;

  // run_pipeline checks every name before running any pass.
  Graph g = parse_graph(kSample);
  std::string before = print_graph(g);
  msg = error_of([&] { run_pipeline(g, {"dce", "nope"}); });
  EXPECT_NE(msg.find("unknown pass 'nope'"), std::string::npos) << msg;
  EXPECT_EQ(print_graph(g), before);
}

TEST(PassManager, VerificationFailureNamesThePass) {
  // A deliberately broken pass: points exp at an input of another shape and leaves the
  // node's recorded type stale.
  register_pass("test_break_types", [](Graph& g) {
    for (Node* n : g.nodes())
      if (n->op() == Op::Exp) n->set_input(0, g.find("w"));
    return true;
  });
  Graph g = parse_graph("graph g(%x: f32[4], %w: f32[2]) {\n  %e = exp(%x) : f32[4]\n  return (%e)\n}\n");
  std::string msg = error_of([&] { run_pipeline(g, {"dce", "test_break_types", "cse"}); });
  EXPECT_NE(msg.find("after pass 'test_break_types'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("%e"), std::string::npos) << msg;
}

TEST(PassManager, ErrorInsideAPassNamesIt) {
  register_pass("test_throws", [](Graph&) -> bool { fail("something the pass could not handle"); });
  Graph g = parse_graph(kSample);
  std::string msg = error_of([&] { run_pipeline(g, {"test_throws"}); });
  EXPECT_NE(msg.find("in pass 'test_throws': something the pass could not handle"), std::string::npos) << msg;
}

TEST(PassManager, InputIsVerifiedFirst) {
  register_pass("test_noop", [](Graph&) { return false; });
  Graph g = parse_graph(kSample);
  g.find("y").node->set_input(0, g.find("dead"));  // fine: same type; the graph stays valid
  EXPECT_NO_THROW(run_pipeline(g, {"test_noop"}));
  g.find("a").node->set_input(0, g.find("b"));  // a cycle: %b is used before it is defined
  std::string msg = error_of([&] { run_pipeline(g, {"test_noop"}); });
  EXPECT_NE(msg.find("pipeline input"), std::string::npos) << msg;
}

TEST(PassManager, RegisteringATakenNameFails) {
  EXPECT_NE(error_of([] { register_pass("dce", [](Graph&) { return false; }); }).find("exists already"),
            std::string::npos);
}

TEST(PassManager, ReportRecordsEachPass) {
  Graph g = parse_graph(kSample);
  PassReport r = run_pipeline(g, parse_pipeline("canonicalize,cse,dce"));
  ASSERT_EQ(r.runs.size(), 3u);
  EXPECT_EQ(r.runs[0].name, "canonicalize");
  EXPECT_TRUE(r.runs[0].changed);
  EXPECT_EQ(r.runs[0].nodes_before, 4u);
  EXPECT_EQ(r.runs[0].nodes_after, 3u);  // the outer neg goes; the inner one is dead now
  EXPECT_FALSE(r.runs[1].changed);
  EXPECT_TRUE(r.runs[2].changed);
  EXPECT_EQ(r.runs[2].nodes_after, 1u);
  for (const PassRun& run : r.runs) EXPECT_GE(run.ms, 0.0);
  EXPECT_TRUE(r.changed());
  EXPECT_EQ(r.unchanged(), std::vector<std::string>{"cse"});
  EXPECT_EQ(r.rounds, 1);

  std::string table = format_report(r);
  EXPECT_NE(table.find("canonicalize"), std::string::npos) << table;
  EXPECT_NE(table.find("total"), std::string::npos) << table;
  EXPECT_NE(table.find("changed nothing: cse"), std::string::npos) << table;
  EXPECT_EQ(table.find("rounds:"), std::string::npos) << table;  // only with fixpoint
}

TEST(PassManager, DumpsEveryStageInOrder) {
  auto dir = std::filesystem::temp_directory_path() / ("kiln_pass_dump_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  Graph g = parse_graph(kSample);
  run_pipeline(g, parse_pipeline("canonicalize,dce"), PassOptions{.dump_dir = dir.string()});

  std::vector<std::string> files;
  for (auto& e : std::filesystem::directory_iterator(dir)) files.push_back(e.path().filename().string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"00_input.kir", "01_canonicalize.kir", "02_dce.kir"}));
  EXPECT_EQ(testing::read_text((dir / "00_input.kir").string()), kSample);
  EXPECT_EQ(testing::read_text((dir / "02_dce.kir").string()), print_graph(g));
  // Each dump is a valid .kir file.
  Graph mid = parse_graph(testing::read_text((dir / "01_canonicalize.kir").string()));
  EXPECT_EQ(mid.num_nodes(), 3u);
  std::filesystem::remove_all(dir);
}

TEST(PassManager, FixpointRunsRoundsUntilNothingChanges) {
  // dce before canonicalize: the neg that canonicalize leaves dead needs a second round.
  Graph once = parse_graph(kSample);
  PassReport r1 = run_pipeline(once, {"dce", "canonicalize"});
  EXPECT_EQ(once.num_nodes(), 2u);  // the dead inner neg is still there

  Graph g = parse_graph(kSample);
  PassReport r = run_pipeline(g, {"dce", "canonicalize"}, fixpoint());
  EXPECT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(r.rounds, 3);  // round 2 removes the neg, round 3 changes nothing
  EXPECT_TRUE(r.reached_fixpoint);
  ASSERT_EQ(r.runs.size(), 6u);
  EXPECT_EQ(r.runs[2].round, 1);
  EXPECT_TRUE(r.runs[2].changed);
  EXPECT_FALSE(r.runs[4].changed || r.runs[5].changed);
  EXPECT_NE(format_report(r).find("rounds: 3 (fixpoint reached)"), std::string::npos) << format_report(r);
}

TEST(PassManager, FixpointStopsAtTheCap) {
  // A pass that always claims a change never reaches a fixpoint.
  register_pass("test_always_changes", [](Graph&) { return true; });
  Graph g = parse_graph(kSample);
  PassReport r = run_pipeline(g, {"test_always_changes"}, fixpoint(4));
  EXPECT_EQ(r.rounds, 4);
  EXPECT_FALSE(r.reached_fixpoint);
  EXPECT_NE(format_report(r).find("stopped at max_rounds"), std::string::npos);
  EXPECT_NE(error_of([&] { run_pipeline(g, {"dce"}, fixpoint(0)); })
                .find("max_rounds"),
            std::string::npos);
}

TEST(PassManager, DefaultPipelineSimplifies) {
  Graph g = parse_graph(R"(graph g(%x: f32[4]) {
  %o = ones(size=[4]) : f32[4]
  %two = add(%o, %o) : f32[4]
  %half = div(%o, %two) : f32[4]
  %h2 = mul(%half, %two) : f32[4]
  %a = mul(%x, %h2) : f32[4]
  %b = exp(%a) : f32[4]
  %c = exp(%x) : f32[4]
  %d = add(%b, %c) : f32[4]
  return (%d)
}
)");
  run_pipeline(g, default_pipeline());
  // (1 / (1+1)) * (1+1) folds to ones, x*1 is x, and then the two exps are one.
  EXPECT_EQ(print_graph(g), R"(graph g(%x: f32[4]) {
  %b = exp(%x) : f32[4]
  %d = add(%b, %b) : f32[4]
  return (%d)
}
)");
}

}  // namespace
}  // namespace kiln
