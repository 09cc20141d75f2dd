#pragma once
// Index helpers shared by the reference kernels: row-major multi-indices and broadcasting.
#include <cstdint>
#include <vector>

#include "ir/host_tensor.h"

namespace kiln::reference {

// Row-major multi-index of logical index i in `shape`.
inline std::vector<int64_t> unravel(int64_t i, const Shape& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = shape[d] ? i % shape[d] : 0;
    i = shape[d] ? i / shape[d] : 0;
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const Shape& shape) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + idx[d];
  return i;
}

// Maps a logical index of the broadcast output shape to the logical index of an input whose
// shape broadcasts to it (size-1 and missing leading dims repeat).
class BroadcastIndexer {
 public:
  BroadcastIndexer(const Shape& in, const Shape& out) : in_(in), out_(out) {}
  int64_t operator()(int64_t out_index) const {
    int64_t in_index = 0, in_stride = 1;
    for (size_t k = 0; k < out_.size(); ++k) {
      size_t d = out_.size() - 1 - k;
      int64_t coord = out_[d] ? out_index % out_[d] : 0;
      out_index = out_[d] ? out_index / out_[d] : 0;
      if (k < in_.size()) {
        size_t di = in_.size() - 1 - k;
        if (in_[di] != 1) in_index += coord * in_stride;
        in_stride *= in_[di];
      }
    }
    return in_index;
  }

 private:
  Shape in_, out_;
};

}  // namespace kiln::reference
