#include "runtime/kernel_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <system_error>

#include "ir/log.h"

#if KILN_HAVE_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '1'};
constexpr size_t kHeaderSize = 8 + 8 + 8;  // magic, object length, checksum of the object

#if KILN_HAVE_XXHASH
uint64_t checksum(std::string_view bytes) { return XXH64(bytes.data(), bytes.size(), 0); }
#else
// Builds without xxhash.h (the GPU test machine) hash with FNV-1a; the key says which hash
// made it, so entries of the two kinds never mix.
uint64_t fnv1a(std::string_view bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 0x100000001b3ull;
  return h;
}
uint64_t checksum(std::string_view bytes) { return fnv1a(bytes, 0xcbf29ce484222325ull); }
#endif

void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_u64(std::string_view in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return v;
}

// Writes `bytes` to `path` so that readers see the old file or the whole new one, never a
// part: a temp file in the same folder (same file system), then rename.
bool write_atomically(const fs::path& path, std::string_view bytes, std::string& why) {
  static std::atomic<uint64_t> counter{0};
  fs::path temp = path;
  temp += fmt::format(".tmp.{}.{}", ::getpid(), counter++);
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      why = fmt::format("cannot write {}", temp.string());
      std::error_code ignored;
      fs::remove(temp, ignored);
      return false;
    }
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) {
    why = fmt::format("cannot rename {} to {}: {}", temp.string(), path.string(), ec.message());
    fs::remove(temp, ec);
    return false;
  }
  return true;
}

}  // namespace

std::string content_key(const std::vector<std::string_view>& parts) {
  std::string framed;
  for (std::string_view part : parts) {
    put_u64(framed, part.size());
    framed.append(part);
  }
#if KILN_HAVE_XXHASH
  XXH128_hash_t h = XXH3_128bits(framed.data(), framed.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
#else
  return fmt::format("{:016x}{:016x}", fnv1a(framed, 0xcbf29ce484222325ull), fnv1a(framed, 0x84222325cbf29ce4ull));
#endif
}

std::optional<fs::path> KernelCache::default_dir() {
  if (const char* dir = std::getenv("KILN_CACHE_DIR"); dir && *dir) {
    if (std::string_view(dir) == "off") return std::nullopt;
    return fs::path(dir);
  }
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return fs::path(xdg) / "kiln";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "kiln";
  return std::nullopt;
}

fs::path KernelCache::path(const std::string& key, const std::string& ext) const {
  return dir_ / key.substr(0, 2) / (key + "." + ext);
}

std::optional<std::string> KernelCache::load(const std::string& key, const std::string& ext) const {
  fs::path file = path(key, ext);
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (log_enabled("cache")) log_line("cache", fmt::format("miss {}.{}", key, ext));
    return std::nullopt;
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string why;
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    why = "no kiln object header";
  } else if (get_u64(std::string_view(bytes).substr(8)) != bytes.size() - kHeaderSize) {
    why = fmt::format("length {} in the header, {} bytes present", get_u64(std::string_view(bytes).substr(8)),
                      bytes.size() - kHeaderSize);
  } else if (get_u64(std::string_view(bytes).substr(16)) != checksum(std::string_view(bytes).substr(kHeaderSize))) {
    why = "checksum mismatch";
  }
  if (!why.empty()) {
    // Never trusted: the compile that follows rewrites the entry.
    if (log_enabled("cache")) log_line("cache", fmt::format("corrupt entry {} ({}): ignored, recompiling", file.string(), why));
    return std::nullopt;
  }
  if (log_enabled("cache")) log_line("cache", fmt::format("disk hit {}.{}", key, ext));
  return bytes.substr(kHeaderSize);
}

std::optional<std::string> KernelCache::load_text(const std::string& key, const std::string& ext) const {
  std::ifstream in(path(key, ext), std::ios::binary);
  if (!in) return std::nullopt;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void KernelCache::store(const std::string& key, const std::vector<CacheFile>& files) const {
  fs::path folder = path(key, "x").parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  std::string why;
  if (ec) {
    if (log_enabled("cache")) log_line("cache", fmt::format("not stored {}: cannot create {}: {}", key, folder.string(), ec.message()));
    return;
  }
  // Texts first: whoever finds a binary finds its source beside it.
  for (bool texts : {true, false}) {
    for (const CacheFile& file : files) {
      if (file.text != texts) continue;
      std::string entry;
      if (!file.text) {
        entry.assign(kMagic, sizeof kMagic);
        put_u64(entry, file.bytes.size());
        put_u64(entry, checksum(file.bytes));
      }
      entry += file.bytes;
      if (!write_atomically(path(key, file.ext), entry, why)) {
        if (log_enabled("cache")) log_line("cache", fmt::format("not stored {}: {}", key, why));
        return;
      }
      if (!file.text && log_enabled("cache"))
        log_line("cache", fmt::format("stored {} ({} bytes)", path(key, file.ext).string(), file.bytes.size()));
    }
  }
}

}  // namespace kiln::runtime
