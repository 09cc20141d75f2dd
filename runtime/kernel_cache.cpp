#include "runtime/kernel_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <system_error>

#include "ir/log.h"

#if KILN_HAVE_XXHASH
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

namespace kiln::runtime {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'K', 'I', 'L', 'N', 'O', 'B', 'J', '2'};
constexpr size_t kHeaderSize = 8 + 8 + 8;  // magic, body length, checksum of the body
// An extension is a few letters; anything longer in a header that passed its checksum is a bug
// of whoever wrote it, and the entry is refused rather than believed.
constexpr uint64_t kMaxExtLength = 16;

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

// The whole of a regular file, or nullopt (with the reason) when it is absent, not a regular
// file, or a read fails. POSIX calls rather than streams: a stream reading a folder or failing
// halfway reports nothing, and a short read must never pass for a whole file.
std::optional<std::string> read_file(const fs::path& path, std::string* why = nullptr) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (why) *why = std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  std::optional<std::string> out;
  if (::fstat(fd, &st) != 0) {
    if (why) *why = std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    if (why) *why = "not a regular file";
  } else {
    std::string bytes;
    bytes.reserve(static_cast<size_t>(st.st_size));
    char buf[1 << 16];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        if (why) *why = std::strerror(errno);
        break;
      }
      if (n == 0) {
        out = std::move(bytes);
        break;
      }
      bytes.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

// A per-process random tag for temp names: process ids repeat across containers that share a
// cache folder (each has its pid 1), and O_EXCL must never meet another writer's temp file.
uint64_t process_nonce() {
  static const uint64_t nonce = [] {
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd() ^ static_cast<uint64_t>(::getpid());
  }();
  return nonce;
}

// Writes `bytes` to `path` so that readers see the old file or the whole new one, never a
// part: a temp file in the same folder (same file system), then rename. A failed write (a full
// disk: ENOSPC, EFBIG, EDQUOT) removes the temp file and leaves `path` as it was. No fsync: a
// file torn by a crash fails its header check on the next load and is recompiled.
bool write_atomically(const fs::path& path, std::string_view bytes, std::string& why) {
  static std::atomic<uint64_t> counter{0};
  fs::path temp = path;
  temp += fmt::format(".tmp.{}.{:x}.{}", ::getpid(), process_nonce(), counter++);
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);  // the umask decides, as for any file
  if (fd < 0) {
    why = fmt::format("cannot create {}: {}", temp.string(), std::strerror(errno));
    return false;
  }
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      why = fmt::format("cannot write {} ({} of {} bytes written): {}", temp.string(), done, bytes.size(),
                        n < 0 ? std::strerror(errno) : "no progress");
      ::close(fd);
      ::unlink(temp.c_str());
      return false;
    }
    done += static_cast<size_t>(n);
  }
  // close() is where some file systems (NFS) report a failed write.
  if (::close(fd) != 0) {
    why = fmt::format("cannot write {}: {}", temp.string(), std::strerror(errno));
    ::unlink(temp.c_str());
    return false;
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    why = fmt::format("cannot rename {} to {}: {}", temp.string(), path.string(), std::strerror(errno));
    ::unlink(temp.c_str());
    return false;
  }
  return true;
}

// One text file of an entry as its binary's header records it.
struct Companion {
  std::string ext;
  uint64_t size = 0;
  uint64_t sum = 0;
};

// Parses a binary file; the payload (its bytes at `payload_at`) and companions on success, else
// `why` says what is wrong.
bool parse_binary(std::string_view bytes, std::vector<Companion>& companions, size_t& payload_at, std::string& why) {
  if (bytes.empty()) {
    why = "empty file";
    return false;
  }
  if (bytes.size() < kHeaderSize || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    why = "no kiln object header";
    return false;
  }
  std::string_view body = bytes.substr(kHeaderSize);
  if (uint64_t length = get_u64(bytes.substr(8)); length != body.size()) {
    why = fmt::format("length {} in the header, {} bytes present", length, body.size());
    return false;
  }
  if (get_u64(bytes.substr(16)) != checksum(body)) {
    why = "checksum mismatch";
    return false;
  }
  size_t at = 0;
  auto take_u64 = [&](uint64_t& v) {
    if (body.size() - at < 8) return false;
    v = get_u64(body.substr(at));
    at += 8;
    return true;
  };
  uint64_t n = 0;
  if (!take_u64(n) || n > 64) {
    why = "malformed list of text files";
    return false;
  }
  for (uint64_t i = 0; i < n; ++i) {
    Companion c;
    uint64_t len = 0;
    if (!take_u64(len) || len == 0 || len > kMaxExtLength || body.size() - at < len) {
      why = "malformed list of text files";
      return false;
    }
    c.ext.assign(body.substr(at, len));
    at += len;
    if (!take_u64(c.size) || !take_u64(c.sum)) {
      why = "malformed list of text files";
      return false;
    }
    companions.push_back(std::move(c));
  }
  payload_at = kHeaderSize + at;
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

std::optional<std::string> KernelCache::load(const std::string& key, const std::string& ext,
                                             std::map<std::string, std::string>* texts) const {
  fs::path file = path(key, ext);
  std::string why;
  std::optional<std::string> bytes = read_file(file, &why);
  if (!bytes) {
    if (log_enabled("cache")) log_line("cache", fmt::format("miss {}.{} ({})", key, ext, why));
    return std::nullopt;
  }
  std::vector<Companion> companions;
  size_t payload_at = 0;
  std::map<std::string, std::string> found;
  if (parse_binary(*bytes, companions, payload_at, why)) {
    // The texts are part of the entry: one missing or damaged makes the whole entry a miss, so
    // the compile that follows writes it whole again (and dumps never show a wrong source).
    for (const Companion& c : companions) {
      std::string text_why;
      std::optional<std::string> text = read_file(path(key, c.ext), &text_why);
      if (!text) {
        why = fmt::format("its .{} cannot be read: {}", c.ext, text_why);
      } else if (text->size() != c.size) {
        why = fmt::format("its .{} holds {} bytes, the header records {}", c.ext, text->size(), c.size);
      } else if (checksum(*text) != c.sum) {
        why = fmt::format("its .{} fails its checksum", c.ext);
      } else {
        found.emplace(c.ext, std::move(*text));
        continue;
      }
      break;
    }
  }
  if (!why.empty()) {
    // Never trusted: the compile that follows rewrites the entry.
    if (log_enabled("cache")) log_line("cache", fmt::format("corrupt entry {} ({}): ignored, recompiling", file.string(), why));
    return std::nullopt;
  }
  if (log_enabled("cache")) log_line("cache", fmt::format("disk hit {}.{}", key, ext));
  if (texts) *texts = std::move(found);
  return bytes->substr(payload_at);
}

std::optional<std::string> KernelCache::load_text(const std::string& key, const std::string& ext) const {
  return read_file(path(key, ext));
}

bool KernelCache::store(const std::string& key, const std::vector<CacheFile>& files) const {
  fs::path folder = path(key, "x").parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) {
    if (log_enabled("cache")) log_line("cache", fmt::format("not stored {}: cannot create {}: {}", key, folder.string(), ec.message()));
    return false;
  }
  // Texts first, so that whoever finds a binary finds its texts beside it; each binary lists
  // them with their sizes and checksums, so that a text lost or damaged later voids the entry.
  std::string listing;
  uint64_t texts = 0;
  for (const CacheFile& file : files) {
    if (!file.text) continue;
    ++texts;
    put_u64(listing, file.ext.size());
    listing += file.ext;
    put_u64(listing, file.bytes.size());
    put_u64(listing, checksum(file.bytes));
  }
  std::string why;
  for (bool text_pass : {true, false}) {
    for (const CacheFile& file : files) {
      if (file.text != text_pass) continue;
      std::string entry;
      if (!file.text) {
        std::string body;
        put_u64(body, texts);
        body += listing;
        body += file.bytes;
        entry.assign(kMagic, sizeof kMagic);
        put_u64(entry, body.size());
        put_u64(entry, checksum(body));
        entry += body;
      } else {
        entry.assign(file.bytes);
      }
      if (!write_atomically(path(key, file.ext), entry, why)) {
        if (log_enabled("cache")) log_line("cache", fmt::format("not stored {}: {}", key, why));
        return false;
      }
      if (!file.text && log_enabled("cache"))
        log_line("cache", fmt::format("stored {} ({} bytes)", path(key, file.ext).string(), file.bytes.size()));
    }
  }
  return true;
}

}  // namespace kiln::runtime
