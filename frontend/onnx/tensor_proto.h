#pragma once
// ONNX TensorProto <-> kiln tensors: element types, and the data as raw bytes or typed fields.
#include <optional>
#include <string>

#include <onnx/onnx_pb.h>

#include "ir/dtype.h"
#include "ir/host_tensor.h"

namespace kiln::onnx {

// kiln's dtype for an ONNX element type (TensorProto::DataType), nullopt for one kiln has no
// dtype for (uint8, int8, int16, uint32, uint64, string, complex).
std::optional<DType> dtype_of(int onnx_elem_type);
// "FLOAT", "UINT8", ... for messages.
std::string elem_type_name(int onnx_elem_type);
int elem_type_of(DType dt);

// The tensor a TensorProto holds; kiln::Error naming `what` (the initializer, the node) for an
// element type kiln lacks, or data of the wrong size. Data stored outside the model (ONNX's
// external data: a file named relative to the model, an offset and a length) is read from
// `model_dir`; with none given (a model from bytes), external data is an error.
HostTensor to_host_tensor(const ::onnx::TensorProto& t, const std::string& what, const std::string& model_dir = "");

}  // namespace kiln::onnx
