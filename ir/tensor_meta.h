#pragma once
// TensorMeta: everything the compiler knows about a value before it runs: dtype, shape,
// strides (in elements) and device. Shapes are static; int64_t leaves room for large tensors.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace kiln {

using Shape = std::vector<int64_t>;
using Strides = std::vector<int64_t>;

struct Device {
  // The kinds of device: CPU and CUDA are built in; a backend for another device registers a
  // kind of its own by name (register_device_kind), as PyTorch's PrivateUse1 slot lets an
  // out-of-tree backend do, so that adding a device changes nothing here.
  enum class Kind : uint8_t { CPU, CUDA };
  Kind kind = Kind::CPU;
  int index = 0;
  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {Kind::CUDA, i}; }
  bool operator==(const Device&) const = default;
  std::string str() const;  // "cpu", "cuda:0", "<name>:0" for a registered kind
};

// A new device kind named `name` (lowercase letters, digits and '_'), or the kind already
// registered under that name; kiln::Error for a bad name or more than 250 kinds.
Device::Kind register_device_kind(std::string_view name);
// "cpu", "cuda", or a registered kind's name.
std::string device_kind_name(Device::Kind kind);
// The device that `text` names: "cpu", "cuda", "cuda:1", "<registered name>[:N]"; nullopt for
// none (the caller's message lists device_kind_names()).
std::optional<Device> parse_device(std::string_view text);
std::string device_kind_names();  // "cpu, cuda, cuda:N, ...": for messages

Strides contiguous_strides(const Shape& shape);
int64_t numel(const Shape& shape);
std::string shape_str(const Shape& shape);  // "[8,64]"

struct TensorMeta {
  DType dtype = DType::F32;
  Shape shape;
  Strides strides;  // same rank as shape
  Device device;

  TensorMeta() = default;
  TensorMeta(DType dt, Shape s, Device dev = {})
      : dtype(dt), shape(std::move(s)), strides(contiguous_strides(shape)), device(dev) {}
  TensorMeta(DType dt, Shape s, Strides st, Device dev = {})
      : dtype(dt), shape(std::move(s)), strides(std::move(st)), device(dev) {}

  int64_t rank() const { return static_cast<int64_t>(shape.size()); }
  int64_t numel() const { return kiln::numel(shape); }
  int64_t nbytes() const;  // throws kiln::Error past int64
  bool is_contiguous() const;
  TensorMeta contiguous() const { return TensorMeta(dtype, shape, device); }
  TensorMeta on(Device d) const {  // the same layout on another device
    TensorMeta m = *this;
    m.device = d;
    return m;
  }
  TensorMeta with_dtype(DType d) const { return TensorMeta(d, shape, strides, device); }

  // The text form: "f32[8,64]", with "{s0,s1}" strides when not contiguous and
  // "@cuda:0" when not on the CPU.
  std::string str() const;
  bool operator==(const TensorMeta&) const = default;
};

// The elements a layout spans in its storage, from its lowest to its highest element:
// 1 + sum over dims of (size - 1) * |stride|, 0 when it has no element; INT64_MAX where that
// overflows (a caller that allocates or plans memory then refuses it by its size).
int64_t storage_extent(const TensorMeta& meta);

// Wraps a possibly negative dim into [0, rank); throws kiln::Error naming `what` if out of range.
int64_t normalize_dim(int64_t dim, int64_t rank, const char* what = "dim");

// NumPy broadcasting of two shapes; throws kiln::Error naming both shapes when they don't broadcast.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace kiln
