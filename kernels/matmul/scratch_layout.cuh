// Private to the kernels: where a matmul scratch buffer (matmul_scratch_bytes) keeps x's prepared
// forms, shared by the kernels that write them (prepare_x.cu, the gated activation's rows form in
// elementwise.cu) and the products that read them (matmul.cu).
#pragma once

#include <cstdint>

#include "kernels/matmul/matmul_launch.cuh"

namespace memra::kernels::matmul_detail {

// Whether tiled weights of n_out rows take the wgmma kernels is matmul.cu's wgmma_pays; below this
// many tokens they never do, so x's wgmma form needs no room (kPreparedRows, the decode norms'
// prepared rows, stays under it).
constexpr int kWgmmaMinTokens = 16;

// Where the parts of the scratch live: the f16 x, its copy in physical k order (prefill only, for
// the wgmma kernel), then the group sums, the row scales and the rows' largest |x| (read by
// launch_xp_groups' second kernel; written by its first, or by the kernel that wrote x,
// kernels/row_max.h).
struct ScratchLayout {
  int64_t xsum_stride, xh_bytes, xp_bytes, xsum_bytes;
  ScratchLayout(int64_t n_tokens, int64_t n_in)
      : xsum_stride((n_in + 31) / 32),
        xh_bytes(round16(n_tokens * n_in * 2)),
        xp_bytes(n_tokens > kWgmmaMinTokens ? xp_tokens(n_tokens) * n_in * 2 : 0),
        xsum_bytes(round16(n_tokens * xsum_stride * 4)) {}
  int64_t total(int64_t n_tokens) const {
    return xh_bytes + xp_bytes + xsum_bytes + 2 * round16(n_tokens * 4);
  }
  static int64_t round16(int64_t b) { return (b + 15) / 16 * 16; }

  // The parts' places in a scratch buffer laid out so.
  struct Parts {
    uint16_t *xh, *xp;
    float *xsum, *xinv;
  };
  Parts parts(void* scratch) const {
    auto* bytes = static_cast<uint8_t*>(scratch);
    return {reinterpret_cast<uint16_t*>(bytes), reinterpret_cast<uint16_t*>(bytes + xh_bytes),
            reinterpret_cast<float*>(bytes + xh_bytes + xp_bytes),
            reinterpret_cast<float*>(bytes + xh_bytes + xp_bytes + xsum_bytes)};
  }
  // One row's partial maxima (kernels/row_max.h: Handed::part_max) sit where its f16 form would:
  // the one-token kernel reading that row raw reads no f16 form, and no launch writes one.
  static float* part_max(void* scratch) { return static_cast<float*>(scratch); }
  float* xmax(void* scratch, int64_t n_tokens) const {
    return reinterpret_cast<float*>(static_cast<uint8_t*>(scratch) + xh_bytes + xp_bytes +
                                    xsum_bytes + round16(n_tokens * 4));
  }
};

}  // namespace memra::kernels::matmul_detail
