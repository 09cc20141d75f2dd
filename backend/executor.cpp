#include "backend/executor.h"

#include <fmt/format.h>

#include <algorithm>

#include "backend/collective_step.h"
#include "backend/profile.h"
#include "codegen/collective_schedule.h"
#include "ir/log.h"

namespace kiln::backend {

using codegen::GraphBuffer;
using codegen::Step;

std::vector<void*> bind_buffers(const codegen::LoweredGraph& lg, RunMemory& memory, int64_t arena_bytes) {
  std::vector<void*> ptr(lg.buffers.size(), nullptr);
  for (size_t o = 0; o < lg.outputs.size(); ++o) {
    const int b = lg.outputs[o];
    if (!ptr[static_cast<size_t>(b)]) ptr[static_cast<size_t>(b)] = memory.output(o, lg.buffers[static_cast<size_t>(b)].meta.contiguous());
  }
  std::byte* arena = nullptr;
  for (size_t b = 0; b < lg.buffers.size(); ++b) {
    const GraphBuffer& gb = lg.buffers[b];
    if (ptr[b]) continue;
    if (gb.kind == GraphBuffer::Kind::Input) {
      ptr[b] = memory.input(gb);
      continue;
    }
    if (!arena) arena = static_cast<std::byte*>(memory.arena(arena_bytes));
    ptr[b] = arena + gb.offset;
  }
  return ptr;
}

std::vector<std::pair<size_t, size_t>> duplicate_outputs(const codegen::LoweredGraph& lg) {
  std::vector<std::pair<size_t, size_t>> out;
  for (size_t o = 1; o < lg.outputs.size(); ++o)
    for (size_t p = 0; p < o; ++p)
      if (lg.outputs[o] == lg.outputs[p]) {
        out.emplace_back(o, p);
        break;
      }
  return out;
}

namespace {

// What a step is, for the KILN_LOGS=perf table.
std::string step_label(const codegen::LoweredGraph& lg, const Step& step) {
  switch (step.kind) {
    case Step::Kind::Opaque: return "custom op " + step.opaque.label;
    case Step::Kind::Collective: return "collective " + step.opaque.label;
    case Step::Kind::Matmul: return "GEMM " + step.matmul.label;
    case Step::Kind::Kernel: {
      const codegen::Kernel& k = lg.kernels[static_cast<size_t>(step.kernel)];
      if (k.schedule.mapping.empty()) return fmt::format("{} grid {} x {}  # {}", k.name, k.launch.grid, k.launch.block, k.comment);
      return fmt::format("{} grid {} x {} ({})  # {}", k.name, k.launch.grid, k.launch.block, codegen::print_schedule(k.schedule, k.launch), k.comment);
    }
  }
  return "?";
}

void log_step_times(const ExecutableState& s, const std::vector<double>& marks) {
  const codegen::LoweredGraph& lg = s.lowered;
  double total = 0;
  std::string table = fmt::format("graph {}: time per step on {}\n", s.graph_name, s.device.str());
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const double ms = marks[i + 1] - marks[i];
    total += ms;
    table += fmt::format("  {:3} {:9.3f} ms  {}\n", i, ms, step_label(lg, lg.steps[i]).substr(0, 240));
  }
  table += fmt::format("  total {:.3f} ms", total);
  log_line("perf", table);
}

}  // namespace

void run_steps(const ExecutableState& s, DeviceSteps& device, const std::vector<void*>& ptr) {
  const codegen::LoweredGraph& lg = s.lowered;
  StepRecorder* rec = StepRecorder::current();
  const bool timed = (rec || log_enabled("perf")) && device.can_time();
  InFlight<int> in_flight;
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const Step& step = lg.steps[i];
    if (timed) device.mark();
    // Every kind of step, a GEMM too, waits for the collectives whose results it touches.
    if (!in_flight.empty())
      for (int token : in_flight.take(codegen::step_buffers(step))) device.wait_collective(token);
    switch (step.kind) {
      case Step::Kind::Kernel: device.kernel(step, ptr); break;
      case Step::Kind::Matmul: device.gemm(step.matmul, ptr); break;
      case Step::Kind::Opaque: device.opaque(i, step.opaque, ptr); break;
      case Step::Kind::Collective: {
        const codegen::OpaqueCall& c = step.opaque;
        const int token = device.start_collective(c, ptr[static_cast<size_t>(c.inputs.at(0))], ptr[static_cast<size_t>(c.outputs.at(0))]);
        if (token >= 0) in_flight.add(c.outputs.at(0), token);
        break;
      }
    }
  }
  for (int token : in_flight.take_all()) device.wait_collective(token);  // the run ends when they do
  if (!timed) return;
  device.mark();
  const std::vector<double> marks = device.mark_ms();
  if (rec) {
    rec->steps.clear();
    for (size_t i = 0; i < lg.steps.size(); ++i) rec->steps.push_back({marks[i], marks[i + 1] - marks[i]});
  }
  if (log_enabled("perf")) log_step_times(s, marks);
}

}  // namespace kiln::backend
