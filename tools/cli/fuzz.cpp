// kiln fuzz --graphs N --seed S --device cpu|cuda [--jobs J] [--batch B] [--save DIR]
//           [--no-joint] [--configs fused,unfused,unoptimized] [--max-nodes N]
// kiln fuzz --replay FILE.kir... --device cpu|cuda
// Differential fuzzing of the compilers (tools/fuzz/): random graphs, valid by construction,
// compiled under each config and as joint graphs, compared with the reference interpreter.
// Graphs are checked B at a time as one merged graph (one compile for many); a batch that fails
// is checked graph by graph, and each failing graph is shrunk and saved as a .kir reproducer.
// With --jobs J, J processes share the batches, so a crash in one is counted, not fatal.
// Prints counts by category; exit code 1 if any graph failed.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "ir/error.h"
#include "tools/cli/commands.h"
#include "tools/cli/common.h"
#include "tools/cli/device.h"
#include "tools/cli/forked_jobs.h"
#include "tools/fuzz/differential.h"
#include "tools/fuzz/random_graph.h"
#include "tools/fuzz/shrink.h"

namespace kiln::cli {

namespace {

namespace fs = std::filesystem;

struct FuzzOptions {
  int64_t graphs = 200;
  uint64_t seed = 1;
  std::string device = "cpu";
  int jobs = 1;
  int batch = 16;
  int max_nodes = 25;
  std::string save = "fuzz-failures";
  bool no_joint = false;
  std::string configs = "fused,unfused,unoptimized";
  std::vector<std::string> replay;
  int max_shrinks = 20;
  int batch_timeout = 300;
  int64_t show = -1;        // print graph N of the run as a reproducer instead of checking
  // seconds a batch may take before its job is stopped (a hung kernel)
};

// One graph's outcome, a line in a job's results file: verdict, config, seed, joint state, detail.
struct Outcome {
  std::string verdict = "pass";
  std::string config;
  uint64_t seed = 0;
  std::string joint = "checked";  // checked | skipped | -
  std::string detail;
};

fuzz::CheckOptions check_options(const FuzzOptions& o) {
  fuzz::CheckOptions c;
  c.device = parse_device(o.device);
  c.joint = !o.no_joint;
  c.configs.clear();
  std::map<std::string, fuzz::CompileConfig> all;
  for (const auto& k : fuzz::default_configs()) all[k.name] = k;
  std::stringstream list(o.configs);
  for (std::string name; std::getline(list, name, ',');) {
    auto it = all.find(name);
    if (it == all.end()) fail("--configs: unknown config '{}' (fused, unfused, unoptimized)", name);
    c.configs.push_back(it->second);
  }
  return c;
}

// Checks one case alone; on a failure, shrinks it and saves the reproducer.
Outcome check_one(const fuzz::FuzzCase& c, const fuzz::CheckOptions& co, const FuzzOptions& o, int* shrinks_left) {
  Outcome out;
  out.seed = c.seed;
  fuzz::CaseReport r = fuzz::check_case(c, co);
  if (r.reference_failed) {
    out.verdict = "reference rejected";
    return out;
  }
  out.joint = r.joint_checked ? "checked" : "skipped";
  if (r.findings.empty()) return out;
  const fuzz::Finding& f = r.findings.front();
  out.verdict = std::string(fuzz::verdict_name(f.verdict));
  out.config = f.config;
  out.detail = f.detail.substr(0, f.detail.find('\n'));
  if (*shrinks_left <= 0) return out;
  --*shrinks_left;
  // Shrink while the same kind of failure shows under the same config; each try checks that
  // config alone (a joint failure: the joint graph under the first config).
  fuzz::CheckOptions only = co;
  const bool joint = f.config.starts_with("joint/");
  const std::string config = joint ? f.config.substr(6) : f.config;
  only.configs.clear();
  for (const fuzz::CompileConfig& k : co.configs)
    if (k.name == config) only.configs.push_back(k);
  only.joint = joint;
  fuzz::FuzzCase small = fuzz::shrink(c, [&](const fuzz::FuzzCase& cand) {
    fuzz::CaseReport cr = fuzz::check_case(cand, only);
    for (const fuzz::Finding& x : cr.findings)
      if (x.verdict == f.verdict && x.config == f.config) return true;
    return false;
  });
  fuzz::CaseReport again = fuzz::check_case(small, co);
  fuzz::Finding shown = again.findings.empty() ? f : again.findings.front();
  fs::create_directories(o.save);
  std::string stem = fmt::format("fuzz_{}_{}_{}", o.device, c.seed, out.verdict);
  for (char& ch : stem)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  std::string file = (fs::path(o.save) / (stem + ".kir")).string();
  write_text(file, fuzz::reproducer_text(small, shown, o.device));
  out.detail += fmt::format(" [shrunk to {} nodes: {}]", small.graph.num_nodes(), file);
  return out;
}

// The batches of job `job` (of `jobs`), each line of results appended to `results`.
void run_job(const FuzzOptions& o, int job, std::ostream& results) {
  const fuzz::CheckOptions co = check_options(o);
  fuzz::GenOptions gen;
  gen.max_nodes = o.max_nodes;
  int shrinks_left = std::max(1, o.max_shrinks / std::max(1, o.jobs));
  const int64_t batches = (o.graphs + o.batch - 1) / o.batch;
  const int64_t mine = batches > job ? (batches - job + o.jobs - 1) / o.jobs : 0;
  // A progress line at most every 10 s, flushed: a long run (under ctest, through a pipe) shows
  // how far it got if it is stopped.
  const auto start = std::chrono::steady_clock::now();
  auto last_progress = start;
  int64_t done = 0;
  for (int64_t b = job; b < batches; b += o.jobs, ++done) {
    const auto now = std::chrono::steady_clock::now();
    if (done > 0 && now - last_progress >= std::chrono::seconds(10)) {
      fmt::print("kiln fuzz: job {}: {} of {} batches of {} graphs in {:.0f} s\n", job, done, mine, o.batch,
                 std::chrono::duration<double>(now - start).count());
      std::fflush(stdout);
      last_progress = now;
    }
    // A kernel that never ends is a finding too: the batch's job is stopped (SIGALRM) and the
    // parent names the batch from this marker.
    results << "#batch\t" << b << '\n';
    results.flush();
    alarm(static_cast<unsigned>(o.batch_timeout));
    std::vector<fuzz::FuzzCase> cases;
    for (int64_t i = b * o.batch; i < std::min(o.graphs, (b + 1) * o.batch); ++i)
      cases.push_back(fuzz::random_graph(o.seed * 1000003 + static_cast<uint64_t>(i), gen));
    fuzz::CaseReport merged = fuzz::check_case(fuzz::merge_cases(cases), co);
    std::vector<Outcome> outcomes;
    if (merged.passed()) {
      // The merged joint graph covers its cases with floating inputs and outputs; each case of
      // the batch is counted with it (an overcount for a case with no floating path).
      for (const auto& c : cases) {
        Outcome x;
        x.seed = c.seed;
        x.joint = merged.joint_checked ? "checked" : "skipped";
        outcomes.push_back(x);
      }
    } else {
      for (const auto& c : cases) outcomes.push_back(check_one(c, co, o, &shrinks_left));
    }
    for (const Outcome& x : outcomes)
      results << x.verdict << '\t' << x.config << '\t' << x.seed << '\t' << x.joint << '\t' << escape_line(x.detail) << '\n';
    results.flush();
  }
}

std::vector<Outcome> read_results(const std::string& path, int64_t* last_batch = nullptr) {
  std::vector<Outcome> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#batch\t")) {
      if (last_batch) *last_batch = std::stoll(line.substr(7));
      continue;
    }
    std::stringstream ss(line);
    Outcome x;
    std::string seed;
    std::getline(ss, x.verdict, '\t');
    std::getline(ss, x.config, '\t');
    std::getline(ss, seed, '\t');
    std::getline(ss, x.joint, '\t');
    std::getline(ss, x.detail);
    x.seed = std::stoull(seed);
    out.push_back(x);
  }
  return out;
}

int run_fuzz(const FuzzOptions& o) {
  if (o.graphs < 1 || o.batch < 1 || o.jobs < 1) fail("--graphs, --batch and --jobs must be at least 1");
  check_options(o);  // bad options fail here, before any job starts
  auto t0 = std::chrono::steady_clock::now();
  const fs::path dir = fs::temp_directory_path() / fmt::format("kiln-fuzz-{}", getpid());
  fs::create_directories(dir);
  std::vector<Outcome> all;
  int crashed_jobs = 0;
  std::vector<bool> crashed(static_cast<size_t>(o.jobs), false);
  const std::vector<std::string> endings = run_forked_jobs("kiln fuzz", o.jobs, [&](int j) {
    std::ofstream f(dir / fmt::format("job{}.tsv", j));
    run_job(o, j, f);
  });
  for (size_t j = 0; j < endings.size(); ++j) {
    if (endings[j].empty()) continue;
    ++crashed_jobs;
    crashed[j] = true;
    fmt::print(stderr, "kiln fuzz: job {} ended abnormally ({}); its graphs after the last one recorded are not counted\n", j, endings[j]);
  }
  std::vector<std::string> hung;
  for (int j = 0; j < o.jobs; ++j) {
    int64_t last = -1;
    auto part = read_results((dir / fmt::format("job{}.tsv", j)).string(), &last);
    all.insert(all.end(), part.begin(), part.end());
    // A job that ended abnormally stopped inside its last batch, whose graphs went unrecorded.
    if (crashed[static_cast<size_t>(j)] && last >= 0)
      hung.push_back(fmt::format("batch {} of job {} (graphs {} to {}, the first's seed {})", last, j, last * o.batch,
                                 std::min<int64_t>(o.graphs, (last + 1) * o.batch) - 1,
                                 o.seed * 1000003 + static_cast<uint64_t>(last * o.batch)));
  }
  fs::remove_all(dir);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::map<std::string, int64_t> counts;
  int64_t joint_checked = 0, failures = 0;
  for (const Outcome& x : all) {
    ++counts[x.verdict];
    joint_checked += x.joint == "checked";
    failures += x.verdict != "pass" && x.verdict != "reference rejected";
  }
  fmt::print("kiln fuzz: {} graphs on {} (seed {}, configs {}{}), {} jobs, in {:.1f} s ({:.1f} graphs/s)\n", all.size(),
             o.device, o.seed, o.configs, o.no_joint ? "" : " + joint graphs", o.jobs, s,
             static_cast<double>(all.size()) / std::max(s, 1e-9));
  for (const auto& [verdict, n] : counts) fmt::print("  {:<22} {:>8}\n", verdict, n);
  if (!o.no_joint) fmt::print("  {:<22} {:>8}\n", "(joint graph checked)", joint_checked);
  if (crashed_jobs) fmt::print("  {:<22} {:>8}\n", "crashed jobs", crashed_jobs);
  for (const std::string& h : hung)
    fmt::print("  stopped in {} (SIGALRM: past --batch-timeout, a kernel that does not end; or a crash)\n", h);
  for (const Outcome& x : all)
    if (x.verdict != "pass" && x.verdict != "reference rejected")
      fmt::print("  seed {} {} under {}: {}\n", x.seed, x.verdict, x.config, x.detail);
  return failures || crashed_jobs ? 1 : 0;
}

int replay(const FuzzOptions& o) {
  const fuzz::CheckOptions co = check_options(o);
  int failed = 0;
  for (const std::string& file : o.replay) {
    std::ifstream in(file);
    if (!in) fail("--replay: cannot read {}", file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    fuzz::FuzzCase c = fuzz::parse_reproducer(text, file);
    fuzz::CaseReport r = fuzz::check_case(c, co);
    if (r.reference_failed) fail("{}: the reference interpreter rejects this case", file);
    if (r.passed()) {
      fmt::print("PASS {} ({} nodes{})\n", file, c.graph.num_nodes(), r.joint_checked ? ", joint graph too" : "");
      continue;
    }
    ++failed;
    for (const fuzz::Finding& f : r.findings)
      fmt::print("FAIL {}: {} under {}: {}\n", file, fuzz::verdict_name(f.verdict), f.config, f.detail);
  }
  return failed ? 1 : 0;
}

}  // namespace

void add_fuzz_command(CLI::App& app) {
  auto o = std::make_shared<FuzzOptions>();
  auto* cmd = app.add_subcommand("fuzz", "Differential fuzzing: random graphs compiled and compared with the reference");
  cmd->add_option("--graphs", o->graphs, "random graphs to check")->capture_default_str();
  cmd->add_option("--seed", o->seed, "the first seed (graph i uses a seed derived from S and i)")->capture_default_str();
  cmd->add_option("--device", o->device, "cpu or cuda[:N]")->capture_default_str();
  cmd->add_option("--jobs", o->jobs, "processes")->capture_default_str();
  cmd->add_option("--batch", o->batch, "graphs merged into one compile")->capture_default_str();
  cmd->add_option("--max-nodes", o->max_nodes, "nodes drawn per graph")->capture_default_str();
  cmd->add_option("--configs", o->configs, "compile configs, comma-separated")->capture_default_str();
  cmd->add_flag("--no-joint", o->no_joint, "skip the joint graphs");
  cmd->add_option("--save", o->save, "folder for the shrunk reproducers")->capture_default_str();
  cmd->add_option("--max-shrinks", o->max_shrinks, "failing graphs shrunk and saved, at most")->capture_default_str();
  cmd->add_option("--replay", o->replay, "check saved reproducers instead of random graphs");
  cmd->add_option("--show", o->show, "print graph N of the run (with --seed) as a .kir reproducer, and stop");
  cmd->add_option("--batch-timeout", o->batch_timeout, "seconds a batch may take before its job is stopped")->capture_default_str();
  cmd->callback([o] {
    if (o->show >= 0) {
      fuzz::GenOptions gen;
      gen.max_nodes = o->max_nodes;
      fuzz::FuzzCase c = fuzz::random_graph(o->seed * 1000003 + static_cast<uint64_t>(o->show), gen);
      fmt::print("{}", fuzz::reproducer_text(c, fuzz::Finding{fuzz::Verdict::Pass, "-", "shown with --show"}, o->device));
      std::exit(0);
    }
    // Before any work: with no GPU (or no CPU JIT), every graph would be a run error.
    require_runnable_in_a_child(parse_device(o->device), "kiln fuzz");
    std::exit(o->replay.empty() ? run_fuzz(*o) : replay(*o));
  });
}

}  // namespace kiln::cli
