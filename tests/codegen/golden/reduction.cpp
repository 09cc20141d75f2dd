// group 0 reduction [amax, argmax, unsqueeze, sub, exp, sum]: %m %a %unsqueeze %d %e %s
extern "C" void k0(void* const* buffers, const int64_t* scalars) {
  (void)scalars;
  int64_t* __restrict b0 = (int64_t*)buffers[0];  // output %a
  float* __restrict b1 = (float*)buffers[1];  // output %s
  const float* __restrict b2 = (const float*)buffers[2];  // input %x
  // rows of computes %a %s
  kiln_parallel(7, 6, [&](int64_t row_begin, int64_t row_end) {
    for (int64_t row = row_begin; row < row_end; ++row) {
      float m_acc = -__builtin_inff();
      bool m_acc_nan = false;
      int32_t m_acc_key = kiln_order_key(m_acc);
      float a_acc = -__builtin_inff();
      int64_t a_acc_idx = 0;
      // reduces %m %a
      for (int64_t r = 0; r < 1023; ++r) {
        {
          const float v_ = b2[row * 1023 + r];
          const int32_t k_ = kiln_order_key(v_);
          m_acc_key = k_ > m_acc_key ? k_ : m_acc_key;
          m_acc_nan |= v_ != v_;
        }
        {
          const float v_ = b2[row * 1023 + r];
          if (kiln_argmax_wins(v_, a_acc)) { a_acc = v_; a_acc_idx = r; }
        }
      }
      m_acc = m_acc_nan ? __builtin_nanf("") : kiln_from_order_key(m_acc_key);
      const float m = m_acc;
      const int64_t a = a_acc_idx;
      float s_acc = 0.0f;
      // reduces %s
      {
        #pragma clang fp reassociate(on)
        for (int64_t r = 0; r < 1023; ++r) {
          const float d = b2[row * 1023 + r] - m;
          const float e = kiln_exp(d);
          s_acc += e;
        }
      }
      const float s = s_acc;
      b0[row] = a;
      b1[row] = s;
    }
  });
}
