#include "frontend/aot.h"

#include <fmt/format.h>

#include <chrono>

#include "ir/error.h"
#include "ir/log.h"
#include "passes/autograd/joint.h"
#include "passes/autograd/partition.h"

namespace kiln {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

AotGraphs aot_split(const Graph& g, const std::vector<std::string>& wrt, const std::string& partitioner,
                    backend::DebugDump& debug, const std::string& name) {
  auto t1 = std::chrono::steady_clock::now();
  autograd::JointGraph joint = autograd::build_joint(g, {.wrt = wrt});
  debug.time("joint", ms_since(t1));
  debug.graph("joint", joint.graph);
  t1 = std::chrono::steady_clock::now();
  autograd::Partition part = autograd::partition(joint, autograd::parse_partition_kind(partitioner));
  debug.time("partition", ms_since(t1));
  debug.graph("forward", part.forward);
  debug.graph("backward", part.backward);
  if (log_enabled("aot"))
    log_line("aot", fmt::format("{}: joint graph of {} nodes, {} gradients; {} partition: forward {} nodes, backward "
                                "{} nodes, {} saved tensors ({} bytes), {} recomputed",
                                name, joint.graph.num_nodes(), wrt.size(), partitioner, part.forward.num_nodes(),
                                part.backward.num_nodes(), part.saved.size(), part.saved_bytes, part.recomputed_nodes));
  AotGraphs out;
  // The joint graph numbers a tangent by its graph input; the backward takes the tangents alone.
  for (int t : joint.tangent_for_output) out.tangent_for_output.push_back(t < 0 ? -1 : t - joint.num_primals);
  for (int i = 0; i < joint.num_tangents; ++i) out.tangent_metas.push_back(joint.graph.inputs()[joint.num_primals + i]->meta());
  KILN_INTERNAL_ASSERT(part.backward.inputs().size() == part.saved.size() + out.tangent_metas.size(),
                       "the backward takes the saved tensors, then every tangent");
  out.forward = std::move(part.forward);
  out.backward = std::move(part.backward);
  return out;
}

}  // namespace kiln
