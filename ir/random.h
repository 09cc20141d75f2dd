#pragma once
// Counter-based random numbers (Philox-4x32-10, as in PyTorch's CUDA generator and JAX):
// the value for element i depends only on (seed, i), so dropout masks and random inputs
// are reproducible on any backend and in any order of evaluation.
#include <array>
#include <cmath>
#include <cstdint>

namespace kiln {

inline std::array<uint32_t, 4> philox4x32(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(M0) * ctr[0], p1 = uint64_t(M1) * ctr[2];
    ctr = {uint32_t(p1 >> 32) ^ ctr[1] ^ key[0], uint32_t(p1), uint32_t(p0 >> 32) ^ ctr[3] ^ key[1], uint32_t(p0)};
    key[0] += W0;
    key[1] += W1;
  }
  return ctr;
}

// 32 random bits for element `index` of stream `seed`.
inline uint32_t random_bits(uint64_t seed, uint64_t index) {
  return philox4x32({uint32_t(index), uint32_t(index >> 32), 0, 0}, {uint32_t(seed), uint32_t(seed >> 32)})[0];
}

// Uniform in [0, 1) with 24 random bits (exact in float).
inline float random_uniform(uint64_t seed, uint64_t index) {
  return static_cast<float>(random_bits(seed, index) >> 8) * (1.0f / 16777216.0f);
}

// Standard normal by Box-Muller over two uniforms of the same counter.
inline double random_normal(uint64_t seed, uint64_t index) {
  auto r = philox4x32({uint32_t(index), uint32_t(index >> 32), 1, 0}, {uint32_t(seed), uint32_t(seed >> 32)});
  double u1 = (static_cast<double>(r[0]) + 1.0) / 4294967297.0;  // (0, 1)
  double u2 = static_cast<double>(r[1]) / 4294967296.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

}  // namespace kiln
