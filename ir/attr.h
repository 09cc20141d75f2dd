#pragma once
// Typed node attributes: integers, floats (inf, -inf, nan allowed), booleans, strings,
// dtypes and lists. An Attrs holds them by name; the op's schema says which exist.
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using IntList = std::vector<int64_t>;
using FloatList = std::vector<double>;
using AttrValue = std::variant<int64_t, double, bool, std::string, DType, IntList, FloatList>;

// Text form of a value: 3, 1.5, inf, -inf, nan, true, "tanh", f32, [0,1]. Floats always
// print with a '.', an exponent or a name, so they parse back as floats.
std::string attr_str(const AttrValue& v);
std::string format_double(double d);  // shortest text that parses back to the same double
bool attr_equal(const AttrValue& a, const AttrValue& b);  // nan == nan and -0.0 != 0.0, unlike operator==

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : values_(init) {}

  bool has(const std::string& name) const { return values_.count(name) != 0; }
  void set(const std::string& name, AttrValue v) { values_[name] = std::move(v); }
  void erase(const std::string& name) { values_.erase(name); }
  const AttrValue* find(const std::string& name) const;

  // Typed getters; throw kiln::Error if missing or of another type. get_float accepts ints.
  int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  DType get_dtype(const std::string& name) const;
  IntList get_ints(const std::string& name) const;  // accepts a single int as a one-element list
  FloatList get_floats(const std::string& name) const;

  std::optional<int64_t> opt_int(const std::string& name) const;
  std::optional<double> opt_float(const std::string& name) const;
  std::optional<DType> opt_dtype(const std::string& name) const;
  std::optional<IntList> opt_ints(const std::string& name) const;

  const std::map<std::string, AttrValue>& all() const { return values_; }
  bool operator==(const Attrs& o) const;

 private:
  std::map<std::string, AttrValue> values_;
};

}  // namespace kiln
