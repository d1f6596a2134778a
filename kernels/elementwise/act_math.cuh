// Private to kernels/: one element of a gated activation, act(gate) * up, shared by act_mul
// (elementwise.cu) and the activation that also prepares the down projection's input
// (matmul/act_prepare.cu), so both compute every value with the same steps.
#pragma once

#include "kernels/kernels.h"

namespace memra::kernels::detail {

// The CPU reference's formulas term for term: silu(g) = g / (1 + exp(-g)); gelu with the tanh
// approximation 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))).
template <Act kAct>
__device__ __forceinline__ float act_times(float g, float u) {
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
