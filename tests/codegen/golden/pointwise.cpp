// group 0 pointwise [mul, gelu, full, gt]: %xy %z %full %c
extern "C" void k0(void* const* buffers, const int64_t* scalars) {
  (void)scalars;
  float* __restrict b0 = (float*)buffers[0];  // output %z
  uint8_t* __restrict b1 = (uint8_t*)buffers[1];  // output %c
  const uint16_t* __restrict b2 = (const uint16_t*)buffers[2];  // input %x
  const float* __restrict b3 = (const float*)buffers[3];  // input %y
  // computes %z %c
  kiln_parallel(5, 6, [&](int64_t p_begin, int64_t p_end) {
    for (int64_t p = p_begin; p < p_end; ++p) {
      for (int64_t i = 0; i < 1023; ++i) {
        const float xy = kiln_h2f(b2[p * 1023 + i]) * b3[i];
        const float z = kiln_gelu_tanh(xy);
        b0[p * 1023 + i] = z;
        const bool c = z > 0.5f;
        b1[p * 1023 + i] = (uint8_t)c;
      }
    }
  });
}
