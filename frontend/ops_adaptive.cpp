// adaptive_avg_pool, adaptive_max_pool and repeat_interleave (frontend/ops.h): composites of
// the table's pools, reductions, slices and views.
#include <fmt/format.h>

#include "frontend/ops.h"
#include "ir/error.h"

namespace kiln {

namespace {

Tensor adaptive_pool(const Tensor& x, const IntList& output_size, bool max, const char* fn) {
  const int64_t k = static_cast<int64_t>(output_size.size());
  if (k < 1 || k > 3) fail("{}: output_size must name 1 to 3 spatial dims, got {}", fn, k);
  if (x.dim() < k + 1) fail("{}: an input of rank {} has no {} spatial dims after a channel dim", fn, x.dim(), k);
  // Dims whose output size divides the input size pool with one window each: kernel = stride =
  // n / o. The others are pooled index by index below.
  IntList kernel, stride;
  bool all_divide = true;
  for (int64_t d = 0; d < k; ++d) {
    const int64_t n = x.size(x.dim() - k + d), o = output_size[static_cast<size_t>(d)];
    if (o <= 0) fail("{}: output sizes must be positive, got {}", fn, shape_str(output_size));
    if (n == 0) fail("{}: spatial dim {} of the input is empty", fn, x.dim() - k + d);
    all_divide = all_divide && n % o == 0;
    kernel.push_back(n % o == 0 ? n / o : 1);
    stride.push_back(n % o == 0 ? n / o : 1);
  }
  // The pool ops want [N, C, spatial...] or [C, spatial...]: a leading batch of any rank is
  // folded into one dim and restored after.
  Shape lead(x.shape().begin(), x.shape().end() - k);
  Tensor y = x;
  if (lead.size() > 2) {
    int64_t n = 1;
    for (size_t i = 0; i + 1 < lead.size(); ++i) n *= lead[i];
    Shape folded{n, lead.back()};
    folded.insert(folded.end(), x.shape().end() - k, x.shape().end());
    y = reshape(y, folded);
  }
  y = max ? max_pool(y, kernel, kernel) : avg_pool(y, kernel, kernel);
  if (!all_divide) {
    for (int64_t d = 0; d < k; ++d) {
      const int64_t dim = y.dim() - k + d;
      const int64_t n = x.size(x.dim() - k + d), o = output_size[static_cast<size_t>(d)];
      if (n % o == 0) continue;
      std::vector<Tensor> parts;
      for (int64_t i = 0; i < o; ++i) {
        const int64_t begin = i * n / o, end = ((i + 1) * n + o - 1) / o;
        Tensor window = slice(y, dim, begin, end);
        parts.push_back(max ? amax(window, {dim}, true) : mean(window, {dim}, true));
      }
      y = cat(parts, dim);
    }
  }
  if (lead.size() > 2) {
    Shape out = lead;
    out.insert(out.end(), output_size.begin(), output_size.end());
    y = reshape(y, out);
  }
  return y;
}

}  // namespace

Tensor adaptive_avg_pool(const Tensor& self, const IntList& output_size) { return adaptive_pool(self, output_size, false, "adaptive_avg_pool"); }
Tensor adaptive_max_pool(const Tensor& self, const IntList& output_size) { return adaptive_pool(self, output_size, true, "adaptive_max_pool"); }

Tensor repeat_interleave(const Tensor& self, int64_t repeats, int64_t dim) {
  if (repeats < 1) fail("repeat_interleave: repeats must be at least 1, got {}", repeats);
  const int64_t r = self.dim();
  if (dim < -r || dim >= r) fail("repeat_interleave: dim {} is out of range for rank {}", dim, r);
  if (dim < 0) dim += r;
  if (repeats == 1) return self;
  Shape expanded = self.shape();
  expanded.insert(expanded.begin() + dim + 1, repeats);
  Shape out = self.shape();
  out[static_cast<size_t>(dim)] *= repeats;
  return reshape(expand(unsqueeze(self, dim + 1), expanded), out);
}

}  // namespace kiln
