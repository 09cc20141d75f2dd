#pragma once
// Errors. User errors (bad .kir text, shape mismatches in the builder, unknown ops) are
// kiln::Error with a location and a plain message; broken internal invariants are
// KILN_INTERNAL_ASSERT, which names the invariant (Halide's user_assert / internal_assert).
#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace kiln {

// Where something is in a text file; line and column count from 1.
struct SourceLoc {
  std::string file;
  int line = 0;
  int column = 0;
  bool valid() const { return line > 0; }
  std::string str() const;  // "file:line:column"
};

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
  Error(const SourceLoc& loc, const std::string& message)
      : std::runtime_error(loc.valid() ? loc.str() + ": error: " + message : message), loc_(loc) {}
  const SourceLoc& loc() const { return loc_; }

 private:
  SourceLoc loc_;
};

// A broken invariant inside kiln itself, not a user's mistake.
class InternalError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace kiln

#define KILN_CHECK(cond, ...)                                 \
  do {                                                        \
    if (!(cond)) ::kiln::fail(__VA_ARGS__);                   \
  } while (0)

#define KILN_INTERNAL_ASSERT(cond, what)                                                        \
  do {                                                                                          \
    if (!(cond))                                                                                \
      throw ::kiln::InternalError(std::string("kiln internal error: invariant '") + (what) +    \
                                  "' broken (" #cond ") at " __FILE__ ":" + std::to_string(__LINE__)); \
  } while (0)
