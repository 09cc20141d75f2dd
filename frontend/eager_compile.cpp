#include "frontend/eager_compile.h"

#include <fmt/format.h>

#include <map>
#include <mutex>
#include <string>

#include "backend/registry.h"
#include "ir/printer.h"

namespace kiln {

namespace {
std::mutex g_mu;
std::map<Device::Kind, int> g_compiles;  // under g_mu
}  // namespace

Graph one_op_graph(Op op, const std::vector<TensorMeta>& inputs, const Attrs& attrs) {
  Graph g(std::string(op_short_name(op)));
  std::vector<Value> values;
  for (size_t i = 0; i < inputs.size(); ++i) values.push_back(g.add_input(fmt::format("x{}", i), inputs[i]));
  Node* node = g.add_node(op, values, attrs, std::string(op_short_name(op)));
  std::vector<Value> results;
  for (int i = 0; i < node->num_results(); ++i) results.push_back(node->result(i));
  g.set_outputs(results);
  return g;
}

const backend::Executable& eager_executable(const Graph& g, const Device& device) {
  static std::map<std::string, backend::Executable> cache;
  std::string key = fmt::format("{}\n{}", device.str(), print_graph(g));
  std::lock_guard lock(g_mu);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  backend::CompileOptions options;
  options.device = device;
  options.origin = fmt::format("eager {} op", backend::backend_for(device).name());
  ++g_compiles[device.kind];
  return cache.emplace(key, backend::compile(g, options).executable).first->second;
}

int eager_compiles(Device::Kind kind) {
  std::lock_guard lock(g_mu);
  auto it = g_compiles.find(kind);
  return it == g_compiles.end() ? 0 : it->second;
}

}  // namespace kiln
