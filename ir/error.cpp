#include "ir/error.h"

namespace kiln {

std::string SourceLoc::str() const {
  return fmt::format("{}:{}:{}", file.empty() ? "<input>" : file, line, column);
}

}  // namespace kiln
