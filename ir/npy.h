#pragma once
// NumPy .npy files <-> HostTensor, so that NumPy and PyTorch can produce a graph's inputs and
// check its outputs (np.save / np.load, torch.from_numpy).
//
// Read: format versions 1.0, 2.0 and 3.0, little-endian data, C order (Fortran-order files
// are transposed into C order), dtypes <f8 <f4 <f2 <i8 <i4 |b1. Write: version 1.0 (2.0 when
// the header is too long), C order. NumPy has no bfloat16, so a bf16 tensor is written as
// <f4 (every bf16 value is exactly representable in f32); reading it back gives f32.
// Every malformed file is a kiln::Error naming the file and what is wrong with it.
#include <string>
#include <string_view>

#include "ir/host_tensor.h"

namespace kiln {

// Decodes the bytes of a .npy file; `name` is used in error messages.
HostTensor npy_decode(std::string_view bytes, const std::string& name = "<npy>");
// Encodes a tensor (any strides) as the bytes of a .npy file.
std::string npy_encode(const HostTensor& t);

// Reads a .npy file; a missing file is a kiln::Error naming it.
HostTensor read_npy(const std::string& path);
// Writes a .npy file (replacing it); an unwritable path is a kiln::Error naming it.
void write_npy(const std::string& path, const HostTensor& t);

// The NumPy dtype string a tensor of `dt` is written as ("<f4" for f32 and bf16).
std::string npy_descr(DType dt);

}  // namespace kiln
