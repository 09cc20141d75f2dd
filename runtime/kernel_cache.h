#pragma once
// The content-addressed disk cache of compiled kernels, shared by every device, at the boundary
// between the renderer (source text) and the compiler (machine code), as tinygrad's
// compile_cached. An entry is a few files named by the key and an extension:
//   <dir>/<key[0:2]>/<key>.<ext>
// Text files (.cpp, .cu, .ptx) are written as they are, for people to read, and are never loaded
// back as code. Binary files (what a warm process loads: the CPU's .o, CUDA's .cubin) carry a
// header: magic, length and xxh64 of what follows, then the size and xxh64 of every text file of
// the entry, then the bytes. The CPU JIT stores .o + .cpp; the CUDA runtime .cubin + .ptx + .cu.
//
// Faults are misses, never errors and never trusted: an entry loads only when its binary passes
// the header check AND every text file it lists is present with the size and checksum it
// records; anything else (a truncated, empty, bit-flipped or missing file, a folder that cannot
// be read) is reported (KILN_LOGS=cache) and treated as absent, and the compile that follows
// rewrites the entry. Writing is as careful: every file goes to a temp file in the same folder
// (unique per process and call) and is renamed into place, texts first and the binary last, so
// a reader sees a whole file or none, and a write that fails partway (a full disk, a read-only
// or missing folder that cannot be created) leaves no file behind that a later load would
// trust. Processes that compile the same kernel at once write the same bytes under the same
// names: the last rename wins and every reader sees a whole entry. The cache is an
// optimization: failures to write it are logged, not raised.
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::runtime {

// Bumped whenever the entry layout or what the key covers changes (2: binaries list the entry's
// text files with their checksums).
inline constexpr int kKernelCacheFormatVersion = 2;

// A 128-bit content hash (xxh3-128) of the parts, as 32 hex digits. Parts are length-prefixed,
// so ("ab","c") and ("a","bc") differ.
std::string content_key(const std::vector<std::string_view>& parts);

// One file of an entry: its extension ("o", "cubin", "cpp") and bytes. `text` files are
// stored plain (sources, PTX); the others get the header and are what load() returns.
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

  // The binary file `ext` stored under `key`, when it and every text file it lists are present
  // and intact. `texts`, when given, receives those text files by extension (already checked).
  std::optional<std::string> load(const std::string& key, const std::string& ext,
                                  std::map<std::string, std::string>* texts = nullptr) const;
  // A text file stored under `key` as it is (for dumps: no integrity check, never run).
  std::optional<std::string> load_text(const std::string& key, const std::string& ext) const;
  // Stores the files of an entry: text files first, then the binaries (each listing the texts),
  // each atomically. Returns whether every file was written; a failure is logged, and leaves
  // no binary that a later load would take.
  bool store(const std::string& key, const std::vector<CacheFile>& files) const;

  std::filesystem::path path(const std::string& key, const std::string& ext) const;
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace kiln::runtime
