#include "frontend/onnx/tensor_proto.h"

#include <cstring>

#include "ir/error.h"
#include "frontend/onnx/onnx.h"

namespace kiln::onnx {

using TP = ::onnx::TensorProto;

std::optional<DType> dtype_of(int t) {
  switch (t) {
    case TP::FLOAT: return DType::F32;
    case TP::DOUBLE: return DType::F64;
    case TP::FLOAT16: return DType::F16;
    case TP::BFLOAT16: return DType::BF16;
    case TP::INT32: return DType::I32;
    case TP::INT64: return DType::I64;
    case TP::BOOL: return DType::Bool;
    default: return std::nullopt;
  }
}

std::string elem_type_name(int t) {
  if (TP::DataType_IsValid(t)) return TP::DataType_Name(static_cast<TP::DataType>(t));
  return fmt::format("element type {}", t);
}

int elem_type_of(DType dt) {
  switch (dt) {
    case DType::F32: return TP::FLOAT;
    case DType::F64: return TP::DOUBLE;
    case DType::F16: return TP::FLOAT16;
    case DType::BF16: return TP::BFLOAT16;
    case DType::I32: return TP::INT32;
    case DType::I64: return TP::INT64;
    case DType::Bool: return TP::BOOL;
  }
  return TP::UNDEFINED;
}

HostTensor to_host_tensor(const TP& t, const std::string& what) {
  std::optional<DType> dt = dtype_of(t.data_type());
  if (!dt)
    throw Unsupported(fmt::format("{}: element type {} is not supported (kiln has f16, bf16, f32, f64, i32, i64 and bool)",
                                  what, elem_type_name(t.data_type())));
  if (t.data_location() == TP::EXTERNAL)
    fail("{}: its data is stored outside the model (external data); save the model with its weights inside it", what);
  if (t.segment().begin() != 0 || t.segment().end() != 0) fail("{}: segmented tensors are not supported", what);
  Shape shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0) fail("{}: negative dim {} in its shape", what, d);
  HostTensor out = HostTensor::empty(*dt, shape);
  int64_t n = out.numel();
  if (!t.raw_data().empty()) {
    // raw_data: little-endian, the element type's own layout (bool one byte, f16/bf16 two).
    if (static_cast<int64_t>(t.raw_data().size()) != out.nbytes())
      fail("{}: raw_data holds {} bytes, its shape {} of {} needs {}", what, t.raw_data().size(), shape_str(shape),
           elem_type_name(t.data_type()), out.nbytes());
    if (n > 0) std::memcpy(out.data(), t.raw_data().data(), out.nbytes());
    return out;
  }
  auto check = [&](int64_t have) {
    if (have != n) fail("{}: holds {} values, its shape {} needs {}", what, have, shape_str(shape), n);
  };
  switch (*dt) {
    case DType::F32:
      check(t.float_data_size());
      for (int64_t i = 0; i < n; ++i) out.set(i, t.float_data(i));
      break;
    case DType::F64:
      check(t.double_data_size());
      for (int64_t i = 0; i < n; ++i) out.set(i, t.double_data(i));
      break;
    case DType::I64:
      check(t.int64_data_size());
      for (int64_t i = 0; i < n; ++i) out.set_int(i, t.int64_data(i));
      break;
    case DType::I32:
    case DType::Bool:
      check(t.int32_data_size());
      for (int64_t i = 0; i < n; ++i) out.set_int(i, t.int32_data(i));
      break;
    case DType::F16:
    case DType::BF16: {
      // int32_data holds each value's 16 bits.
      check(t.int32_data_size());
      auto* bits = static_cast<uint16_t*>(out.data());
      for (int64_t i = 0; i < n; ++i) bits[i] = static_cast<uint16_t>(t.int32_data(i));
      break;
    }
  }
  return out;
}

}  // namespace kiln::onnx
