#include "frontend/generate.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "ir/error.h"

namespace kiln {

namespace {
// The next token from one row of logits: the argmax, or a draw from softmax(row / temperature).
int64_t pick(std::span<const double> row, double temperature, std::mt19937_64& rng) {
  if (temperature <= 0) return std::max_element(row.begin(), row.end()) - row.begin();
  double top = *std::max_element(row.begin(), row.end());
  std::vector<double> cumulative(row.size());
  double sum = 0;
  for (size_t i = 0; i < row.size(); ++i) cumulative[i] = sum += std::exp((row[i] - top) / temperature);
  // A uniform draw in [0, sum) from the top 53 bits, the same on every platform.
  double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * sum;
  return std::upper_bound(cumulative.begin(), cumulative.end(), u) - cumulative.begin();
}
}  // namespace

std::vector<int64_t> generate(const CompiledFunction& logits_of, const std::vector<int64_t>& prompt,
                              const GenerateOptions& o, Device device) {
  if (prompt.empty()) fail("generate: the prompt is empty (start it with a separator token if need be)");
  if (o.context < 1) fail("generate: the context must be at least 1 token, got {}", o.context);
  NoGradGuard no_grad;
  std::mt19937_64 rng(o.seed);
  std::vector<int64_t> ids = prompt, out;
  for (int step = 0; step < o.max_new_tokens; ++step) {
    const size_t n = std::min<size_t>(ids.size(), static_cast<size_t>(o.context));
    std::vector<int64_t> window(ids.end() - static_cast<std::ptrdiff_t>(n), ids.end());
    window.resize(static_cast<size_t>(o.context), o.pad_token);
    Tensor logits = logits_of(tensor_of_ints(window, {1, o.context}).to(device));
    if (logits.dim() != 3 || logits.size(0) != 1 || logits.size(1) != o.context)
      fail("generate: the model must return logits [1, {}, vocab], got {}", o.context, logits.str());
    const std::vector<double> all = logits.to_doubles();
    const size_t vocab = static_cast<size_t>(logits.size(2));
    int64_t next = pick(std::span<const double>(all).subspan((n - 1) * vocab, vocab), o.temperature, rng);
    if (o.stop_token && next == *o.stop_token) break;
    ids.push_back(next);
    out.push_back(next);
  }
  return out;
}

}  // namespace kiln
