#include "passes/pass_manager.h"

#include <fmt/ranges.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "ir/error.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/pass_registry.h"

namespace kiln {

bool PassReport::changed() const {
  for (const PassRun& r : runs)
    if (r.changed) return true;
  return false;
}

std::vector<std::string> PassReport::unchanged() const {
  std::vector<std::string> out;
  for (const PassRun& r : runs) {
    bool ever_changed = false, listed = false;
    for (const PassRun& other : runs) ever_changed |= other.name == r.name && other.changed;
    for (const std::string& n : out) listed |= n == r.name;
    if (!ever_changed && !listed) out.push_back(r.name);
  }
  return out;
}

double PassReport::total_ms() const {
  double t = 0;
  for (const PassRun& r : runs) t += r.ms;
  return t;
}

namespace {

// Writes 00_input.kir, 01_cse.kir, ... into the dump folder, if there is one.
class Dumper {
 public:
  explicit Dumper(const std::string& dir) : dir_(dir) {
    if (dir_.empty()) return;
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) fail("cannot create the dump folder '{}': {}", dir_, ec.message());
  }

  void dump(const Graph& g, const std::string& stage) {
    if (dir_.empty()) return;
    auto path = std::filesystem::path(dir_) / fmt::format("{:02}_{}.kir", index_++, stage);
    std::ofstream out(path, std::ios::binary);
    out << print_graph(g);
    if (!out) fail("cannot write '{}'", path.string());
  }

 private:
  std::string dir_;
  int index_ = 0;
};

PassRun run_one(Graph& g, const PassInfo& pass, int round, bool verify, Dumper& dumper) {
  PassRun run{pass.name, round};
  run.nodes_before = g.num_nodes();
  auto start = std::chrono::steady_clock::now();
  try {
    run.changed = pass.run(g);
  } catch (const Error& e) {
    throw Error(fmt::format("in pass '{}': {}", pass.name, e.what()));
  }
  run.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  run.nodes_after = g.num_nodes();
  // Dump before verifying: the broken graph is what one wants to look at.
  dumper.dump(g, pass.name);
  if (verify) verify_or_throw(g, fmt::format("after pass '{}'", pass.name));
  return run;
}

}  // namespace

PassReport run_pipeline(Graph& g, const std::vector<std::string>& pipeline, const PassOptions& options) {
  std::vector<const PassInfo*> passes;
  for (const std::string& name : pipeline) passes.push_back(&get_pass(name));
  KILN_CHECK(!options.fixpoint || options.max_rounds > 0, "max_rounds must be positive, got {}", options.max_rounds);

  Dumper dumper(options.dump_dir);
  dumper.dump(g, "input");
  if (options.verify) verify_or_throw(g, "pipeline input");

  PassReport report;
  report.fixpoint = options.fixpoint;
  int max_rounds = options.fixpoint ? options.max_rounds : 1;
  bool round_changed = true;
  for (int round = 0; round < max_rounds && round_changed; ++round) {
    round_changed = false;
    for (const PassInfo* p : passes) {
      report.runs.push_back(run_one(g, *p, round, options.verify, dumper));
      round_changed |= report.runs.back().changed;
    }
    report.rounds = round + 1;
  }
  report.reached_fixpoint = !round_changed;
  return report;
}

std::string format_report(const PassReport& report) {
  std::string out = fmt::format("{:<5} {:<20} {:<8} {:>10} {:>8} {:>8}\n", "round", "pass", "changed", "ms", "nodes", "after");
  for (const PassRun& r : report.runs)
    out += fmt::format("{:<5} {:<20} {:<8} {:>10.3f} {:>8} {:>8}\n", r.round, r.name, r.changed ? "yes" : "no", r.ms,
                       r.nodes_before, r.nodes_after);
  out += fmt::format("{:<5} {:<20} {:<8} {:>10.3f}\n", "", "total", report.changed() ? "yes" : "no", report.total_ms());
  std::vector<std::string> idle = report.unchanged();
  out += fmt::format("changed nothing: {}\n", idle.empty() ? "(none)" : fmt::format("{}", fmt::join(idle, ", ")));
  if (report.fixpoint)
    out += fmt::format("rounds: {} ({})\n", report.rounds,
                       report.reached_fixpoint ? "fixpoint reached" : "stopped at max_rounds before a fixpoint");
  return out;
}

}  // namespace kiln
