// Derivative rules of the pointwise ops, after PyTorch's tools/autograd/derivatives.yaml
// (and the ATen backward kernels it names: threshold_backward, gelu_backward, ...).
// A rule computes in the result's dtype and shape; `input_grad` then sums broadcasting away
// (Builder::sum_to) and casts back to the input's dtype, as PyTorch's autograd engine does.
#include <cmath>
#include <numbers>

#include "ir/error.h"
#include "passes/autograd/rules.h"
#include "passes/autograd/vjp.h"

namespace kiln::autograd {

namespace {

// The gradient of input i from a gradient in the result's shape and dtype.
Value input_grad(VjpContext& c, int i, Var g) {
  Var in = c.input(i);
  return c.b.to(c.b.sum_to(g, in.shape()), in.dtype());
}

// A 0-d constant of the dtype of `like`.

using GradFn = Var (*)(VjpContext& c, Var g);

// A rule with one GradFn per input (nullptr: that input never gets a gradient); each runs only
// when its input needs a gradient and that input is floating.
void rule(Op op, std::vector<GradFn> fns) {
  register_vjp(op, [fns](VjpContext& c) {
    std::vector<Value> out(c.node.inputs().size());
    KILN_INTERNAL_ASSERT(c.grad_outputs[0], "a pointwise rule runs with its result's gradient");
    for (size_t i = 0; i < out.size() && i < fns.size(); ++i) {
      if (!fns[i] || !c.needs_grad[i] || !is_floating(c.input(static_cast<int>(i)).dtype())) continue;
      out[i] = input_grad(c, static_cast<int>(i), fns[i](c, c.grad()));
    }
    return out;
  });
}

Var gelu_grad(VjpContext& c, Var g) {
  Builder& b = c.b;
  Var x = c.input(0);
  if (c.attrs().get_string("approximate") == "tanh") {
    // ATen's GeluBackward, tanh approximation.
    const double beta = std::numbers::sqrt2 * (2 / std::sqrt(std::numbers::pi)) * 0.5;
    const double kappa = 0.044715;
    Var x_sq = x * x;
    Var x_cube = x_sq * x;
    Var tanh_inner = b.tanh((x + x_cube * kappa) * beta);
    Var left = x * 0.5;
    Var right = tanh_inner + 1.0;
    Var left_derivative = right * 0.5;
    Var right_derivative = left * (1.0 - tanh_inner * tanh_inner);
    Var inner_derivative = (x_sq * (3 * kappa) + 1.0) * beta;
    return g * (left_derivative + right_derivative * inner_derivative);
  }
  // d/dx x*Phi(x) = Phi(x) + x*phi(x).
  const double alpha = (2 / std::sqrt(std::numbers::pi)) * (1 / std::numbers::sqrt2) * 0.5;
  Var cdf = (b.erf(x * (1 / std::numbers::sqrt2)) + 1.0) * 0.5;
  Var pdf = b.exp(x * x * -0.5) * alpha;
  return g * (cdf + x * pdf);
}

// maximum/minimum: ties split the gradient half and half; the losing side gets none.
Var tie_split(VjpContext& c, Var g) { return c.b.where(c.b.eq(c.input(0), c.input(1)), g / 2.0, g); }

Var pow_base_grad(VjpContext& c, Var g) {
  Var base = c.input(0), e = c.input(1);
  Var d = g * (e * c.b.pow(base, e - 1.0));
  return c.b.where(c.b.eq(e, num(c, 0, e)), num(c, 0, g), d);
}

Var pow_exponent_grad(VjpContext& c, Var g) {
  Builder& b = c.b;
  Var base = c.input(0), e = c.input(1), y = c.result();
  // 0^e for e >= 0 has derivative 0 in e (PyTorch masks the log(0) = -inf there).
  Var mask = b.logical_and(b.eq(base, num(c, 0, base)), b.ge(e, num(c, 0, e)));
  return g * b.where(mask, num(c, 0, g), y * b.log(b.to(base, y.dtype())));
}

Var clamp_grad(VjpContext& c, Var g) {
  Builder& b = c.b;
  Var x = c.input(0);
  std::optional<double> lo = c.attrs().opt_float("min"), hi = c.attrs().opt_float("max");
  Var inside;
  if (lo) inside = b.ge(x, num(c, *lo, x));
  if (hi) {
    Var below = b.le(x, num(c, *hi, x));
    inside = inside ? b.logical_and(inside, below) : below;
  }
  KILN_INTERNAL_ASSERT(inside, "clamp has a min or a max");
  return b.where(inside, g, num(c, 0, g));
}

}  // namespace

void install_pointwise_vjps() {
  // ---- unary
  rule(Op::Neg, {[](VjpContext&, Var g) { return -g; }});
  rule(Op::Abs, {[](VjpContext& c, Var g) { return g * c.b.sign(c.input(0)); }});
  rule(Op::Exp, {[](VjpContext& c, Var g) { return g * c.result(); }});
  rule(Op::Log, {[](VjpContext& c, Var g) { return g / c.input(0); }});
  rule(Op::Log1p, {[](VjpContext& c, Var g) { return g / (c.input(0) + 1.0); }});
  rule(Op::Sqrt, {[](VjpContext& c, Var g) { return g / (2.0 * c.result()); }});
  rule(Op::Rsqrt, {[](VjpContext& c, Var g) {
         Var y = c.result();
         return (g * -0.5) * (y * y * y);
       }});
  rule(Op::Reciprocal, {[](VjpContext& c, Var g) {
         Var y = c.result();
         return -g * (y * y);
       }});
  rule(Op::Sin, {[](VjpContext& c, Var g) { return g * c.b.cos(c.input(0)); }});
  rule(Op::Cos, {[](VjpContext& c, Var g) { return g * -c.b.sin(c.input(0)); }});
  rule(Op::Tanh, {[](VjpContext& c, Var g) {
         Var y = c.result();
         return g * (1.0 - y * y);
       }});
  rule(Op::Sigmoid, {[](VjpContext& c, Var g) {
         Var y = c.result();
         return g * (1.0 - y) * y;
       }});
  // threshold_backward(grad, result, 0): 0 where result <= 0, else the gradient. Written with
  // <= as PyTorch's kernel is: a NaN input gives a NaN result, which is not <= 0, so its
  // gradient passes through and the NaN stays visible in training (`y > 0 ? g : 0` gave 0).
  rule(Op::Relu, {[](VjpContext& c, Var g) {
         Var y = c.result();
         return c.b.where(c.b.le(y, num(c, 0, y)), num(c, 0, g), g);
       }});
  rule(Op::Gelu, {gelu_grad});
  rule(Op::Silu, {[](VjpContext& c, Var g) {
         Var x = c.input(0);
         Var s = c.b.sigmoid(x);
         return g * s * (1.0 + x * (1.0 - s));
       }});
  rule(Op::Square, {[](VjpContext& c, Var g) { return g * (c.input(0) * 2.0); }});
  rule(Op::Erf, {[](VjpContext& c, Var g) {
         Var x = c.input(0);
         return (2 / std::sqrt(std::numbers::pi)) * c.b.exp(-(x * x)) * g;
       }});
  // d erfinv(x) = sqrt(pi) / 2 * exp(erfinv(x)^2): from its result, no second erfinv.
  rule(Op::Erfinv, {[](VjpContext& c, Var g) {
         Var y = c.result();
         return (std::sqrt(std::numbers::pi) / 2) * c.b.exp(y * y) * g;
       }});
  rule(Op::Log2, {[](VjpContext& c, Var g) { return g / (c.input(0) * std::numbers::ln2); }});
  rule(Op::Exp2, {[](VjpContext& c, Var g) { return g * (c.result() * std::numbers::ln2); }});
  // The cast's gradient is cast back (input_grad does it); integer inputs get none.
  rule(Op::To, {[](VjpContext&, Var g) { return g; }});

  // ---- binary and ternary (input_grad sums the broadcast dims away)
  rule(Op::Add, {[](VjpContext&, Var g) { return g; }, [](VjpContext&, Var g) { return g; }});
  rule(Op::Sub, {[](VjpContext&, Var g) { return g; }, [](VjpContext&, Var g) { return -g; }});
  rule(Op::Mul, {[](VjpContext& c, Var g) { return g * c.input(1); },
                 [](VjpContext& c, Var g) { return g * c.input(0); }});
  rule(Op::Div, {[](VjpContext& c, Var g) { return g / c.input(1); },
                 [](VjpContext& c, Var g) {
                   Var o = c.input(1);
                   return -g * ((c.input(0) / o) / o);
                 }});
  rule(Op::Pow, {pow_base_grad, pow_exponent_grad});
  rule(Op::Maximum, {[](VjpContext& c, Var g) {
                       return c.b.masked_fill(tie_split(c, g), c.b.lt(c.input(0), c.input(1)), 0);
                     },
                     [](VjpContext& c, Var g) {
                       return c.b.masked_fill(tie_split(c, g), c.b.gt(c.input(0), c.input(1)), 0);
                     }});
  rule(Op::Minimum, {[](VjpContext& c, Var g) {
                       return c.b.masked_fill(tie_split(c, g), c.b.gt(c.input(0), c.input(1)), 0);
                     },
                     [](VjpContext& c, Var g) {
                       return c.b.masked_fill(tie_split(c, g), c.b.lt(c.input(0), c.input(1)), 0);
                     }});
  // fmod and remainder: self's gradient passes; other's is -g times the quotient, truncated for
  // fmod and floored for remainder (PyTorch's fmod_backward and remainder_backward).
  rule(Op::Fmod, {[](VjpContext&, Var g) { return g; },
                  [](VjpContext& c, Var g) { return -g * c.b.trunc(c.input(0) / c.input(1)); }});
  rule(Op::Remainder, {[](VjpContext&, Var g) { return g; },
                       [](VjpContext& c, Var g) { return -g * c.b.floor(c.input(0) / c.input(1)); }});
  // atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2).
  rule(Op::Atan2, {[](VjpContext& c, Var g) {
                     Var y = c.input(0), x = c.input(1);
                     return g * (x / (x * x + y * y));
                   },
                   [](VjpContext& c, Var g) {
                     Var y = c.input(0), x = c.input(1);
                     return g * (-y / (x * x + y * y));
                   }});
  rule(Op::Where, {nullptr, [](VjpContext& c, Var g) { return c.b.where(c.input(0), g, num(c, 0, g)); },
                   [](VjpContext& c, Var g) { return c.b.where(c.input(0), num(c, 0, g), g); }});
  // clamp_backward: the gradient passes where min <= x <= max (bounds included).
  rule(Op::Clamp, {clamp_grad});
  rule(Op::MaskedFill, {[](VjpContext& c, Var g) { return c.b.masked_fill(g, c.input(1), 0); }, nullptr});
}

}  // namespace kiln::autograd
