#include "tools/fuzz/shrink.h"

#include <fmt/format.h>

#include <set>
#include <sstream>
#include <unordered_map>

#include "ir/error.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace kiln::fuzz {

namespace {

// A copy of `c` where the nodes in `cut` become inputs of their type and only the outputs in
// `keep` remain; inputs nothing reads are left out. Nothing when the copy fails (a rule that
// rejects a cut input's type, which cannot happen for a pure type copy, but is checked).
std::optional<FuzzCase> rebuild(const FuzzCase& c, const std::set<const Node*>& cut, const std::vector<Value>& keep) {
  const Graph& g = c.graph;
  // What the kept outputs need, walking back from them and stopping at cut nodes.
  std::set<const Node*> needed;
  std::vector<const Node*> stack;
  for (const Value& v : keep) stack.push_back(v.node);
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!needed.insert(n).second || cut.count(n)) continue;
    for (const Value& v : n->inputs()) stack.push_back(v.node);
  }
  FuzzCase out;
  out.seed = c.seed;
  out.graph = Graph(g.name());
  ValueMap map;
  try {
    for (size_t i = 0; i < g.inputs().size(); ++i) {
      Node* n = g.inputs()[i];
      if (!needed.count(n)) continue;
      map[n->result(0)] = out.graph.add_input(n->name(), n->meta());
      out.int_bounds.push_back(c.int_bounds.at(i));
      out.input_seeds.push_back(c.input_seeds.at(i));
    }
    for (Node* n : g.nodes()) {
      if (n->is_input() || !needed.count(n)) continue;
      if (cut.count(n)) {
        // An input per result, with values of its own (integers kept small: they may index).
        for (int r = 0; r < n->num_results(); ++r) {
          map[n->result(r)] = out.graph.add_input(n->result_info(r).name, TensorMeta(n->meta(r).dtype, n->meta(r).shape));
          out.int_bounds.push_back(2);
          out.input_seeds.push_back(c.seed * 104729 + out.input_seeds.size());
        }
        continue;
      }
      copy_node(out.graph, *n, map);
    }
    std::vector<Value> outs;
    for (const Value& v : keep) outs.push_back(map.at(v));
    out.graph.set_outputs(outs);
  } catch (const Error&) {
    return std::nullopt;
  }
  return out;
}

std::vector<Value> all_outputs(const Graph& g) { return g.outputs(); }

}  // namespace

FuzzCase shrink(const FuzzCase& c, const StillFails& still_fails, int max_tries) {
  FuzzCase best = c.clone();
  int tries = 0;
  auto attempt = [&](std::optional<FuzzCase> candidate) {
    if (!candidate || tries >= max_tries) return false;
    ++tries;
    if (!still_fails(*candidate)) return false;
    best = std::move(*candidate);
    return true;
  };
  bool progress = true;
  while (progress && tries < max_tries) {
    progress = false;
    const std::vector<Value> outs = best.graph.outputs();
    // Fewer outputs.
    for (size_t drop = 0; drop < outs.size() && outs.size() > 1; ++drop) {
      std::vector<Value> keep;
      for (size_t i = 0; i < outs.size(); ++i)
        if (i != drop) keep.push_back(outs[i]);
      if (attempt(rebuild(best, {}, keep))) {
        progress = true;
        break;
      }
    }
    if (progress) continue;
    // An output's last node dropped: one of its operands returned instead (removes consumers
    // of the node that fails, as cutting removes its producers).
    for (size_t i = 0; i < outs.size() && !progress; ++i) {
      if (outs[i].node->is_input()) continue;
      for (const Value& operand : outs[i].node->inputs()) {
        if (operand.node->is_input()) continue;
        std::vector<Value> keep = outs;
        keep[i] = operand;
        if (attempt(rebuild(best, {}, keep))) {
          progress = true;
          break;
        }
      }
    }
    if (progress) continue;
    // A node replaced by inputs, the earliest first (cutting near the inputs shortens the most).
    std::vector<const Node*> nodes;
    for (const Node* n : best.graph.nodes())
      if (!n->is_input()) nodes.push_back(n);
    for (const Node* n : nodes) {
      if (attempt(rebuild(best, {n}, all_outputs(best.graph)))) {
        progress = true;
        break;
      }
    }
  }
  return best;
}

std::string reproducer_text(const FuzzCase& c, const Finding& finding, const std::string& device) {
  std::string s = fmt::format("# kiln fuzz reproducer: {} under {} on {}\n", verdict_name(finding.verdict),
                              finding.config, device);
  std::istringstream detail(finding.detail);
  for (std::string line; std::getline(detail, line);) s += "#   " + line + "\n";
  s += fmt::format("# seed {}; rerun: kiln fuzz --replay THIS_FILE --device {}\n", c.seed, device);
  for (size_t i = 0; i < c.graph.inputs().size(); ++i)
    s += fmt::format("# input %{} seed {} bound {}\n", c.graph.inputs()[i]->name(), c.input_seeds.at(i), c.int_bounds.at(i));
  return s + print_graph(c.graph);
}

FuzzCase parse_reproducer(const std::string& text, const std::string& file_name) {
  FuzzCase c;
  c.graph = parse_graph(text, file_name);
  std::istringstream in(text);
  std::unordered_map<std::string, std::pair<uint64_t, int64_t>> by_name;
  for (std::string line; std::getline(in, line);) {
    char name[256];
    unsigned long long seed = 0;
    long long bound = 0;
    if (std::sscanf(line.c_str(), "# input %%%255s seed %llu bound %lld", name, &seed, &bound) == 3)
      by_name[name] = {seed, bound};
    else if (std::sscanf(line.c_str(), "# seed %llu;", &seed) == 1)
      c.seed = seed;
  }
  for (const Node* n : c.graph.inputs()) {
    auto it = by_name.find(n->name());
    if (it == by_name.end()) fail("{}: no '# input %{} seed N bound M' line for input %{}", file_name, n->name(), n->name());
    c.input_seeds.push_back(it->second.first);
    c.int_bounds.push_back(it->second.second);
  }
  return c;
}

}  // namespace kiln::fuzz
