#include "ir/tensor_meta.h"

#include <limits>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "ir/error.h"

namespace kiln {

namespace {

// Kind k's name at [k]; CPU and CUDA first. Registration is rare (a backend's start-up) and
// reading is in messages only, so one lock serves both.
std::mutex g_kinds_mu;
std::vector<std::string>& kind_names() {
  static std::vector<std::string> names{"cpu", "cuda"};
  return names;
}

}  // namespace

Device::Kind register_device_kind(std::string_view name) {
  if (name.empty() || name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") != std::string_view::npos)
    fail("register_device_kind: '{}' is not a device name (lowercase letters, digits and '_')", name);
  std::lock_guard lock(g_kinds_mu);
  std::vector<std::string>& names = kind_names();
  for (size_t k = 0; k < names.size(); ++k)
    if (names[k] == name) return static_cast<Device::Kind>(k);
  if (names.size() >= 250) fail("register_device_kind: too many device kinds (250) to add '{}'", name);
  names.emplace_back(name);
  return static_cast<Device::Kind>(names.size() - 1);
}

std::string device_kind_name(Device::Kind kind) {
  std::lock_guard lock(g_kinds_mu);
  const std::vector<std::string>& names = kind_names();
  size_t k = static_cast<size_t>(kind);
  return k < names.size() ? names[k] : fmt::format("device_kind_{}", k);
}

std::optional<Device> parse_device(std::string_view text) {
  std::string_view name = text.substr(0, text.find(':'));
  int index = 0;
  if (name.size() < text.size()) {
    std::string_view n = text.substr(name.size() + 1);
    if (n.empty() || n.size() > 3 || n.find_first_not_of("0123456789") != std::string_view::npos) return std::nullopt;
    index = std::stoi(std::string(n));
  }
  std::lock_guard lock(g_kinds_mu);
  const std::vector<std::string>& names = kind_names();
  for (size_t k = 0; k < names.size(); ++k)
    if (names[k] == name) {
      if (k == 0 && index != 0) return std::nullopt;  // one CPU: "cpu:1" names nothing
      return Device{static_cast<Device::Kind>(k), index};
    }
  return std::nullopt;
}

std::string device_kind_names() {
  std::lock_guard lock(g_kinds_mu);
  std::string out = "cpu, cuda, cuda:N";
  for (size_t k = 2; k < kind_names().size(); ++k) out += ", " + kind_names()[k] + "[:N]";
  return out;
}

std::string Device::str() const {
  if (kind == Kind::CPU) return "cpu";
  return fmt::format("{}:{}", device_kind_name(kind), index);
}

namespace {
// Shapes come from user text and user code: a product past int64 is an error, not UB.
int64_t checked_mul(int64_t a, int64_t b, const Shape& shape) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) fail("shape {} has too many elements (more than 2^63)", shape_str(shape));
  return r;
}
}  // namespace

Strides contiguous_strides(const Shape& shape) {
  Strides s(shape.size());
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = acc;
    acc = checked_mul(acc, std::max<int64_t>(shape[i], 1), shape);
  }
  return s;
}

int64_t numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n = checked_mul(n, d, shape);
  return n;
}

int64_t storage_extent(const TensorMeta& meta) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (meta.numel() == 0) return 0;
  int64_t extent = 1;
  for (size_t d = 0; d < meta.shape.size(); ++d) {
    const int64_t stride = meta.strides[d] < 0 ? -meta.strides[d] : meta.strides[d];
    int64_t step;
    if (__builtin_mul_overflow(meta.shape[d] - 1, stride, &step) || __builtin_add_overflow(extent, step, &extent)) return kMax;
  }
  return extent;
}

std::string shape_str(const Shape& shape) { return fmt::format("[{}]", fmt::join(shape, ",")); }

int64_t TensorMeta::nbytes() const {
  int64_t r;
  if (__builtin_mul_overflow(numel(), dtype_size(dtype), &r))
    fail("a {}{} tensor holds more than 2^63 bytes", dtype_name(dtype), shape_str(shape));
  return r;
}

bool TensorMeta::is_contiguous() const {
  // Size-1 dims may have any stride, as in PyTorch.
  int64_t expected = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    if (shape[i] == 0) return true;
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::string TensorMeta::str() const {
  std::string s = fmt::format("{}{}", dtype_name(dtype), shape_str(shape));
  if (strides != contiguous_strides(shape)) s += fmt::format("{{{}}}", fmt::join(strides, ","));
  if (device.kind != Device::Kind::CPU) s += "@" + device.str();
  return s;
}

int64_t normalize_dim(int64_t dim, int64_t rank, const char* what) {
  int64_t r = std::max<int64_t>(rank, 1);  // a 0-d tensor accepts dim 0 and -1, as in PyTorch
  if (dim < -r || dim >= r)
    fail("{} {} is out of range for a tensor of rank {} (expected in [{}, {}])", what, dim, rank, -r, r - 1);
  return dim < 0 ? dim + r : dim;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1)
      fail("shapes {} and {} do not broadcast (dim {}: {} vs {})", shape_str(a), shape_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln
