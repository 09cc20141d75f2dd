// .npy I/O: round trips of every dtype, byte-exact agreement with the files NumPy writes,
// Fortran order, format 2.0, and clear errors for malformed files.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "ir/error.h"
#include "ir/npy.h"
#include "tests/support/support.h"

namespace {

using kiln::DType;
using kiln::HostTensor;
using kiln::testing::make;
using kiln::testing::tensors_close;

// The header NumPy writes (version 1.0): the dict padded with spaces to end in '\n' at a
// multiple of 64 bytes.
std::string numpy_file(const std::string& dict, const std::string& data, int major = 1) {
  size_t prefix = major == 1 ? 10 : 12;
  std::string header = dict;
  size_t total = prefix + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += '\0';
  for (size_t k = 0; k < prefix - 8; ++k) out += static_cast<char>((header.size() >> (8 * k)) & 0xff);
  return out + header + data;
}

template <typename T>
std::string raw(std::initializer_list<T> values) {
  std::string out;
  for (T v : values) out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  return out;
}

std::string error_of(const std::string& bytes) {
  std::string message = kiln::testing::error_of([&] { kiln::npy_decode(bytes, "x.npy"); });
  return message.empty() ? "(no error)" : message;
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, EncodeDecodeGivesTheSameValues) {
  DType dt = GetParam();
  HostTensor t = kiln::random_tensor(kiln::TensorMeta(dt, {3, 5}), 7, 100);
  HostTensor back = kiln::npy_decode(kiln::npy_encode(t));
  // bf16 comes back as f32 (NumPy has no bf16), holding exactly the same numbers.
  EXPECT_EQ(back.dtype(), dt == DType::BF16 ? DType::F32 : dt);
  EXPECT_TRUE(tensors_close(back.to(dt), t, 0, 0));
}

INSTANTIATE_TEST_SUITE_P(AllDTypes, NpyRoundTrip,
                         ::testing::Values(DType::F64, DType::F32, DType::F16, DType::BF16, DType::I64, DType::I32,
                                           DType::Bool),
                         [](const auto& info) { return std::string(kiln::dtype_name(info.param)); });

TEST(Npy, MatchesNumPyBytesExactly) {
  // np.save(f, np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32))
  std::string expected = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
                                    raw<float>({1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(expected.size(), 128u + 24u);
  EXPECT_EQ(kiln::npy_encode(make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6})), expected);
  // np.save(f, np.array([7, 8], dtype=np.int64)): a one-element tuple keeps its comma.
  EXPECT_EQ(kiln::npy_encode(HostTensor::from_ints(DType::I64, {2}, std::vector<int64_t>{7, 8})),
            numpy_file("{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", raw<int64_t>({7, 8})));
  // A 0-d array has the shape ().
  EXPECT_EQ(kiln::npy_encode(HostTensor::scalar(DType::F64, 2.5)),
            numpy_file("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", raw<double>({2.5})));
}

TEST(Npy, WritesNonContiguousTensorsInCOrder) {
  HostTensor t = make(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  HostTensor tt = t.view(kiln::TensorMeta(DType::F32, {3, 2}, {1, 3}), 0);  // the transpose
  HostTensor back = kiln::npy_decode(kiln::npy_encode(tt));
  EXPECT_TRUE(tensors_close(back, make(DType::F32, {3, 2}, {1, 4, 2, 5, 3, 6})));
}

TEST(Npy, ReadsFortranOrderByTransposing) {
  // np.asfortranarray([[1, 2, 3], [4, 5, 6]]) stores the columns one after another.
  std::string file = numpy_file("{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3), }",
                                raw<int32_t>({1, 4, 2, 5, 3, 6}));
  HostTensor t = kiln::npy_decode(file);
  EXPECT_TRUE(t.is_contiguous());
  EXPECT_EQ(t.to_ints(), (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
}

TEST(Npy, ReadsFormatVersion2AndDoubleQuotes) {
  std::string file = numpy_file("{\"descr\": \"<f2\", \"fortran_order\": False, \"shape\": (2,)}",
                                raw<uint16_t>({0x3c00, 0xc000}), 2);  // 1.0, -2.0 in IEEE half
  HostTensor t = kiln::npy_decode(file);
  EXPECT_EQ(t.dtype(), DType::F16);
  EXPECT_EQ(t.to_doubles(), (std::vector<double>{1.0, -2.0}));
}

TEST(Npy, BoolAndSpecialFloatsSurvive) {
  HostTensor b = HostTensor::from_ints(DType::Bool, {4}, std::vector<int64_t>{1, 0, 0, 1});
  EXPECT_EQ(kiln::npy_decode(kiln::npy_encode(b)).to_ints(), b.to_ints());
  HostTensor f = make(DType::F32, {3}, {INFINITY, -INFINITY, NAN});
  EXPECT_TRUE(tensors_close(kiln::npy_decode(kiln::npy_encode(f)), f));
}

TEST(Npy, FileRoundTripAndMissingFile) {
  std::string path = (std::filesystem::temp_directory_path() / "kiln_test_npy.npy").string();
  HostTensor t = make(DType::F64, {2, 2}, {1.5, -2, 3, 4});
  kiln::write_npy(path, t);
  EXPECT_TRUE(tensors_close(kiln::read_npy(path), t));
  std::filesystem::remove(path);
  try {
    kiln::read_npy(path);
    FAIL() << "expected an error";
  } catch (const kiln::Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot open '" + path + "'"), std::string::npos) << e.what();
  }
}

TEST(NpyMalformed, BadMagic) {
  EXPECT_NE(error_of("PK\x03\x04 this is a zip").find("x.npy: not a .npy file (bad magic"), std::string::npos);
  EXPECT_NE(error_of("").find("bad magic"), std::string::npos);
}

TEST(NpyMalformed, TruncatedData) {
  std::string file = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", raw<float>({1, 2}));
  EXPECT_NE(error_of(file).find("truncated .npy data: a f32[2,3] array needs 24 bytes, the file holds 8"),
            std::string::npos)
      << error_of(file);
}

TEST(NpyMalformed, TruncatedHeader) {
  std::string file = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", "");
  EXPECT_NE(error_of(file.substr(0, 40)).find("truncated .npy file (header of"), std::string::npos);
  EXPECT_NE(error_of(file.substr(0, 9)).find("truncated"), std::string::npos);
}

TEST(NpyMalformed, TrailingBytes) {
  std::string file = numpy_file("{'descr': '<i4', 'fortran_order': False, 'shape': (1,), }", raw<int32_t>({1, 2}));
  EXPECT_NE(error_of(file).find("4 unexpected bytes after the data of a i32[1] array"), std::string::npos);
}

TEST(NpyMalformed, UnsupportedDtypes) {
  auto with = [](const std::string& descr) {
    return numpy_file("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1,), }", "xxxxxxxx");
  };
  EXPECT_NE(error_of(with("<u2")).find("unsupported .npy dtype '<u2'"), std::string::npos);
  EXPECT_NE(error_of(with("<c16")).find("unsupported .npy dtype '<c16'"), std::string::npos);
  EXPECT_NE(error_of(with(">f4")).find("big-endian data is not supported"), std::string::npos);
}

TEST(NpyMalformed, BadHeaderAndVersion) {
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'shape': (1,), }", "xxxx")).find("lacks one of"), std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", "xxxx"))
                .find("expected True or False"),
            std::string::npos);
  EXPECT_NE(error_of(numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "xxxx"))
                .find("malformed .npy header"),
            std::string::npos);
  std::string v9 = numpy_file("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", "xxxx");
  v9[6] = 9;
  EXPECT_NE(error_of(v9).find("unsupported .npy format version 9.0"), std::string::npos);
}

}  // namespace
