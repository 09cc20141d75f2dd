#include "ir/host_tensor.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include <unistd.h>

#include "ir/error.h"
#include "ir/for_chunks.h"
#include "ir/half.h"
#include "ir/random.h"

namespace kiln {

namespace {
int64_t physical_memory_bytes() {
  static const int64_t bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * sysconf(_SC_PAGE_SIZE);
  return bytes;
}
}  // namespace

HostTensor HostTensor::borrow(const TensorMeta& meta, void* data) {
  HostTensor t;
  t.meta_ = TensorMeta(meta.dtype, meta.shape, meta.device);
  t.storage_ = std::shared_ptr<std::byte[]>(static_cast<std::byte*>(data), [](std::byte*) {});
  return t;
}

HostTensor HostTensor::uninitialized(const TensorMeta& meta) {
  HostTensor t;
  t.meta_ = TensorMeta(meta.dtype, meta.shape, meta.device);
  // Linux overcommits, so an allocation larger than the machine would "succeed" and writing
  // it would then be killed by the OOM killer: refuse it up front with a message.
  int64_t bytes = t.meta_.nbytes();
  if (bytes > physical_memory_bytes())
    fail("a {} tensor needs {:.1f} GiB, more than this machine's {:.1f} GiB of memory", t.meta_.str(),
         bytes / 1073741824.0, physical_memory_bytes() / 1073741824.0);
  try {
    // 64-byte aligned (a cache line; what the kernels' vector loads like), not value-initialized.
    auto* p = static_cast<std::byte*>(::operator new[](static_cast<size_t>(bytes), std::align_val_t{kStorageAlignment}));
    t.storage_ = std::shared_ptr<std::byte[]>(p, [](std::byte* q) { ::operator delete[](q, std::align_val_t{kStorageAlignment}); });
  } catch (const std::bad_alloc&) {
    fail("out of memory allocating {} bytes for a {} tensor", bytes, t.meta_.str());
  }
  return t;
}

HostTensor HostTensor::empty(const TensorMeta& meta) {
  HostTensor t = uninitialized(meta);
  std::memset(t.storage_.get(), 0, static_cast<size_t>(t.nbytes()));
  return t;
}

HostTensor HostTensor::from_doubles(DType dt, const Shape& shape, std::span<const double> values) {
  HostTensor t = empty(dt, shape);
  if (static_cast<int64_t>(values.size()) != t.numel())
    fail("{} values given for a tensor of shape {} ({} elements)", values.size(), shape_str(shape), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) t.set(i, values[i]);
  return t;
}

HostTensor HostTensor::from_ints(DType dt, const Shape& shape, std::span<const int64_t> values) {
  HostTensor t = empty(dt, shape);
  if (static_cast<int64_t>(values.size()) != t.numel())
    fail("{} values given for a tensor of shape {} ({} elements)", values.size(), shape_str(shape), t.numel());
  for (int64_t i = 0; i < t.numel(); ++i) t.set_int(i, values[i]);
  return t;
}

HostTensor HostTensor::view(const TensorMeta& meta, int64_t offset) const {
  HostTensor t = *this;
  t.meta_ = meta;
  t.offset_ = offset;
  return t;
}

HostTensor HostTensor::contiguous() const {
  if (is_contiguous()) return *this;
  return to(dtype());
}

HostTensor HostTensor::to(DType dt) const {
  HostTensor out = empty(TensorMeta(dt, shape(), meta_.device));
  bool exact_int = !is_floating(dt) && !is_floating(dtype());
  for (int64_t i = 0; i < numel(); ++i) {
    if (exact_int) out.set_int(i, get_int(i));
    else out.set(i, get(i));
  }
  return out;
}

HostTensor HostTensor::laid_out(const Strides& strides, DType dt) const {
  const TensorMeta want(dt, shape(), strides, meta_.device);
  if (want.is_contiguous() || numel() == 0) return to(dt);
  int64_t base = 0;  // negative strides start from the far end
  for (size_t d = 0; d < shape().size(); ++d)
    if (strides[d] < 0) base -= (shape()[d] - 1) * strides[d];
  HostTensor out = empty(dt, {storage_extent(want)}).view(want, base);
  const bool exact_int = !is_floating(dt) && !is_floating(dtype());
  for (int64_t i = 0; i < numel(); ++i) {
    if (exact_int) out.set_int(i, get_int(i));
    else out.set(i, get(i));
  }
  return out;
}

int64_t HostTensor::element_offset(int64_t i) const {
  int64_t off = offset_;
  for (int64_t d = rank() - 1; d >= 0; --d) {
    int64_t n = meta_.shape[d];
    off += (i % n) * meta_.strides[d];
    i /= n;
  }
  return off;
}

namespace {
template <typename T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T>
void store(std::byte* p, T v) {
  std::memcpy(p, &v, sizeof(T));
}
// Float to int truncates toward zero; NaN and out-of-range values give the type's minimum,
// as x86's cvttsd2si does (and so PyTorch on x86), instead of C++'s undefined behaviour.
template <typename I>
I float_to_int(double v) {
  constexpr double lo = static_cast<double>(std::numeric_limits<I>::min());
  constexpr double hi = -lo;  // 2^31 or 2^63, exactly representable
  if (!(v > lo - 1 && v < hi)) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}
}  // namespace

double HostTensor::get(int64_t i) const {
  const std::byte* p = storage_.get() + element_offset(i) * dtype_size(dtype());
  switch (dtype()) {
    case DType::Bool: return load<uint8_t>(p) ? 1.0 : 0.0;
    case DType::I32: return load<int32_t>(p);
    case DType::I64: return static_cast<double>(load<int64_t>(p));
    case DType::F16: return half_bits_to_float(load<uint16_t>(p));
    case DType::BF16: return bf16_bits_to_float(load<uint16_t>(p));
    case DType::F32: return load<float>(p);
    case DType::F64: return load<double>(p);
  }
  return 0;
}

int64_t HostTensor::get_int(int64_t i) const {
  const std::byte* p = storage_.get() + element_offset(i) * dtype_size(dtype());
  switch (dtype()) {
    case DType::Bool: return load<uint8_t>(p) ? 1 : 0;
    case DType::I32: return load<int32_t>(p);
    case DType::I64: return load<int64_t>(p);
    default: return static_cast<int64_t>(get(i));  // truncation toward zero, as a cast does
  }
}

void HostTensor::set(int64_t i, double v) {
  std::byte* p = storage_.get() + element_offset(i) * dtype_size(dtype());
  switch (dtype()) {
    case DType::Bool: store<uint8_t>(p, v != 0.0); break;
    case DType::I32: store<int32_t>(p, float_to_int<int32_t>(v)); break;
    case DType::I64: store<int64_t>(p, float_to_int<int64_t>(v)); break;
    case DType::F16: store<uint16_t>(p, float_to_half_bits(static_cast<float>(v))); break;
    case DType::BF16: store<uint16_t>(p, float_to_bf16_bits(static_cast<float>(v))); break;
    case DType::F32: store<float>(p, static_cast<float>(v)); break;
    case DType::F64: store<double>(p, v); break;
  }
}

void HostTensor::set_int(int64_t i, int64_t v) {
  std::byte* p = storage_.get() + element_offset(i) * dtype_size(dtype());
  switch (dtype()) {
    case DType::Bool: store<uint8_t>(p, v != 0); break;
    case DType::I32: store<int32_t>(p, static_cast<int32_t>(v)); break;
    case DType::I64: store<int64_t>(p, v); break;
    default: set(i, static_cast<double>(v)); break;
  }
}

void* HostTensor::data() {
  KILN_INTERNAL_ASSERT(is_contiguous(), "raw data access is to contiguous tensors");
  return storage_.get() + offset_ * dtype_size(dtype());
}
const void* HostTensor::data() const {
  KILN_INTERNAL_ASSERT(is_contiguous(), "raw data access is to contiguous tensors");
  return storage_.get() + offset_ * dtype_size(dtype());
}

std::vector<double> HostTensor::to_doubles() const {
  std::vector<double> out(numel());
  for (int64_t i = 0; i < numel(); ++i) out[i] = get(i);
  return out;
}

std::vector<int64_t> HostTensor::to_ints() const {
  std::vector<int64_t> out(numel());
  for (int64_t i = 0; i < numel(); ++i) out[i] = get_int(i);
  return out;
}

HostTensor random_tensor(const TensorMeta& meta, uint64_t seed, int64_t int_bound) {
  HostTensor t = HostTensor::empty(meta);
  // Element i's value depends on (seed, i) alone (counter-based): chunks on several cores give
  // the same tensor.
  for_chunks(t.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      uint64_t idx = static_cast<uint64_t>(i);
      switch (dtype_kind(meta.dtype)) {
        case DTypeKind::Floating: t.set(i, 2.0 * random_uniform(seed, idx) - 1.0); break;
        case DTypeKind::Integral:
          t.set_int(i, static_cast<int64_t>(random_bits(seed, idx) % static_cast<uint64_t>(std::max<int64_t>(int_bound, 1))));
          break;
        case DTypeKind::Bool: t.set_int(i, random_bits(seed, idx) & 1u); break;
      }
    }
  });
  return t;
}

}  // namespace kiln
