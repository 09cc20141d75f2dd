#include "ir/attr.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>

#include "ir/error.h"

namespace kiln {

std::string format_double(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);  // shortest round-trip form
  std::string s(buf, end);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

namespace {
template <typename T>
std::string list_str(const std::vector<T>& v, auto&& fmt_one) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + fmt_one(v[i]);
  return s + "]";
}
}  // namespace

std::string attr_str(const AttrValue& v) {
  struct V {
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const { return format_double(d); }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(const std::string& s) const {
      std::string out = "\"";
      for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        if (c == '\n') { out += "\\n"; continue; }
        out += c;
      }
      return out + "\"";
    }
    std::string operator()(DType t) const { return std::string(dtype_name(t)); }
    std::string operator()(const IntList& l) const {
      return list_str(l, [](int64_t i) { return std::to_string(i); });
    }
    std::string operator()(const FloatList& l) const { return list_str(l, format_double); }
  };
  return std::visit(V{}, v);
}

namespace {
// Attribute values are compared as written: nan equals nan, and -0.0 differs from 0.0
// (1/x tells them apart, so CSE must not merge them and the printer must not drop -0.0).
bool same_double(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}
}  // namespace

bool attr_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (auto* da = std::get_if<double>(&a)) return same_double(*da, std::get<double>(b));
  if (auto* la = std::get_if<FloatList>(&a)) {
    const auto& lb = std::get<FloatList>(b);
    if (la->size() != lb.size()) return false;
    for (size_t i = 0; i < la->size(); ++i)
      if (!same_double((*la)[i], lb[i])) return false;
    return true;
  }
  return a == b;
}

bool Attrs::operator==(const Attrs& o) const {
  if (values_.size() != o.values_.size()) return false;
  for (auto& [k, v] : values_) {
    auto it = o.values_.find(k);
    if (it == o.values_.end() || !attr_equal(v, it->second)) return false;
  }
  return true;
}

const AttrValue* Attrs::find(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

namespace {
const AttrValue& need(const Attrs& a, const std::string& name) {
  const AttrValue* v = a.find(name);
  if (!v) fail("missing attribute '{}'", name);
  return *v;
}
[[noreturn]] void wrong_type(const std::string& name, const char* want, const AttrValue& v) {
  fail("attribute '{}' must be {}, got {}", name, want, attr_str(v));
}
}  // namespace

int64_t Attrs::get_int(const std::string& name) const {
  const AttrValue& v = need(*this, name);
  if (auto* i = std::get_if<int64_t>(&v)) return *i;
  wrong_type(name, "an integer", v);
}
double Attrs::get_float(const std::string& name) const {
  const AttrValue& v = need(*this, name);
  if (auto* d = std::get_if<double>(&v)) return *d;
  if (auto* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  if (auto* b = std::get_if<bool>(&v)) return *b ? 1.0 : 0.0;
  wrong_type(name, "a number", v);
}
bool Attrs::get_bool(const std::string& name) const {
  const AttrValue& v = need(*this, name);
  if (auto* b = std::get_if<bool>(&v)) return *b;
  wrong_type(name, "a boolean", v);
}
const std::string& Attrs::get_string(const std::string& name) const {
  const AttrValue& v = need(*this, name);
  if (auto* s = std::get_if<std::string>(&v)) return *s;
  wrong_type(name, "a string", v);
}
DType Attrs::get_dtype(const std::string& name) const {
  const AttrValue& v = need(*this, name);
  if (auto* t = std::get_if<DType>(&v)) return *t;
  wrong_type(name, "a dtype", v);
}
IntList Attrs::get_ints(const std::string& name) const {
  const AttrValue& v = need(*this, name);
  if (auto* l = std::get_if<IntList>(&v)) return *l;
  if (auto* i = std::get_if<int64_t>(&v)) return {*i};
  wrong_type(name, "a list of integers", v);
}
FloatList Attrs::get_floats(const std::string& name) const {
  const AttrValue& v = need(*this, name);
  if (auto* l = std::get_if<FloatList>(&v)) return *l;
  if (auto* l = std::get_if<IntList>(&v)) return FloatList(l->begin(), l->end());
  wrong_type(name, "a list of numbers", v);
}
std::optional<int64_t> Attrs::opt_int(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return get_int(name);
}
std::optional<double> Attrs::opt_float(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return get_float(name);
}
std::optional<DType> Attrs::opt_dtype(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return get_dtype(name);
}
std::optional<IntList> Attrs::opt_ints(const std::string& name) const {
  if (!has(name)) return std::nullopt;
  return get_ints(name);
}

}  // namespace kiln
