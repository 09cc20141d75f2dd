#include "ir/op_registry.h"

#include <fmt/format.h>

#include <deque>
#include <mutex>

#include "ir/error.h"
#include "ir/lexer.h"
#include "ir/meta/meta.h"
#include "ir/reference/reference.h"

namespace kiln {

std::string_view category_name(OpCategory c) {
  switch (c) {
    case OpCategory::Placeholder: return "placeholder";
    case OpCategory::Pointwise: return "pointwise";
    case OpCategory::Reduction: return "reduction";
    case OpCategory::View: return "view";
    case OpCategory::Matmul: return "matmul";
    case OpCategory::Composite: return "composite";
    case OpCategory::Creation: return "creation";
    case OpCategory::Gather: return "gather";
    case OpCategory::Scatter: return "scatter";
    case OpCategory::Opaque: return "opaque";
    case OpCategory::Collective: return "collective";
    case OpCategory::Attention: return "attention";
    case OpCategory::Sort: return "sort";
  }
  return "?";
}

// ---- schema text

namespace {
std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string_view::npos ? std::string() : std::string(s.substr(b, e - b + 1));
}

std::optional<ArgType> arg_type_from(std::string_view t) {
  if (t == "Tensor") return ArgType::Tensor;
  if (t == "Tensor[]") return ArgType::TensorList;
  if (t == "int") return ArgType::Int;
  if (t == "float") return ArgType::Float;
  if (t == "Scalar") return ArgType::Scalar;
  if (t == "bool") return ArgType::Bool;
  if (t == "str") return ArgType::Str;
  if (t == "dtype") return ArgType::DType;
  if (t == "int[]") return ArgType::IntList;
  if (t == "float[]") return ArgType::FloatList;
  return std::nullopt;
}

}  // namespace

std::string_view arg_type_name(ArgType t) {
  switch (t) {
    case ArgType::Tensor: return "Tensor";
    case ArgType::TensorList: return "Tensor[]";
    case ArgType::Int: return "int";
    case ArgType::Float: return "float";
    case ArgType::Scalar: return "Scalar";
    case ArgType::Bool: return "bool";
    case ArgType::Str: return "str";
    case ArgType::DType: return "dtype";
    case ArgType::IntList: return "int[]";
    case ArgType::FloatList: return "float[]";
  }
  return "?";
}

Schema parse_schema(std::string_view text) {
  Schema s;
  std::string body(text);
  if (auto arrow = body.find("->"); arrow != std::string::npos) {
    std::string ret = trim(body.substr(arrow + 2));
    if (ret == "Tensor[]") {
      s.variadic_results = true;
    } else if (ret.size() > 2 && ret.front() == '(' && ret.back() == ')') {
      // `(Tensor, Tensor)`: each item must be a Tensor.
      s.num_results = 0;
      for (size_t start = 1; start < ret.size();) {
        size_t comma = ret.find(',', start);
        if (comma == std::string::npos) comma = ret.size() - 1;
        if (trim(ret.substr(start, comma - start)) != "Tensor") fail("schema '{}': unsupported result type '{}'", text, ret);
        ++s.num_results;
        start = comma + 1;
      }
    } else if (ret != "Tensor") {
      fail("schema '{}': unsupported result type '{}'", text, ret);
    }
    body = body.substr(0, arrow);
  }
  size_t start = 0;
  while (start < body.size()) {
    size_t comma = body.find(',', start);
    std::string arg = trim(body.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    start = comma == std::string::npos ? body.size() : comma + 1;
    if (arg.empty()) continue;
    ArgSpec spec;
    std::string def;
    if (auto eq = arg.find('='); eq != std::string::npos) {
      def = trim(arg.substr(eq + 1));
      arg = trim(arg.substr(0, eq));
      spec.has_default = true;
    }
    auto sp = arg.find(' ');
    if (sp == std::string::npos) fail("schema '{}': argument '{}' needs a type and a name", text, arg);
    std::string type = arg.substr(0, sp);
    spec.name = trim(arg.substr(sp + 1));
    if (!type.empty() && type.back() == '?') {
      spec.optional = true;
      type.pop_back();
    }
    auto t = arg_type_from(type);
    if (!t) fail("schema '{}': unknown type '{}'", text, type);
    spec.type = *t;
    if (spec.has_default && def != "None") spec.default_value = parse_attr_literal(def);
    if (*t == ArgType::Tensor || *t == ArgType::TensorList) s.tensors.push_back(spec);
    else s.attrs.push_back(spec);
  }
  return s;
}

const ArgSpec* Schema::find_attr(std::string_view name) const {
  for (auto& a : attrs)
    if (a.name == name) return &a;
  return nullptr;
}

int Schema::min_inputs() const {
  int n = 0;
  for (auto& t : tensors) {
    if (t.type == ArgType::TensorList) return n;
    if (!t.optional) ++n;
  }
  return n;
}

int Schema::max_inputs() const {
  for (auto& t : tensors)
    if (t.type == ArgType::TensorList) return -1;
  return static_cast<int>(tensors.size());
}

std::string Schema::str() const {
  std::string out;
  auto add = [&](const ArgSpec& a) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{}{} {}", arg_type_name(a.type), a.optional ? "?" : "", a.name);
    if (a.has_default) out += "=" + (a.default_value ? attr_str(*a.default_value) : std::string("None"));
  };
  for (auto& a : tensors) add(a);
  for (auto& a : attrs) add(a);
  if (variadic_results) out += " -> Tensor[]";
  if (num_results > 1) {
    out += " -> (";
    for (int i = 0; i < num_results; ++i) out += i ? ", Tensor" : "Tensor";
    out += ")";
  }
  return out;
}

// ---- the table

namespace {
struct Registry {
  std::deque<OpInfo> ops;  // deque: references stay valid as user ops are added
  std::mutex mutex;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry;
#define KILN_OP(E, name, cat, schema, meta_fn) \
  reg->ops.push_back(OpInfo{Op::E, name, OpCategory::cat, parse_schema(schema), meta::meta_fn, {}});
#include "ir/ops.def"
#undef KILN_OP
    install_reference_kernels([reg](Op op, ReferenceFn fn) { reg->ops[static_cast<size_t>(op)].reference = std::move(fn); });
    return reg;
  }();
  return *r;
}
}  // namespace

const OpInfo& op_info(Op op) {
  auto& r = registry();
  size_t i = static_cast<size_t>(op);
  KILN_INTERNAL_ASSERT(i < r.ops.size(), "op id refers to a registered op");
  return r.ops[i];
}

const OpInfo* find_op(std::string_view name) {
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  for (auto& info : r.ops)
    if (info.name == name) return &info;
  return nullptr;
}

std::string_view op_name(Op op) { return op_info(op).name; }
std::string_view op_short_name(Op op) {
  std::string_view n = op_name(op);
  size_t colons = n.rfind("::");
  return colons == std::string_view::npos ? n : n.substr(colons + 2);
}
size_t num_ops() { return registry().ops.size(); }

Op register_op(std::string name, OpCategory category, std::string_view schema, MetaFn meta,
               ReferenceFn reference) {
  if (find_op(name)) fail("cannot register op '{}': an op of that name exists", name);
  // Identifiers, optionally namespaced ("mylib::scaled_swish"), so that .kir files lex them back.
  auto ident = [](std::string_view part) {
    if (part.empty() || !(std::isalpha(static_cast<unsigned char>(part[0])) || part[0] == '_')) return false;
    for (char c : part)
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
    return true;
  };
  for (size_t start = 0;;) {
    size_t colons = name.find("::", start);
    if (!ident(std::string_view(name).substr(start, colons == std::string::npos ? std::string::npos : colons - start)))
      fail("cannot register op '{}': a name is identifiers (a letter or '_', then letters, digits or '_') joined by '::'",
           name);
    if (colons == std::string::npos) break;
    start = colons + 2;
  }
  if (!meta) fail("cannot register op '{}': a shape-and-dtype rule is required", name);
  Schema parsed = parse_schema(schema);
  auto& r = registry();
  std::lock_guard lock(r.mutex);
  Op id = static_cast<Op>(r.ops.size());
  r.ops.push_back(OpInfo{id, std::move(name), category, std::move(parsed), std::move(meta), std::move(reference)});
  return id;
}

// ---- checking a call against the schema

namespace {
bool type_matches(ArgType t, const AttrValue& v) {
  switch (t) {
    case ArgType::Int: return std::holds_alternative<int64_t>(v);
    case ArgType::Float:
    case ArgType::Scalar: return std::holds_alternative<double>(v) || std::holds_alternative<int64_t>(v) ||
                                 std::holds_alternative<bool>(v);
    case ArgType::Bool: return std::holds_alternative<bool>(v);
    case ArgType::Str: return std::holds_alternative<std::string>(v);
    case ArgType::DType: return std::holds_alternative<DType>(v);
    case ArgType::IntList: return std::holds_alternative<IntList>(v) || std::holds_alternative<int64_t>(v);
    case ArgType::FloatList:
      return std::holds_alternative<FloatList>(v) || std::holds_alternative<IntList>(v);
    default: return false;
  }
}
}  // namespace

std::optional<std::string> attr_error(const OpInfo& info, const std::string& name, const AttrValue& v) {
  const ArgSpec* spec = info.schema.find_attr(name);
  if (!spec) {
    std::string known;
    for (auto& a : info.schema.attrs) known += (known.empty() ? "" : ", ") + a.name;
    return fmt::format("{} has no attribute '{}' (its attributes: {})", info.name, name, known.empty() ? "none" : known);
  }
  if (!type_matches(spec->type, v))
    return fmt::format("{}: attribute '{}' must be {}, got {}", info.name, name, arg_type_name(spec->type), attr_str(v));
  return std::nullopt;
}

Attrs complete_attrs(const OpInfo& info, const Attrs& given, size_t num_inputs) {
  const Schema& s = info.schema;
  int lo = s.min_inputs(), hi = s.max_inputs();
  if (static_cast<int>(num_inputs) < lo || (hi >= 0 && static_cast<int>(num_inputs) > hi)) {
    if (hi < 0) fail("{} takes at least {} tensor inputs, got {}", info.name, lo, num_inputs);
    if (lo == hi) fail("{} takes {} tensor input{}, got {}", info.name, lo, lo == 1 ? "" : "s", num_inputs);
    fail("{} takes {} to {} tensor inputs, got {}", info.name, lo, hi, num_inputs);
  }
  for (auto& [name, v] : given.all())
    if (auto err = attr_error(info, name, v)) fail("{}", *err);
  Attrs out;
  for (auto& spec : s.attrs) {
    const AttrValue* v = given.find(spec.name);
    if (!v) {
      if (spec.default_value) out.set(spec.name, *spec.default_value);
      else if (!spec.has_default && !spec.optional) fail("{}: missing attribute '{}'", info.name, spec.name);
      continue;
    }
    AttrValue val = *v;
    // Normalize: floats stored as double, lists as lists.
    if (spec.type == ArgType::Float && !std::holds_alternative<double>(val)) val = given.get_float(spec.name);
    if (spec.type == ArgType::IntList && std::holds_alternative<int64_t>(val)) val = IntList{std::get<int64_t>(val)};
    if (spec.type == ArgType::FloatList && std::holds_alternative<IntList>(val)) val = given.get_floats(spec.name);
    if (spec.type == ArgType::Scalar && std::holds_alternative<bool>(val)) val = int64_t(std::get<bool>(val));
    out.set(spec.name, std::move(val));
  }
  return out;
}

std::vector<TensorMeta> infer_meta(const OpInfo& info, std::span<const TensorMeta> inputs, const Attrs& attrs) {
  Attrs full = complete_attrs(info, attrs, inputs.size());
  try {
    return info.meta(inputs, full);
  } catch (const Error& e) {
    std::string shapes;
    for (auto& m : inputs) shapes += (shapes.empty() ? "" : ", ") + m.str();
    throw Error(fmt::format("{}({}): {}", info.name, shapes, e.what()));
  }
}

}  // namespace kiln
