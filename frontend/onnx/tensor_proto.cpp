#include "frontend/onnx/tensor_proto.h"

#include <cstring>
#include <filesystem>
#include <fstream>

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

namespace {

// The bytes of a tensor stored outside the model: its external_data entries say the file (relative
// to the model's folder), the offset and the length.
std::string read_external(const TP& t, const std::string& what, const std::string& model_dir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    if (kv.key() == "location") location = kv.value();
    else if (kv.key() == "offset") offset = std::stoll(kv.value());
    else if (kv.key() == "length") length = std::stoll(kv.value());
  }
  if (location.empty()) fail("{}: its external data names no file", what);
  if (model_dir.empty()) fail("{}: its data is stored outside the model ('{}'); load the model from its file", what, location);
  if (location.find("..") != std::string::npos || (!location.empty() && location[0] == '/'))
    fail("{}: external data file '{}' must lie in the model's folder", what, location);
  std::string path = (std::filesystem::path(model_dir) / location).string();
  std::ifstream f(path, std::ios::binary);
  if (!f) fail("{}: cannot open its external data file '{}'", what, path);
  f.seekg(0, std::ios::end);
  int64_t size = f.tellg();
  if (length < 0) length = size - offset;
  if (offset < 0 || offset + length > size)
    fail("{}: external data at offset {} of length {} lies past the end of '{}' ({} bytes)", what, offset, length, path, size);
  std::string bytes(static_cast<size_t>(length), '\0');
  f.seekg(offset);
  f.read(bytes.data(), length);
  return bytes;
}

}  // namespace

HostTensor to_host_tensor(const TP& t, const std::string& what, const std::string& model_dir) {
  std::optional<DType> dt = dtype_of(t.data_type());
  if (!dt)
    throw Unsupported(fmt::format("{}: element type {} is not supported (kiln has f16, bf16, f32, f64, i32, i64 and bool)",
                                  what, elem_type_name(t.data_type())),
                      {"element type " + elem_type_name(t.data_type())});
  if (t.segment().begin() != 0 || t.segment().end() != 0) fail("{}: segmented tensors are not supported", what);
  Shape shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0) fail("{}: negative dim {} in its shape", what, d);
  HostTensor out = HostTensor::empty(*dt, shape);
  int64_t n = out.numel();
  bool external = t.data_location() == TP::EXTERNAL;
  if (external || !t.raw_data().empty()) {
    // raw_data and external data: little-endian, the element type's own layout (bool one
    // byte, f16/bf16 two).
    std::string ext = external ? read_external(t, what, model_dir) : std::string();
    const std::string& raw = external ? ext : t.raw_data();
    if (static_cast<int64_t>(raw.size()) != out.nbytes())
      fail("{}: {} holds {} bytes, its shape {} of {} needs {}", what, external ? "its external data" : "raw_data", raw.size(),
           shape_str(shape), elem_type_name(t.data_type()), out.nbytes());
    if (n > 0) std::memcpy(out.data(), raw.data(), out.nbytes());
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
