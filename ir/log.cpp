#include "ir/log.h"

#include <cstdio>
#include <cstdlib>

namespace kiln {

bool log_enabled(std::string_view stream) {
  const char* env = std::getenv("KILN_LOGS");
  if (!env) return false;
  std::string_view list(env);
  while (!list.empty()) {
    size_t comma = list.find(',');
    std::string_view item = list.substr(0, comma);
    if (item == stream || item == "all") return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

void log_line(std::string_view stream, const std::string& message) {
  std::fputs(fmt::format("[{}] {}\n", stream, message).c_str(), stderr);
}

}  // namespace kiln
