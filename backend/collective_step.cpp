#include "backend/collective_step.h"

#include <fmt/format.h>

#include <cstring>

#include "backend/executable_state.h"
#include "ir/error.h"

namespace kiln::backend {

runtime::dist::CollectiveArgs collective_args(const codegen::OpaqueCall& c, const void* in, void* out) {
  runtime::dist::CollectiveArgs a;
  a.op = c.op;
  a.dtype = c.input_metas.at(0).dtype;
  a.input = in;
  a.output = out;
  a.input_numel = c.input_metas[0].numel();
  a.output_numel = c.output_metas.at(0).numel();
  a.mean = c.attrs.has("op") && c.attrs.get_string("op") == "mean";
  if (c.attrs.has("src")) a.root = static_cast<int>(c.attrs.get_int("src"));
  if (c.attrs.has("dst")) a.root = static_cast<int>(c.attrs.get_int("dst"));
  a.label = c.label;
  return a;
}

std::string describe_collectives(const codegen::LoweredGraph& lg) {
  std::string out;
  int i = 0;
  for (const codegen::Step& s : lg.steps) {
    if (s.kind != codegen::Step::Kind::Collective) continue;
    const codegen::OpaqueCall& c = s.opaque;
    out += fmt::format("#{} {} {}", i++, op_name(c.op), c.input_metas.at(0).str());
    for (const auto& [name, value] : c.attrs.all()) out += fmt::format(" {}={}", name, attr_str(value));
    out += "\n";
  }
  return out;
}

runtime::dist::ProcessGroup& CollectiveGate::group(const ExecutableState& s, const codegen::OpaqueCall& c) const {
  runtime::dist::ProcessGroup& g = runtime::dist::group_for(c.attrs.get_int("world_size"), fmt::format("graph {}: {}", s.graph_name, c.label));
  std::lock_guard lock(mu_);
  if (checked_ != &g) {
    g.check_same_program(s.graph_name, describe_collectives(s.lowered));
    checked_ = &g;
  }
  return g;
}

bool is_local_copy(const codegen::OpaqueCall& c) {
  return c.attrs.get_int("world_size") == 1 && runtime::dist::default_group() == nullptr;
}

void run_host_collective(const ExecutableState& s, const CollectiveGate& gate, const codegen::OpaqueCall& c, const void* in, void* out) {
  if (is_local_copy(c)) {
    if (out != in) std::memcpy(out, in, static_cast<size_t>(c.output_metas.at(0).nbytes()));
    return;
  }
  gate.group(s, c).run_on_host(collective_args(c, in, out));
}

}  // namespace kiln::backend
