// kiln::onnx without ONNX: this build found no libonnx-dev/libprotobuf-dev (the GPU machine's
// build has none), so every entry point says what to install.
#include "frontend/onnx/onnx.h"

#include "ir/error.h"

namespace kiln::onnx {

namespace {
constexpr const char* kWhy =
    "this kiln was built without ONNX import: install libonnx-dev and libprotobuf-dev (scripts/setup.sh does) and rebuild";
}

ImportedModel load(const std::string& path, const ImportOptions&) { fail("cannot import '{}': {}", path, kWhy); }
ImportedModel load_from_bytes(const std::string&, const std::string& name, const ImportOptions&) {
  fail("cannot import '{}': {}", name, kWhy);
}
std::vector<std::string> model_input_names(const std::string& path) { fail("cannot read '{}': {}", path, kWhy); }
HostTensor read_tensor_proto(const std::string& path) { fail("cannot read '{}': {}", path, kWhy); }
std::vector<std::string> supported_operators() { return {}; }
bool available(std::string* why) {
  if (why) *why = kWhy;
  return false;
}

}  // namespace kiln::onnx
