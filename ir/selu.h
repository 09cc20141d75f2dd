#pragma once
// SELU's constants (Klambauer et al., "Self-Normalizing Neural Networks", as
// torch.nn.functional.selu has them): one definition for the reference kernel, the
// decomposition and the derivative rule.
namespace kiln {

inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;

}  // namespace kiln
