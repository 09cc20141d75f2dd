// Reference kernels of creation ops: tensors made from attributes alone.
#include <cmath>

#include "ir/error.h"
#include "ir/random.h"
#include "ir/reference/kernels.h"

namespace kiln::reference {

namespace {

using In = std::span<const HostTensor>;
using Outs = std::span<const TensorMeta>;

// Stores a Scalar attribute: an int goes in exactly, a float is cast (truncated for ints).
void set_scalar(HostTensor& t, int64_t i, const AttrValue& v) {
  if (auto* iv = std::get_if<int64_t>(&v)) t.set_int(i, *iv);
  else t.set(i, std::get<double>(v));
}

ReferenceFn filled(AttrValue value) {
  return [value](In, const Attrs&, Outs outs) {
    HostTensor t = HostTensor::empty(outs[0]);
    for (int64_t i = 0; i < t.numel(); ++i) set_scalar(t, i, value);
    return std::vector<HostTensor>{t};
  };
}

// Element i is start + i*step in the dtype's accumulation type, as torch's arange kernel: in
// int64 for integer dtypes (start and step truncated to ints first), in double for floats.
std::vector<HostTensor> arange_kernel(In, const Attrs& a, Outs outs) {
  HostTensor t = HostTensor::empty(outs[0]);
  auto as_int = [&](const char* k) {
    const AttrValue& v = *a.find(k);
    if (auto* iv = std::get_if<int64_t>(&v)) return *iv;
    return static_cast<int64_t>(std::get<double>(v));
  };
  if (is_floating(t.dtype())) {
    double start = a.get_float("start"), step = a.get_float("step");
    for (int64_t i = 0; i < t.numel(); ++i) t.set(i, start + static_cast<double>(i) * step);
  } else {
    int64_t start = as_int("start"), step = as_int("step");
    if (step == 0) fail("arange step must be nonzero (step {} truncates to 0 for {})", a.get_float("step"),
                        dtype_name(t.dtype()));
    for (int64_t i = 0; i < t.numel(); ++i) t.set_int(i, start + i * step);
  }
  return {t};
}

std::vector<HostTensor> constant_kernel(In, const Attrs& a, Outs outs) {
  HostTensor t = HostTensor::empty(outs[0]);
  FloatList values = a.get_floats("values");
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[i]);
  return {t};
}

// The counter-based stream of ir/random.h: element i depends on (seed, i) only. The value is
// exact in f32 and f64 (24 random bits); f16 and bf16 round it, so the top values become 1.
std::vector<HostTensor> rand_kernel(In, const Attrs& a, Outs outs) {
  HostTensor t = HostTensor::empty(outs[0]);
  auto seed = static_cast<uint64_t>(a.get_int("seed"));
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, random_uniform(seed, static_cast<uint64_t>(i)));
  return {t};
}

}  // namespace

void install_creation(const Setter& set) {
  set(Op::Full, [](In in, const Attrs& a, Outs outs) { return filled(*a.find("fill_value"))(in, a, outs); });
  set(Op::Zeros, filled(int64_t(0)));
  set(Op::Ones, filled(int64_t(1)));
  set(Op::Arange, arange_kernel);
  set(Op::Constant, constant_kernel);
  set(Op::Rand, rand_kernel);
}

}  // namespace kiln::reference
