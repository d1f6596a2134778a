// Non-owning view of a tensor: dtype, up to 4 dims in ggml order (ne[0] is the contiguous,
// fastest-varying dimension), and a pointer to its bytes (host memory for the CPU backend).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/dtype.h"

namespace memra {

inline constexpr int kMaxDims = 4;

struct TensorView {
  std::string name;
  DType dtype = DType::f32;
  int n_dims = 0;
  std::array<uint64_t, kMaxDims> ne{1, 1, 1, 1};  // elements per dim; unused dims are 1
  const void* data = nullptr;
  uint64_t n_bytes = 0;

  uint64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  uint64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
};

}  // namespace memra
