#include "frontend/onnx/node_context.h"

#include "frontend/onnx/tensor_proto.h"

namespace kiln::onnx {

using AP = ::onnx::AttributeProto;

std::string NodeContext::where() const {
  if (node_.name().empty()) return fmt::format("node ({}, output '{}')", node_.op_type(), node_.output_size() ? node_.output(0) : "");
  return fmt::format("node '{}' ({})", node_.name(), node_.op_type());
}

namespace {

// A refusal in a few words: without the explanation after a ';' and without parenthesized
// asides ("its shape (input 1) is computed at run time; kiln needs..." -> "its shape is
// computed at run time").
std::string brief(const std::string& what) {
  std::string s = what.substr(0, what.find(';')), out;
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '(' && i > 0 && s[i - 1] == ' ' && depth++ == 0) out.pop_back();
    else if (depth == 0) out += s[i];
    else if (s[i] == ')') --depth;
  }
  return out;
}

}  // namespace

void NodeContext::unsupported(const std::string& what) const {
  throw Unsupported(fmt::format("{}: {}", where(), what), {op_type() + ": " + brief(what)});
}
void NodeContext::run_time_input(size_t i, const char* what) const {
  std::string message = fmt::format("its {} (input {}) is computed at run time; kiln needs it known at import "
                                    "(a constant, an initializer, or a shape computation that folds)", what, i);
  throw Unsupported(fmt::format("{}: {}", where(), message), {op_type() + ": " + brief(message)}, {node_.input(static_cast<int>(i))});
}

void NodeContext::error(const std::string& what) const { throw Error(fmt::format("{}: {}", where(), what)); }

Var constant_1d(Builder& b, const std::vector<double>& values, DType dtype) {
  Attrs a;
  a.set("size", IntList{static_cast<int64_t>(values.size())});
  a.set("dtype", dtype);
  a.set("values", FloatList(values.begin(), values.end()));
  return b.op(Op::Constant, {}, a);
}

TensorMeta NodeContext::meta(size_t i) const {
  if (!has(i)) error(fmt::format("input {} is missing", i));
  return inputs_[i]->meta();
}

Var NodeContext::in(size_t i) {
  if (!has(i)) error(fmt::format("input {} is missing", i));
  Slot& s = *inputs_[i];
  if (!s.value) s.value = materialize_(s);
  return b.wrap(s.value);
}

std::vector<Value> NodeContext::present_inputs() {
  std::vector<Value> out;
  for (size_t i = 0; i < inputs_.size(); ++i)
    if (has(i)) out.push_back(in(i));
  return out;
}

const HostTensor* NodeContext::known(size_t i) const {
  if (!has(i) || !inputs_[i]->known) return nullptr;
  return &*inputs_[i]->known;
}

IntList NodeContext::known_ints(size_t i, const char* what) const {
  const HostTensor* t = known(i);
  if (!t) {
    if (!has(i)) error(fmt::format("its {} (input {}) is missing", what, i));
    run_time_input(i, what);
  }
  if (is_floating(t->dtype())) error(fmt::format("its {} (input {}) must be integers, got {}", what, i, dtype_name(t->dtype())));
  return t->to_ints();
}

std::vector<double> NodeContext::known_doubles(size_t i, const char* what) const {
  const HostTensor* t = known(i);
  if (!t)
    run_time_input(i, what);
  return t->to_doubles();
}

const AP* NodeContext::find_attr(const std::string& name) const {
  for (const AP& a : node_.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

bool NodeContext::has_attr(const std::string& name) const { return find_attr(name) != nullptr; }

const AP* NodeContext::attr(const std::string& name) {
  read_.insert(name);
  return find_attr(name);
}

int64_t NodeContext::attr_int(const std::string& name, std::optional<int64_t> dflt) {
  const AP* a = attr(name);
  if (!a) {
    if (!dflt) error(fmt::format("needs attribute '{}'", name));
    return *dflt;
  }
  if (a->type() != AP::INT) error(fmt::format("attribute '{}' must be an int", name));
  return a->i();
}

double NodeContext::attr_float(const std::string& name, std::optional<double> dflt) {
  const AP* a = attr(name);
  if (!a) {
    if (!dflt) error(fmt::format("needs attribute '{}'", name));
    return *dflt;
  }
  if (a->type() == AP::INT) return static_cast<double>(a->i());
  if (a->type() != AP::FLOAT) error(fmt::format("attribute '{}' must be a float", name));
  return a->f();
}

std::string NodeContext::attr_string(const std::string& name, std::optional<std::string> dflt) {
  const AP* a = attr(name);
  if (!a) {
    if (!dflt) error(fmt::format("needs attribute '{}'", name));
    return *dflt;
  }
  if (a->type() != AP::STRING) error(fmt::format("attribute '{}' must be a string", name));
  return a->s();
}

IntList NodeContext::attr_ints(const std::string& name, std::optional<IntList> dflt) {
  const AP* a = attr(name);
  if (!a) {
    if (!dflt) error(fmt::format("needs attribute '{}'", name));
    return *dflt;
  }
  if (a->type() == AP::INT) return {a->i()};
  if (a->type() != AP::INTS) error(fmt::format("attribute '{}' must be a list of ints", name));
  return IntList(a->ints().begin(), a->ints().end());
}

std::vector<double> NodeContext::attr_floats(const std::string& name, std::optional<std::vector<double>> dflt) {
  const AP* a = attr(name);
  if (!a) {
    if (!dflt) error(fmt::format("needs attribute '{}'", name));
    return *dflt;
  }
  if (a->type() == AP::FLOAT) return {a->f()};
  if (a->type() != AP::FLOATS) error(fmt::format("attribute '{}' must be a list of floats", name));
  return std::vector<double>(a->floats().begin(), a->floats().end());
}

void NodeContext::require_attr_int(const std::string& name, int64_t expected, const char* why) {
  if (!has_attr(name)) {
    read_.insert(name);
    return;
  }
  int64_t v = attr_int(name);
  if (v != expected) unsupported(fmt::format("attribute {}={} is not supported ({})", name, v, why));
}

void NodeContext::check_attributes_read() const {
  for (const AP& a : node_.attribute())
    if (!read_.count(a.name())) unsupported(fmt::format("attribute '{}' is not supported", a.name()));
}

int64_t normalize_axis(const NodeContext& c, int64_t axis, int64_t rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= std::max<int64_t>(rank, 1) || (rank == 0 && axis != 0 && axis != -1))
    c.error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  return a;
}

}  // namespace kiln::onnx
