#pragma once
// The content-addressed disk cache of compiled kernels, shared by every device, at the boundary
// between the renderer (source text) and the compiler (machine code), as tinygrad's
// compile_cached. An entry is a few files named by the key and an extension:
//   <dir>/<key[0:2]>/<key>.<ext>
// Binary files (what a warm process loads: the CPU's .o, CUDA's .cubin) carry a small header
// (magic, length, xxh64 of the bytes); text files (.cpp, .cu, .ptx) are written as they are, for
// people to read, and are never loaded back as code. The CPU JIT stores .o + .cpp; the CUDA
// runtime .cubin + .ptx + .cu. Every file is written atomically (temp file in the same folder +
// rename), texts first, so whoever finds a binary finds its source beside it. A binary that
// fails its header check is reported (KILN_LOGS=cache) and treated as absent, never trusted;
// the compile that follows rewrites it. The cache is an optimization: failures to write it are
// logged, not raised.
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

// Bumped whenever the entry layout or what the key covers changes.
inline constexpr int kKernelCacheFormatVersion = 1;

// A 128-bit content hash (xxh3-128) of the parts, as 32 hex digits. Parts are length-prefixed,
// so ("ab","c") and ("a","bc") differ.
std::string content_key(const std::vector<std::string_view>& parts);

// One file of an entry: its extension ("o", "cubin", "cpp") and bytes. `text` files are
// stored plain (sources, PTX); the others get the integrity header and are what load() returns.
struct CacheFile {
  std::string ext;
  std::string_view bytes;
  bool text = false;
};

class KernelCache {
 public:
  explicit KernelCache(std::filesystem::path dir) : dir_(std::move(dir)) {}

  // $KILN_CACHE_DIR, else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; nullopt when
  // KILN_CACHE_DIR=off (or no home folder is known). Read at each call, so tests may set it.
  static std::optional<std::filesystem::path> default_dir();

  // The binary file `ext` stored under `key`, when present and intact.
  std::optional<std::string> load(const std::string& key, const std::string& ext) const;
  // A text file stored under `key` as it is (for dumps: no integrity check, never run).
  std::optional<std::string> load_text(const std::string& key, const std::string& ext) const;
  // Stores the files of an entry: text files first, then the binaries, each atomically.
  void store(const std::string& key, const std::vector<CacheFile>& files) const;

  std::filesystem::path path(const std::string& key, const std::string& ext) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace kiln::runtime
