#pragma once
// The op registry: the rows of ir/ops.def, plus ops registered by users at run time.
// Each OpInfo carries the op's schema, category, shape-and-dtype rule and reference kernel;
// later stages (derivatives, decompositions, emitters) key their own tables by Op.
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/attr.h"
#include "ir/tensor_meta.h"

namespace kiln {

enum class Op : uint16_t {
#define KILN_OP(E, name, cat, schema, meta) E,
#include "ir/ops.def"
#undef KILN_OP
  NumBuiltin
};

// Gather: reads another tensor through an index tensor (fusable like pointwise).
// Scatter: accumulates into its result through an index tensor (a kernel of its own).
// Opaque: a custom op with kernels of its own (frontend/custom_op.h): a call, never fused.
enum class OpCategory { Placeholder, Pointwise, Reduction, View, Matmul, Composite, Creation, Gather, Scatter, Opaque, Collective, Attention, Sort };
std::string_view category_name(OpCategory c);

enum class ArgType { Tensor, TensorList, Int, Float, Scalar, Bool, Str, DType, IntList, FloatList };
std::string_view arg_type_name(ArgType t);  // as schemas write it: "Tensor", "float", "int[]", ...
// int, float, Scalar, bool: the attributes a custom op's scalar expression reads by name and its
// CUDA kernel receives as doubles.
inline bool is_numeric(ArgType t) { return t == ArgType::Int || t == ArgType::Float || t == ArgType::Scalar || t == ArgType::Bool; }

struct ArgSpec {
  std::string name;
  ArgType type;
  bool optional = false;                    // `?`: may be None (absent)
  std::optional<AttrValue> default_value;   // `=value`; None defaults leave the attr absent
  bool has_default = false;                 // `=...` given (including `=None`)
};

struct Schema {
  std::vector<ArgSpec> tensors;  // positional inputs
  std::vector<ArgSpec> attrs;    // named attributes
  bool variadic_results = false; // `-> Tensor[]`
  int num_results = 1;            // `-> (Tensor, Tensor)`: a fixed number of results
  const ArgSpec* find_attr(std::string_view name) const;
  int min_inputs() const;  // inputs that must be present
  int max_inputs() const;  // -1: any number (Tensor[])
  std::string str() const;
};
Schema parse_schema(std::string_view text);  // throws kiln::Error on a malformed schema

class HostTensor;
using MetaFn = std::function<std::vector<TensorMeta>(std::span<const TensorMeta>, const Attrs&)>;
// A reference kernel: the definition of what the op computes; everything compiled is checked
// against it. It receives the inferred output metas and returns contiguous outputs.
using ReferenceFn = std::function<std::vector<HostTensor>(std::span<const HostTensor>, const Attrs&,
                                                          std::span<const TensorMeta>)>;

struct OpInfo {
  Op op;
  std::string name;
  OpCategory category;
  Schema schema;
  MetaFn meta;
  ReferenceFn reference;  // set by ir/reference/*; empty until then
};

const OpInfo& op_info(Op op);
const OpInfo* find_op(std::string_view name);
std::string_view op_name(Op op);
// The name without its namespace ("scaled_swish" for "mylib::scaled_swish"): what results of
// the op are named after, since value names are plain identifiers.
std::string_view op_short_name(Op op);
size_t num_ops();  // built-in and registered

// Registers a user op (same table, same rules). Throws kiln::Error if the name is taken.
Op register_op(std::string name, OpCategory category, std::string_view schema, MetaFn meta,
               ReferenceFn reference);

// Checks the inputs' count and the attributes against the schema, fills in defaults, checks
// attribute types and normalizes ints given for floats; returns the completed attributes.
// Errors name the op and the attribute.
Attrs complete_attrs(const OpInfo& info, const Attrs& given, size_t num_inputs);

// Why `value` does not fit attribute `name` of the op (unknown name or wrong type), or
// nullopt when it fits; used to point parse errors at the attribute itself.
std::optional<std::string> attr_error(const OpInfo& info, const std::string& name, const AttrValue& value);

// complete_attrs + the op's meta rule: the result types of a call.
std::vector<TensorMeta> infer_meta(const OpInfo& info, std::span<const TensorMeta> inputs, const Attrs& attrs);

}  // namespace kiln
