#include "backend/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "backend/executable_state.h"
#include "ir/error.h"

namespace kiln::backend {

namespace {
thread_local StepRecorder* g_recorder = nullptr;
}  // namespace

double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

StepRecorder::StepRecorder() {
  if (g_recorder) fail("a profile is already being recorded on this thread");
  g_recorder = this;
}
StepRecorder::~StepRecorder() { g_recorder = nullptr; }
StepRecorder* StepRecorder::current() { return g_recorder; }

double Profile::steps_ms() const {
  double t = 0;
  for (const StepProfile& s : steps) t += s.ms;
  return t;
}

std::string Profile::table() const {
  std::vector<const StepProfile*> order;
  for (const StepProfile& s : steps) order.push_back(&s);
  std::stable_sort(order.begin(), order.end(), [](const StepProfile* a, const StepProfile* b) { return a->ms > b->ms; });
  double total = steps_ms();
  std::string out = fmt::format("graph {} on {}: {} steps, median of {} runs: {:.3f} ms a run{}, {:.3f} ms in steps\n", graph,
                                device, steps.size(), runs, run_ms,
                                host_copies ? " (host copies in and out included)" : "", total);
  out += totals_by_kind() + "\n";
  out += fmt::format("{:>5} {:>10} {:>6} {:>8} {:>10}  {:<9} {:<24} {}\n", "step", "ms", "%", "GB/s", "MB", "kind", "name",
                     "computes");
  for (const StepProfile* s : order) {
    out += fmt::format("{:>5} {:>10.4f} {:>5.1f}% {:>8.1f} {:>10.2f}  {:<9} {:<24} {}\n", s->step, s->ms,
                       total > 0 ? 100 * s->ms / total : 0, s->gbps(), s->bytes / 1e6, s->kind, s->name,
                       s->computes.substr(0, 120));
    if (!s->schedule.empty()) out += fmt::format("{:>55}schedule: {}\n", "", s->schedule);
  }
  return out;
}

std::string Profile::totals_by_kind() const {
  std::vector<std::string> kinds;  // in order of first appearance
  std::map<std::string, std::pair<int, double>> by_kind;
  for (const StepProfile& s : steps) {
    auto [it, fresh] = by_kind.try_emplace(s.kind, 0, 0.0);
    if (fresh) kinds.push_back(s.kind);
    ++it->second.first;
    it->second.second += s.ms;
  }
  double total = steps_ms();
  std::string out = "by kind:";
  for (const std::string& k : kinds) {
    auto [n, ms] = by_kind.at(k);
    out += fmt::format(" {} {} x {:.3f} ms ({:.0f}%);", k, n, ms, total > 0 ? 100 * ms / total : 0);
  }
  if (!kinds.empty()) out.pop_back();
  return out;
}

std::string Profile::chrome_trace() const {
  nlohmann::json events = nlohmann::json::array();
  events.push_back({{"name", "process_name"}, {"ph", "M"}, {"pid", 1}, {"args", {{"name", "kiln " + device}}}});
  events.push_back({{"name", "thread_name"}, {"ph", "M"}, {"pid", 1}, {"tid", 1}, {"args", {{"name", graph}}}});
  for (const StepProfile& s : steps)
    events.push_back({{"name", s.name},
                      {"cat", s.kind},
                      {"ph", "X"},
                      {"pid", 1},
                      {"tid", 1},
                      {"ts", s.start_ms * 1e3},
                      {"dur", s.ms * 1e3},
                      {"args", {{"step", s.step}, {"computes", s.computes}, {"schedule", s.schedule}, {"bytes", s.bytes}, {"GB/s", s.gbps()}}}});
  return nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump(1) + "\n";
}

Profile profile(const Executable& exe, std::span<const HostTensor> inputs, int runs) {
  Profile p = profile_runs(exe, [&] { exe.run(inputs); }, runs);
  p.host_copies = p.device.rfind("cuda", 0) == 0;
  return p;
}

Profile profile_runs(const Executable& exe, const std::function<void()>& run_once, int runs) {
  if (runs < 1) fail("profile: runs must be at least 1, got {}", runs);
  const ExecutableState& s = exe.state();
  const codegen::LoweredGraph& lg = s.lowered;
  run_once();  // warm-up: loads modules, fills caches
  std::vector<std::vector<StepTime>> per_run;
  std::vector<double> run_ms;
  for (int r = 0; r < runs; ++r) {
    StepRecorder rec;
    auto t0 = std::chrono::steady_clock::now();
    run_once();
    run_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (rec.steps.size() != lg.steps.size())
      fail("profile: the {} backend recorded {} of {} steps of graph {}{}", s.device.str(), rec.steps.size(),
           lg.steps.size(), s.graph_name,
           rec.steps.empty() && s.device.kind == Device::Kind::CUDA
               ? " (a graph compiled with cuda_graphs replays as one unit: profile it compiled without)"
               : "");
    per_run.push_back(std::move(rec.steps));
  }
  Profile p;
  p.graph = s.graph_name;
  p.device = s.device.str();
  p.runs = runs;
  p.run_ms = median_of(run_ms);
  // The median run (by the sum of its steps) gives the start times of the trace.
  std::vector<std::pair<double, int>> sums;
  for (int r = 0; r < runs; ++r) {
    double t = 0;
    for (const StepTime& st : per_run[r]) t += st.ms;
    sums.push_back({t, r});
  }
  std::sort(sums.begin(), sums.end());
  const std::vector<StepTime>& mid = per_run[sums[sums.size() / 2].second];
  bool cuda = s.device.kind == Device::Kind::CUDA;
  const std::vector<int64_t> grids = s.program ? s.program->launched_grids() : std::vector<int64_t>{};
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const codegen::Step& step = lg.steps[i];
    StepProfile sp;
    sp.step = static_cast<int>(i);
    std::vector<double> t;
    for (const auto& run : per_run) t.push_back(run[i].ms);
    sp.ms = median_of(t);
    sp.start_ms = mid[i].start_ms;
    if (step.kind == codegen::Step::Kind::Matmul) {
      const codegen::MatmulCall& mm = step.matmul;
      sp.kind = cuda ? "cuBLASLt" : "BLAS";
      sp.name = fmt::format("matmul {}x{}x{}{}", mm.m, mm.n, mm.k, mm.batch > 1 ? fmt::format(" x{}", mm.batch) : "");
      sp.computes = mm.label;
      for (int b : {mm.a, mm.b, mm.out, mm.bias})
        if (b >= 0) sp.bytes += lg.buffers[b].nbytes();
    } else if (step.kind == codegen::Step::Kind::Opaque || step.kind == codegen::Step::Kind::Collective) {
      const codegen::OpaqueCall& c = step.opaque;
      sp.kind = step.kind == codegen::Step::Kind::Opaque ? "custom op" : "collective";
      sp.name = std::string(op_name(c.op));
      sp.computes = c.label;
      for (int b : c.inputs) sp.bytes += lg.buffers[b].nbytes();
      for (int b : c.outputs) sp.bytes += lg.buffers[b].nbytes();
    } else {
      const codegen::Kernel& k = lg.kernels[step.kernel];
      sp.kind = "kernel";
      sp.name = k.name;
      sp.computes = k.comment;
      if (!k.schedule.mapping.empty()) sp.schedule = codegen::print_schedule(k.schedule, k.launch);
      if (step.kernel >= 0 && static_cast<size_t>(step.kernel) < grids.size() && grids[static_cast<size_t>(step.kernel)] != k.launch.grid)
        sp.schedule += fmt::format("; launched with {} blocks of the {} scheduled (what the SMs hold at once)",
                                   grids[static_cast<size_t>(step.kernel)], k.launch.grid);
      for (int b : step.args) sp.bytes += lg.buffers[b].nbytes();
    }
    p.steps.push_back(std::move(sp));
  }
  return p;
}

}  // namespace kiln::backend
