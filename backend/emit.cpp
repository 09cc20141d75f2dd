// The emit stage of the compile driver (backend/backend.h): each kernel's source once, and the
// module as their concatenation after the target's prelude.
#include <algorithm>

#include "backend/backend.h"

namespace kiln::backend {

EmittedModule emit(const Backend& backend, const std::vector<codegen::Kernel>& kernels) {
  EmittedModule m;
  m.prelude = std::string(backend.prelude());
  m.kernels.reserve(kernels.size());
  for (const codegen::Kernel& k : kernels) m.kernels.push_back(backend.emit_kernel(k));
  return m;
}

std::string EmittedModule::text() const {
  size_t bytes = prelude.size();
  for (const std::string& k : kernels) bytes += 1 + k.size();
  std::string out;
  out.reserve(bytes);
  out += prelude;
  for (const std::string& k : kernels) {
    out += '\n';
    out += k;
  }
  return out;
}

int EmittedModule::kernel_at_line(int line) const {
  // text() is the prelude, then "\n" + kernel for each: kernel k starts on the line after the
  // newline that precedes it.
  auto lines_in = [](const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); };
  int next_start = 1 + lines_in(prelude) + 1;  // the prelude's lines, then the separator's
  int found = -1;
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (line < next_start) break;
    found = static_cast<int>(k);
    next_start += lines_in(kernels[k]) + 1;
  }
  return found;
}

}  // namespace kiln::backend
