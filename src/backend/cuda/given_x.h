// What the CUDA backend's last kernel left in the matmul scratch for the products that read its
// output y next: y's prepared rows (a decode step's norms: kernels::rms_norm_for_matmul and the
// fused norms), its rows' largest |y| (a prompt step's norms where x's rows form does not pay:
// kernels/row_max.h) or y's rows form (a prompt step's norms and gated activation:
// kernels::rms_norm_x_rows, act_mul_x_rows) or, for one row, its partial maxima (a decode step's
// gated activation, MEMRA_RAW_X: kernels::act_mul_part_max; and decode attention's cluster form
// (MEMRA_RAW_X_ATTENTION), any number of them: kernels::attention_part_max). It holds for the
// launch right after that kernel only: any op in between, even one that does not touch y, may reuse
// the scratch, so the products prepare x themselves again (the same bits either way).
#pragma once

#include <cstdint>

#include "kernels/row_max.h"

namespace memra::cuda {

class GivenX {
 public:
  enum class Kind { none, prepared_rows, row_max, x_rows, part_max };

  // kind, for y of n_rows x dim, left by the launch that made the backend's launch count `at`;
  // n_parts: how many partial maxima (part_max; 0: kernels::part_max_count(dim)).
  void mark(Kind kind, const float* y, int64_t n_rows, int64_t dim, int64_t at, int n_parts = 0) {
    kind_ = kind;
    y_ = y;
    n_rows_ = n_rows;
    dim_ = dim;
    at_ = at;
    n_parts_ = n_parts;
  }
  // What the products over x (n_rows x dim) find when the launch count is `now`.
  Kind of(const float* x, int64_t n_rows, int64_t dim, int64_t now) const {
    return x == y_ && n_rows == n_rows_ && dim == dim_ && now == at_ ? kind_ : Kind::none;
  }
  int n_parts() const { return n_parts_; }

 private:
  Kind kind_ = Kind::none;
  const float* y_ = nullptr;
  int64_t n_rows_ = 0, dim_ = 0, at_ = -1;
  int n_parts_ = 0;
};

// What the products are handed for a kind past prepared_rows (kernels::matmul_shared_x_handed).
inline kernels::Handed handed_of(GivenX::Kind kind) {
  return kind == GivenX::Kind::x_rows    ? kernels::Handed::rows
         : kind == GivenX::Kind::row_max ? kernels::Handed::row_max
                                         : kernels::Handed::part_max;
}

}  // namespace memra::cuda
