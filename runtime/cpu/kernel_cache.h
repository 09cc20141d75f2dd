#pragma once
// The content-addressed disk cache of compiled kernels, at the boundary between the renderer
// (source text) and the compiler (object code), as tinygrad's compile_cached. An entry is
//   <dir>/<key[0:2]>/<key>.o    a small header (magic, length, xxh64 of the bytes) + the object
//   <dir>/<key[0:2]>/<key>.cpp  the source, for people to read
// written atomically (temp file in the same folder + rename). An entry that fails its header
// check is reported (KILN_LOGS=cache) and treated as absent, never trusted; the compile that
// follows rewrites it. The cache is an optimization: failures to write it are logged, not
// raised.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime::cpu {

// Bumped whenever the entry layout or what the key covers changes.
inline constexpr int kKernelCacheFormatVersion = 1;

// A 128-bit content hash (xxh3-128) of the parts, as 32 hex digits. Parts are length-prefixed,
// so ("ab","c") and ("a","bc") differ.
std::string content_key(const std::vector<std::string_view>& parts);

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; nullopt when
  // KILN_CACHE_DIR=off (or no home folder is known). Read at each call, so tests may set it.
  static std::optional<std::filesystem::path> default_dir();

  // The object stored under `key`, when present and intact.
  std::optional<std::string> load(const std::string& key) const;
  // Stores `object` (and `source` beside it) under `key`.
  void store(const std::string& key, const std::string& object, const std::string& source) const;

  std::filesystem::path object_path(const std::string& key) const;
  std::filesystem::path source_path(const std::string& key) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace kiln::runtime::cpu
