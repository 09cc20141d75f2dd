// The importer: initializers and inputs into slots, each node through the op table (folded at
// import when every input is known), the outputs, and every unsupported operator reported at once.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>
#include <sstream>
#include <unordered_map>

#include "frontend/onnx/node_context.h"
#include "frontend/onnx/onnx.h"
#include "frontend/onnx/op_table.h"
#include "frontend/onnx/tensor_proto.h"
#include "ir/reference/interpreter.h"
#include "ir/verifier.h"

namespace kiln::onnx {

namespace {

// Folding runs a node on the reference interpreter when all its inputs are known and hold at
// most this many elements together: shape computations always, constant subgraphs of weights
// when they are small enough that running them at import costs nothing noticeable.
constexpr int64_t kFoldMaxElements = int64_t{1} << 20;

// An ONNX name as a kiln identifier: [A-Za-z_][A-Za-z0-9_.]*.
std::string identifier(const std::string& name) {
  std::string out;
  for (char c : name) out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') ? c : '_';
  if (out.empty() || !(std::isalpha(static_cast<unsigned char>(out[0])) || out[0] == '_')) out = "_" + out;
  return out;
}

int64_t opset_of(const ::onnx::ModelProto& m, const std::string& what) {
  int64_t opset = -1;
  for (const auto& o : m.opset_import())
    if (o.domain().empty() || o.domain() == "ai.onnx") opset = o.version();
  if (opset < 0) {
    // IR version 1 models declare none; a model of other domains' operators only has none
    // either (its operators are then refused by name).
    if (m.opset_import_size() == 0) return 1;
    return kMaxOpset;
  }
  if (opset > kMaxOpset)
    throw Unsupported(fmt::format("{}: opset {} is not supported (kiln imports opsets 1 to {}); convert the model "
                                  "with onnx.version_converter or export it with opset_version={}",
                                  what, opset, kMaxOpset, kMaxOpset),
                      {fmt::format("opset {}", opset)});
  return opset;
}

class Importer {
 public:
  Importer(const ::onnx::ModelProto& model, const std::string& what, const ImportOptions& options, std::string model_dir)
      : model_(model), what_(what), options_(options), model_dir_(std::move(model_dir)) {}

  ImportedModel run() {
    ImportedModel out;
    check_every_op_is_known(model_.graph());
    out.opset = opset_of(model_, what_);
    out.producer = model_.producer_name() + (model_.producer_version().empty() ? "" : " " + model_.producer_version());
    const ::onnx::GraphProto& gp = model_.graph();
    std::string gname = options_.graph_name.empty() ? identifier(gp.name().empty() ? "model" : gp.name()) : options_.graph_name;
    out.graph.set_name(gname);
    graph_ = &out.graph;
    opset_ = out.opset;

    for (const auto& init : gp.initializer()) add_initializer(init);
    for (const auto& vi : gp.input()) {
      if (slots_.count(vi.name())) continue;  // an initializer listed as an input too (IR < 4)
      if (add_model_input(vi)) out.input_names.push_back(vi.name());
      else out.specialized_inputs.push_back(vi.name());
    }
    Builder b(out.graph);
    for (const auto& node : gp.node()) convert(node, b);
    if (!problems_.empty()) report_problems();

    std::vector<Value> outputs;
    for (const auto& vi : gp.output()) {
      auto it = slots_.find(vi.name());
      if (it == slots_.end()) fail("{}: output '{}' is computed by no node", what_, vi.name());
      outputs.push_back(materialize(it->second, vi.name()));
      out.output_names.push_back(vi.name());
    }
    out.graph.set_outputs(outputs);
    verify_or_throw(out.graph, what_);
    out.weights = std::move(weights_);
    return out;
  }

 private:
  // Every operator the table lacks, listed at once with the nodes that use it.
  void check_every_op_is_known(const ::onnx::GraphProto& gp) {
    std::map<std::string, std::vector<std::string>> missing;
    for (const auto& n : gp.node()) {
      bool default_domain = n.domain().empty() || n.domain() == "ai.onnx";
      std::string op = default_domain ? n.op_type() : n.domain() + "." + n.op_type();
      if (!default_domain || !find_op(n.op_type())) missing[op].push_back(n.name().empty() ? "output '" + (n.output_size() ? n.output(0) : "") + "'" : "'" + n.name() + "'");
    }
    if (missing.empty()) return;
    std::string list;
    std::vector<std::string> causes;
    for (const auto& [op, nodes] : missing) {
      causes.push_back("operator " + op);
      std::string some;
      for (size_t i = 0; i < nodes.size() && i < 3; ++i) some += (i ? ", " : "") + nodes[i];
      if (nodes.size() > 3) some += ", ...";
      list += fmt::format("\n  {} ({} node{}: {})", op, nodes.size(), nodes.size() == 1 ? "" : "s", some);
    }
    throw Unsupported(fmt::format("{}: {} operator{} kiln does not import:{}\n(`kiln ops --onnx` lists the ones it does)",
                                  what_, missing.size(), missing.size() == 1 ? "" : "s", list),
                      std::move(causes));
  }

  void add_initializer(const ::onnx::TensorProto& t) {
    HostTensor v = to_host_tensor(t, fmt::format("{}: initializer '{}'", what_, t.name()), model_dir_);
    Slot s;
    if (options_.params_as_inputs && is_floating(v.dtype())) {
      std::string name = unique_input_name(t.name());
      s.value = graph_->add_input(name, TensorMeta(v.dtype(), v.shape()));
      weights_[name] = std::move(v);
    } else {
      s.known = std::move(v);
    }
    slots_[t.name()] = std::move(s);
  }

  // A graph input for the model's input `vi`; false when options_.known_inputs gives its value
  // (then it is known, as an initializer is).
  bool add_model_input(const ::onnx::ValueInfoProto& vi) {
    std::string what = fmt::format("{}: input '{}'", what_, vi.name());
    if (!vi.type().has_tensor_type())
      throw Unsupported(fmt::format("{}: sequence, map and optional inputs are not supported (only tensors)", what),
                        {"sequence, map or optional inputs"});
    const auto& tt = vi.type().tensor_type();
    std::optional<DType> dt = dtype_of(tt.elem_type());
    if (!dt)
      throw Unsupported(fmt::format("{}: element type {} is not supported", what, elem_type_name(tt.elem_type())),
                        {"element type " + elem_type_name(tt.elem_type())});
    Shape shape;
    if (auto it = options_.input_shapes.find(vi.name()); it != options_.input_shapes.end()) {
      shape = it->second;
    } else {
      if (!tt.has_shape()) fail("{}: its shape is not declared; give it (ImportOptions::input_shapes)", what);
      for (const auto& d : tt.shape().dim()) {
        if (d.has_dim_value()) {
          shape.push_back(d.dim_value());
        } else if (d.has_dim_param() && options_.sizes.count(d.dim_param())) {
          shape.push_back(options_.sizes.at(d.dim_param()));
        } else {
          std::string dim = d.has_dim_param() ? "'" + d.dim_param() + "'" : "an unnamed dim";
          fail("{}: {} of its shape is symbolic; give its size (--sizes {}=N, ImportOptions::sizes)", what, dim,
               d.has_dim_param() ? d.dim_param() : "NAME");
        }
      }
    }
    Slot s;
    if (auto it = options_.known_inputs.find(vi.name()); it != options_.known_inputs.end()) {
      if (it->second.dtype() != *dt || it->second.shape() != shape)
        fail("{}: the value given to specialize on is {}{}; the model declares {}{}", what, dtype_name(it->second.dtype()),
             shape_str(it->second.shape()), dtype_name(*dt), shape_str(shape));
      s.known = it->second;
      slots_[vi.name()] = std::move(s);
      return false;
    }
    s.value = graph_->add_input(unique_input_name(vi.name()), TensorMeta(*dt, shape));
    model_input_of_[s.value.node->name()] = vi.name();
    slots_[vi.name()] = std::move(s);
    return true;
  }

  std::string unique_input_name(const std::string& onnx_name) {
    std::string base = identifier(onnx_name), name = base;
    for (int k = 1; graph_->find(name); ++k) name = fmt::format("{}_{}", base, k);
    return name;
  }

  // A known tensor as a value of the main graph: a constant node when small, else a graph
  // input whose value comes with the model.
  Value materialize(Slot& s, const std::string& onnx_name) {
    if (s.value) return s.value;
    const HostTensor& t = *s.known;
    if (t.numel() <= kInlineConstantMax) {
      Attrs a;
      a.set("size", IntList(t.shape()));
      a.set("dtype", t.dtype());
      a.set("values", t.to_doubles());
      s.value = graph_->add(Op::Constant, {}, a, identifier(onnx_name));
    } else {
      std::string name = unique_input_name(onnx_name);
      s.value = graph_->add_input(name, t.meta());
      weights_[name] = t;
    }
    return s.value;
  }

  void convert(const ::onnx::NodeProto& node, Builder& b) {
    std::vector<Slot*> ins;
    bool poisoned = false;
    for (const std::string& name : node.input()) {
      if (name.empty()) {
        ins.push_back(nullptr);
        continue;
      }
      auto it = slots_.find(name);
      if (it == slots_.end()) {
        if (poisoned_.count(name)) {
          poisoned = true;
          break;
        }
        fail("{}: node '{}' ({}) reads '{}', which no earlier node, input or initializer makes (nodes must be in "
             "topological order)", what_, node.name(), node.op_type(), name);
      }
      ins.push_back(&it->second);
    }
    if (poisoned) {
      for (const std::string& o : node.output()) poisoned_.insert(o);
      return;
    }
    const OpEntry* entry = find_op(node.op_type());
    try {
      std::optional<std::vector<Out>> folded;
      if (all_known(ins) && entry->foldable) folded = fold(node, *entry, ins);
      std::vector<Out> outs = folded ? std::move(*folded) : emit(node, *entry, ins, b);
      if (static_cast<int>(outs.size()) < node.output_size())
        fail("{}: node '{}' ({}) has {} outputs; kiln makes {} of them", what_, node.name(), node.op_type(), node.output_size(), outs.size());
      for (int i = 0; i < node.output_size(); ++i) {
        const std::string& name = node.output(i);
        if (name.empty()) continue;
        Slot s;
        s.known = std::move(outs[i].known);
        if (!s.known) {
          s.value = outs[i].var.v;
          name_value(s.value, name);
        }
        slots_[name] = std::move(s);
      }
    } catch (const Unsupported& e) {
      problems_.push_back(e.what());
      auto add_once = [](std::vector<std::string>& to, const std::vector<std::string>& from) {
        for (const std::string& x : from)
          if (std::find(to.begin(), to.end(), x) == to.end()) to.push_back(x);
      };
      add_once(problem_causes_, e.causes());
      add_once(run_time_values_, model_inputs_deciding(e.run_time_values()));
      for (const std::string& o : node.output()) poisoned_.insert(o);
    }
  }

  // The values a refusal needed known at import, traced back to the model inputs they are
  // computed from (a Range's limit computed from an input `size`: `size`), so that importing
  // again with those inputs' values specializes the graph on them. A value computed from
  // nothing else stays named as it is.
  std::vector<std::string> model_inputs_deciding(const std::vector<std::string>& values) const {
    std::vector<std::string> out;
    for (const std::string& v : values) {
      auto it = slots_.find(v);
      if (it == slots_.end() || !it->second.value || model_input_of_.count(it->second.value.node->name())) {
        out.push_back(v);
        continue;
      }
      std::vector<const Node*> stack{it->second.value.node};
      std::unordered_set<const Node*> seen;
      std::vector<std::string> found;
      bool data_dependent = false;
      while (!stack.empty()) {
        const Node* n = stack.back();
        stack.pop_back();
        if (!seen.insert(n).second) continue;
        if (n->is_input()) {
          auto m = model_input_of_.find(n->name());
          if (m == model_input_of_.end()) continue;  // a weight: known to the model already
          // A shape decided by a floating-point input's data is data-dependent: no
          // specialization on data (it would fold the whole model away).
          if (is_floating(n->meta().dtype)) data_dependent = true;
          found.push_back(m->second);
          continue;
        }
        for (const Value& in : n->inputs())
          if (in) stack.push_back(in.node);
      }
      if (found.empty() || data_dependent) found = {v};
      out.insert(out.end(), found.begin(), found.end());
    }
    return out;
  }

  bool all_known(const std::vector<Slot*>& ins) const {
    int64_t total = 0;
    for (const Slot* s : ins) {
      if (!s) continue;
      if (!s->known) return false;
      total += s->known->numel();
    }
    return total <= kFoldMaxElements;
  }

  std::vector<Out> emit(const ::onnx::NodeProto& node, const OpEntry& entry, const std::vector<Slot*>& ins, Builder& b) {
    NodeContext c(node, b, opset_, ins, [&](Slot& s) {
      // the slot's ONNX name, for the constant's or the weight's name
      for (int i = 0; i < node.input_size(); ++i)
        if (ins[i] == &s) return materialize(s, node.input(i));
      return materialize(s, "const");
    });
    std::vector<Out> outs = run_converter(c, entry);
    return outs;
  }

  // Runs the node at import: its known inputs as the inputs of a scratch graph, the converter's
  // nodes there, then the reference interpreter. nullopt where its results would be large (an
  // Expand or ConstantOfShape to a big shape): those are computed at run time instead.
  std::optional<std::vector<Out>> fold(const ::onnx::NodeProto& node, const OpEntry& entry, const std::vector<Slot*>& ins) {
    Graph scratch("fold");
    Builder sb(scratch);
    std::vector<Slot> local(ins.size());
    std::vector<Slot*> local_ptrs(ins.size(), nullptr);
    std::vector<HostTensor> args;
    for (size_t i = 0; i < ins.size(); ++i) {
      if (!ins[i]) continue;
      local[i].known = ins[i]->known;
      local_ptrs[i] = &local[i];
    }
    NodeContext c(node, sb, opset_, local_ptrs, [&](Slot& s) {
      args.push_back(*s.known);
      return scratch.add_input(fmt::format("in{}", args.size()), s.known->meta());
    });
    std::vector<Out> outs = run_converter(c, entry);
    std::vector<Value> values;
    for (Out& o : outs)
      if (!o.known) values.push_back(o.var.v);
    if (values.empty()) return outs;
    int64_t total = 0;
    for (const Value& v : values) total += v.meta().numel();
    if (total > kFoldMaxElements) return std::nullopt;
    scratch.set_outputs(values);
    std::vector<HostTensor> results = interpret(scratch, args);
    size_t k = 0;
    for (Out& o : outs)
      if (!o.known) o = Out::of_known(results[k++].contiguous());
    return outs;
  }

  std::vector<Out> run_converter(NodeContext& c, const OpEntry& entry) {
    std::vector<Out> outs;
    try {
      outs = entry.convert(c);
    } catch (const Unsupported&) {
      throw;
    } catch (const Error& e) {
      // a builder's shape error, said for the node that caused it (the converter's own errors
      // name the node already)
      std::string msg = e.what();
      if (msg.rfind(c.where(), 0) == 0) throw Error(fmt::format("{}: {}", what_, msg));
      throw Error(fmt::format("{}: {}: {}", what_, c.where(), msg));
    }
    c.check_attributes_read();
    return outs;
  }

  // Names a node's result after the ONNX tensor it computes, where that name is free.
  void name_value(Value v, const std::string& onnx_name) {
    if (v.node->is_input() || named_.count(v) || v.node->graph() != graph_) return;
    std::string name = identifier(onnx_name);
    if (!graph_->find(name)) graph_->rename(v, name);
    named_.insert(v);
  }

  [[noreturn]] void report_problems() {
    std::string list;
    for (const std::string& p : problems_) list += "\n  " + p;
    throw Unsupported(fmt::format("{}: {} node{} kiln cannot import:{}", what_, problems_.size(),
                                  problems_.size() == 1 ? "" : "s", list),
                      problem_causes_, run_time_values_);
  }

  const ::onnx::ModelProto& model_;
  std::string what_;
  const ImportOptions& options_;
  std::string model_dir_;  // where external data files are; empty for a model from bytes
  Graph* graph_ = nullptr;
  int64_t opset_ = 0;
  std::unordered_map<std::string, Slot> slots_;
  std::set<std::string> poisoned_;
  std::unordered_set<Value> named_;
  std::vector<std::string> problems_;
  std::vector<std::string> problem_causes_;  // each problem's causes, once
  std::vector<std::string> run_time_values_;  // the model inputs the problems needed known at import
  std::unordered_map<std::string, std::string> model_input_of_;  // kiln input name -> the model's input name
  std::map<std::string, HostTensor> weights_;
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("cannot open '{}'", path);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

namespace {

ImportedModel import_bytes(const std::string& bytes, const std::string& name, const ImportOptions& options, const std::string& dir) {
  ::onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) fail("'{}' is not an ONNX model (its bytes do not parse as a ModelProto)", name);
  if (!model.has_graph()) fail("'{}' holds no graph", name);
  return Importer(model, name, options, dir).run();
}

}  // namespace

ImportedModel load_from_bytes(const std::string& bytes, const std::string& name, const ImportOptions& options) {
  return import_bytes(bytes, name, options, "");
}

ImportedModel load(const std::string& path, const ImportOptions& options) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return import_bytes(read_file(path), path, options, dir.empty() ? "." : dir);
}

std::vector<std::string> model_input_names(const std::string& path) {
  ::onnx::ModelProto m;
  if (!m.ParseFromString(read_file(path))) fail("'{}' is not an ONNX model (a serialized ModelProto)", path);
  std::set<std::string> initializers;
  for (const auto& t : m.graph().initializer()) initializers.insert(t.name());
  std::vector<std::string> out;
  for (const auto& vi : m.graph().input())
    if (!initializers.count(vi.name())) out.push_back(vi.name());
  return out;
}

HostTensor read_tensor_proto(const std::string& path) {
  ::onnx::TensorProto t;
  if (!t.ParseFromString(read_file(path))) fail("'{}' is not a serialized ONNX TensorProto", path);
  return to_host_tensor(t, fmt::format("'{}'", path));
}

bool available(std::string*) { return true; }

}  // namespace kiln::onnx
