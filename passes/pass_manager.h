#pragma once
// The pass manager: runs a pipeline of named passes on a graph, verifying the graph after
// each pass (a broken invariant is reported with the pass that broke it), timing each,
// dumping the IR after each when asked, and recording which passes changed nothing.
//
//   PassReport r = run_pipeline(g, parse_pipeline("canonicalize,cse,dce"), {.dump_dir = "dump"});
//   std::cout << format_report(r);
#include <string>
#include <vector>

#include "ir/graph.h"

namespace kiln {

struct PassOptions {
  // When set, the graph is written there before the first pass and after each pass, as
  // 00_input.kir, 01_<pass>.kir, ... (numbering goes on across fixpoint rounds).
  std::string dump_dir;
  // Verify the input and the graph after every pass (verify_or_throw).
  bool verify = true;
  // Run the whole list again until a round changes nothing, at most max_rounds rounds.
  bool fixpoint = false;
  int max_rounds = 10;
};

struct PassRun {
  std::string name;
  int round = 0;  // 0-based; > 0 only with fixpoint
  bool changed = false;
  double ms = 0;
  size_t nodes_before = 0, nodes_after = 0;
};

struct PassReport {
  std::vector<PassRun> runs;  // in the order they ran
  int rounds = 0;
  bool fixpoint = false;  // whether the options asked for a fixpoint
  // Whether the last round changed nothing. Without `fixpoint`, this is just !changed().
  bool reached_fixpoint = false;

  bool changed() const;  // whether any pass changed the graph
  // The passes that changed nothing in any of their runs, each once, in pipeline order.
  std::vector<std::string> unchanged() const;
  double total_ms() const;
};

// Runs `pipeline` (pass names, see parse_pipeline) on `g`. Unknown names are a kiln::Error
// before anything runs; a pass that leaves an invalid graph is a kiln::Error naming it
// ("after pass 'cse': ..."), as is a pass that throws one.
PassReport run_pipeline(Graph& g, const std::vector<std::string>& pipeline, const PassOptions& options = {});

// The report as a table: one row per run (pass, changed, ms, nodes before/after), a total,
// and the passes that changed nothing.
std::string format_report(const PassReport& report);

}  // namespace kiln
