// Schedule tuning (see autotune.h).
#include "backend/autotune.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <map>
#include <optional>

#include "backend/compile.h"
#include "codegen/schedule_candidates.h"
#include "ir/error.h"
#include "ir/log.h"
#include "runtime/kernel_cache.h"

namespace kiln::backend {

namespace {

using codegen::Kernel;
using codegen::ScheduleCandidate;

double now_ms() {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// What a stored choice is: the winning candidate's knobs, then the sentence the schedule
// record shows (times included), one per line.
struct Choice {
  std::string knobs, tuned;
};

std::string stored_form(const Choice& c) { return c.knobs + "\n" + c.tuned + "\n"; }

std::optional<Choice> parse_stored(const std::string& bytes) {
  size_t nl = bytes.find('\n');
  if (nl == std::string::npos || nl == 0) return std::nullopt;
  size_t end = bytes.find('\n', nl + 1);
  if (end == std::string::npos) return std::nullopt;
  return Choice{bytes.substr(0, nl), bytes.substr(nl + 1, end - nl - 1)};
}

// The key of a kernel's choice: the kernel as the lowering left it, named the same whatever its
// place in the graph and whatever its values are called; the candidates' knobs (a new
// candidate list tunes again); the target and the device.
std::string choice_key(const Kernel& unscheduled, const std::vector<ScheduleCandidate>& cands, const codegen::Target& target,
                       const std::string& device) {
  Kernel k = unscheduled;
  k.name = std::string(1, 'k');  // the same kernel wherever it sits in a graph
  k.comment.clear();
  for (codegen::Buffer& b : k.buffers) b.what.clear();
  for (codegen::Buffer& b : k.constants) b.what.clear();
  std::string knobs;
  for (const ScheduleCandidate& c : cands) knobs += c.knobs + ";";
  std::string version = std::to_string(kAutotuneFormatVersion);
  std::string printed = codegen::print_kernel(k);
  return runtime::content_key({"autotune", version, printed, knobs, target.name, device});
}

std::string times_sentence(const std::vector<ScheduleCandidate>& cands, const std::vector<double>& ms, size_t best) {
  if (best == 0) return fmt::format("the default, fastest of {} candidates ({:.4f} ms)", cands.size(), ms[0]);
  return fmt::format("{}, fastest of {} candidates ({:.4f} ms; the default {:.4f} ms)", cands[best].knobs, cands.size(), ms[best], ms[0]);
}

}  // namespace

std::string AutotuneReport::str() const {
  if (!skipped.empty()) return "autotune: nothing tuned: " + skipped;
  std::string gemms = matmuls ? fmt::format("; {} matmuls, {} from the cache, {} not on cuBLASLt's first choice", matmuls,
                                            matmuls_from_cache, matmuls_changed)
                              : "";
  return fmt::format("autotune: {} kernels with candidates, {} timed ({} candidates), {} from the cache, {} not on the default{}; {:.1f} ms",
                     kernels, timed, candidates, from_cache, changed, gemms, ms);
}

bool autotune_requested(const CompileOptions& options) {
  if (options.autotune) return true;
  const char* env = std::getenv("KILN_AUTOTUNE");
  return env && *env && std::string(env) != "0";
}

AutotuneReport autotune(codegen::LoweredGraph& lowered, const std::vector<Kernel>& unscheduled, const codegen::Target& target,
                        const Backend& backend, const CompileOptions& options, const std::string& graph_name) {
  AutotuneReport report;
  double start = now_ms();
  std::string why;
  std::optional<std::string> device = backend.tuning_device(options, &why);
  if (!device) {
    report.skipped = why;
    if (log_enabled("autotune")) log_line("autotune", fmt::format("graph {}: {}", graph_name, report.str()));
    return report;
  }
  std::optional<runtime::KernelCache> cache;
  if (options.jit.use_cache)
    if (auto dir = runtime::KernelCache::default_dir()) cache.emplace(*dir);
  std::map<std::string, Choice> this_compile;  // kernels met twice are timed once, cache or not
  for (size_t i = 0; i < lowered.kernels.size(); ++i) {
    Kernel& k = lowered.kernels[i];
    std::vector<ScheduleCandidate> cands = codegen::schedule_candidates(unscheduled.at(i), target);
    if (cands.size() < 2) continue;
    ++report.kernels;
    std::string key = choice_key(unscheduled[i], cands, target, *device);
    std::optional<Choice> choice;
    if (auto it = this_compile.find(key); it != this_compile.end()) choice = it->second;
    else if (cache)
      if (std::optional<std::string> bytes = cache->load(key, "tune")) choice = parse_stored(*bytes);
    auto chosen = choice ? std::find_if(cands.begin(), cands.end(), [&](const ScheduleCandidate& c) { return c.knobs == choice->knobs; })
                         : cands.end();
    if (chosen != cands.end()) {
      ++report.from_cache;
      if (log_enabled("autotune"))
        log_line("autotune", fmt::format("graph {} {}: from the cache ({}): {}", graph_name, k.name, key.substr(0, 12), choice->tuned));
    } else {
      // Distinct names, one program: the candidates compile together and run on the same buffers.
      std::vector<Kernel> named;
      for (size_t c = 0; c < cands.size(); ++c) {
        named.push_back(cands[c].kernel);
        named.back().name = fmt::format("{}_{}_tune{}", graph_name, k.name, c);
      }
      std::vector<double> ms = backend.time_kernels(named, options);
      size_t best = static_cast<size_t>(std::min_element(ms.begin(), ms.end()) - ms.begin());
      if (!runtime::clearly_faster(ms[best], ms[0])) best = 0;
      choice = Choice{cands[best].knobs, times_sentence(cands, ms, best)};
      chosen = cands.begin() + static_cast<long>(best);
      ++report.timed;
      report.candidates += static_cast<int>(cands.size());
      if (log_enabled("autotune")) {
        std::string lines;
        for (size_t c = 0; c < cands.size(); ++c)
          lines += fmt::format("\n  {:>9.4f} ms  {}: {}", ms[c], cands[c].knobs,
                               codegen::print_schedule(cands[c].kernel.schedule, cands[c].kernel.launch));
        log_line("autotune", fmt::format("graph {} {} ({}): {} candidates{}\n  -> {}", graph_name, k.name, k.comment, cands.size(), lines,
                                         choice->tuned));
      }
      if (cache) cache->store(key, {{"tune", stored_form(*choice), false}});
    }
    this_compile[key] = *choice;
    report.changed += chosen != cands.begin();
    std::string name = k.name, comment = k.comment;
    k = chosen->kernel;
    k.name = name;
    k.comment = comment;
    k.schedule.tuned = choice->tuned;
  }
  for (const runtime::TuningOutcome& m : backend.tune_matmuls(lowered, options)) {
    ++report.matmuls;
    report.matmuls_from_cache += m.from_cache;
    report.matmuls_changed += m.changed;
    if (log_enabled("autotune")) log_line("autotune", fmt::format("graph {}: {}", graph_name, m.said));
  }
  report.ms = now_ms() - start;
  if (log_enabled("autotune")) log_line("autotune", fmt::format("graph {}: {}", graph_name, report.str()));
  return report;
}

}  // namespace kiln::backend
