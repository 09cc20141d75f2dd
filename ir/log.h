#pragma once
// Named debug-log streams for passes, switched on by KILN_LOGS (a comma list such as
// "canonicalize,constant_fold", or "all"). Messages go to stderr, prefixed by the stream.
#include <fmt/format.h>

#include <string>
#include <string_view>

namespace kiln {

// Read at each call (not cached) so that tests and tools may set KILN_LOGS at run time;
// passes call it once per run, not per node.
bool log_enabled(std::string_view stream);
void log_line(std::string_view stream, const std::string& message);

}  // namespace kiln
