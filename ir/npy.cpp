#include "ir/npy.h"

#include <fmt/format.h>

#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>

#include "ir/error.h"

namespace kiln {

// The data is copied byte for byte into HostTensor storage, which is in host order.
static_assert(std::endian::native == std::endian::little, "kiln's .npy I/O assumes a little-endian host");

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// The header is a Python dict literal: {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }
// This reads exactly that subset of Python: quoted strings, True/False and tuples of ints.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : s_(text), name_(name) {}

  Header parse() {
    Header h;
    bool have_descr = false, have_order = false, have_shape = false;
    expect('{');
    while (!accept('}')) {
      std::string key = string();
      expect(':');
      if (key == "descr") {
        h.descr = string();
        have_descr = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        have_order = true;
      } else if (key == "shape") {
        h.shape = tuple();
        have_shape = true;
      } else {
        bad(fmt::format("unknown header key '{}'", key));
      }
      if (!accept(',')) {
        expect('}');
        break;
      }
    }
    if (!have_descr || !have_order || !have_shape)
      bad("the header lacks one of 'descr', 'fortran_order', 'shape'");
    return h;
  }

 private:
  [[noreturn]] void bad(const std::string& what) {
    fail("{}: malformed .npy header ({}): {}", name_, what, std::string(s_));
  }
  void skip() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool accept(char c) {
    skip();
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!accept(c)) bad(fmt::format("expected '{}' at offset {}", c, i_));
  }
  std::string string() {
    skip();
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) bad(fmt::format("expected a quoted string at offset {}", i_));
    char q = s_[i_++];
    size_t end = s_.find(q, i_);
    if (end == std::string_view::npos) bad("unterminated string");
    std::string out(s_.substr(i_, end - i_));
    i_ = end + 1;
    return out;
  }
  bool boolean() {
    skip();
    if (s_.substr(i_, 4) == "True") {
      i_ += 4;
      return true;
    }
    if (s_.substr(i_, 5) == "False") {
      i_ += 5;
      return false;
    }
    bad("expected True or False for 'fortran_order'");
  }
  Shape tuple() {
    Shape out;
    expect('(');
    while (!accept(')')) {
      skip();
      size_t start = i_;
      int64_t v = 0;
      while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
        if (v > (INT64_MAX - 9) / 10) bad("a dimension is too large");
        v = v * 10 + (s_[i_++] - '0');
      }
      if (i_ == start) bad(fmt::format("expected a non-negative integer in 'shape' at offset {}", i_));
      out.push_back(v);
      if (!accept(',')) {
        expect(')');
        break;
      }
    }
    return out;
  }

  std::string_view s_;
  const std::string& name_;
  size_t i_ = 0;
};

std::optional<DType> dtype_from_descr(std::string_view d) {
  if (d == "<f8") return DType::F64;
  if (d == "<f4") return DType::F32;
  if (d == "<f2") return DType::F16;
  if (d == "<i8") return DType::I64;
  if (d == "<i4") return DType::I32;
  if (d == "|b1") return DType::Bool;
  return std::nullopt;
}

uint32_t read_le(std::string_view b, size_t at, int n) {
  uint32_t v = 0;
  for (int k = n - 1; k >= 0; --k) v = (v << 8) | static_cast<uint8_t>(b[at + k]);
  return v;
}

}  // namespace

std::string npy_descr(DType dt) {
  switch (dt) {
    case DType::F64: return "<f8";
    case DType::F32: return "<f4";
    case DType::BF16: return "<f4";  // NumPy has no bfloat16: written widened to f32 (exact)
    case DType::F16: return "<f2";
    case DType::I64: return "<i8";
    case DType::I32: return "<i4";
    case DType::Bool: return "|b1";
  }
  return "?";
}

HostTensor npy_decode(std::string_view bytes, const std::string& name) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic)
    fail("{}: not a .npy file (bad magic: it does not start with \\x93NUMPY)", name);
  if (bytes.size() < 10) fail("{}: truncated .npy file ({} bytes, too short for a header)", name, bytes.size());
  int major = static_cast<uint8_t>(bytes[6]), minor = static_cast<uint8_t>(bytes[7]);
  if (major < 1 || major > 3)
    fail("{}: unsupported .npy format version {}.{} (kiln reads 1.0, 2.0 and 3.0)", name, major, minor);
  // 1.0 has a 2-byte header length, 2.0 and 3.0 (3.0: utf-8 header) a 4-byte one.
  size_t len_bytes = major == 1 ? 2 : 4;
  size_t header_start = 8 + len_bytes;
  if (bytes.size() < header_start) fail("{}: truncated .npy file (no header length)", name);
  size_t header_len = read_le(bytes, 8, static_cast<int>(len_bytes));
  if (bytes.size() < header_start + header_len)
    fail("{}: truncated .npy file (header of {} bytes, but only {} bytes follow)", name, header_len,
         bytes.size() - header_start);
  Header h = HeaderParser(bytes.substr(header_start, header_len), name).parse();

  auto dt = dtype_from_descr(h.descr);
  if (!dt) {
    std::string hint;
    if (!h.descr.empty() && h.descr[0] == '>') hint = " (big-endian data is not supported; save it little-endian)";
    fail("{}: unsupported .npy dtype '{}'{} (kiln reads <f8 <f4 <f2 <i8 <i4 |b1)", name, h.descr, hint);
  }
  TensorMeta meta(*dt, h.shape);
  size_t data_start = header_start + header_len;
  size_t have = bytes.size() - data_start;
  size_t need = static_cast<size_t>(meta.nbytes());
  if (have < need)
    fail("{}: truncated .npy data: a {} array needs {} bytes, the file holds {}", name, meta.str(), need, have);
  if (have > need)
    fail("{}: {} unexpected bytes after the data of a {} array", name, have - need, meta.str());

  HostTensor t = HostTensor::empty(meta);
  if (need) std::memcpy(t.data(), bytes.data() + data_start, need);
  if (h.fortran_order && meta.rank() > 1) {
    // Column-major: the first index varies fastest. View the data with those strides and
    // copy it into row-major order.
    Strides st(meta.rank());
    int64_t s = 1;
    for (int64_t d = 0; d < meta.rank(); ++d) {
      st[d] = s;
      s *= h.shape[d];
    }
    t = t.view(TensorMeta(*dt, h.shape, st), 0).to(*dt);
  }
  return t;
}

std::string npy_encode(const HostTensor& t) {
  HostTensor c = t.dtype() == DType::BF16 ? t.to(DType::F32) : t.contiguous();
  std::string shape;
  for (int64_t d : c.shape()) shape += fmt::format("{}, ", d);
  if (c.rank() > 1) shape.resize(shape.size() - 2);  // (3,) keeps its comma; (2, 3) has none
  if (c.rank() == 1) shape.resize(shape.size() - 1);
  std::string header =
      fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", npy_descr(c.dtype()), shape);
  // Pad with spaces and end with '\n' so that the data starts at a multiple of 64 bytes.
  int major = header.size() + 1 + 10 > 65535 ? 2 : 1;
  size_t prefix = major == 1 ? 10 : 12;
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';

  std::string out(kMagic);
  out += static_cast<char>(major);
  out += '\0';
  uint32_t len = static_cast<uint32_t>(header.size());
  for (size_t k = 0; k < prefix - 8; ++k) out += static_cast<char>((len >> (8 * k)) & 0xff);
  out += header;
  if (c.nbytes()) out.append(static_cast<const char*>(c.data()), static_cast<size_t>(c.nbytes()));
  return out;
}

HostTensor read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return npy_decode(ss.str(), path);
}

void write_npy(const std::string& path, const HostTensor& t) {
  std::string bytes = npy_encode(t);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) fail("cannot write '{}'", path);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) fail("error while writing '{}'", path);
}

}  // namespace kiln
