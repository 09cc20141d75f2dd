#pragma once
// Byte counts for people.
#include <cstdint>
#include <string>

namespace kiln {

// "3.1 MB", "512 B" (powers of 1024).
std::string format_bytes(int64_t bytes);

}  // namespace kiln
