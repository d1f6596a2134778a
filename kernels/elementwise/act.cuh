// Private to kernels/: the gated activations' value, one definition for act_mul and the kernels
// that fuse it (act_mul_for_matmul), so both write the same bits. The CPU reference's formulas
// term for term: silu(g) = g / (1 + exp(-g)); gelu with the tanh approximation
// 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
#pragma once

#include "kernels/kernels.h"

namespace memra::kernels::detail {

template <Act kAct>
__device__ __forceinline__ float act_value(float g, float u) {
  float a;
  if constexpr (kAct == Act::silu) {
    a = g / (1.0f + expf(-g));
  } else {
    constexpr float kSqrt2OverPi = 0.7978845608028654f;
    const float inner = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    a = 0.5f * g * (1.0f + tanhf(inner));
  }
  return a * u;
}

}  // namespace memra::kernels::detail
