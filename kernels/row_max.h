// The kernels before a prompt step's products handing them what x's wgmma form needs, so that the
// products prepare x in one launch (the rows' largest |x|) or in none (x's rows form).
//
// Why: a prompt step prepares four product inputs a layer (prepare_x.cu's launch_xp_groups: a pass
// for the rows' largest |x|, then the groups). The norm that makes the q/k/v and gate/up inputs
// already finds each row's largest |y| as it writes y (norm_row.cuh, for the decode steps' prepared
// rows). The largest |x| is exact in any order, so the products' bits do not change (kernel-check
// compares them with the two-launch form). Measured on the H200 (docs/PERFORMANCE.md): the norms'
// maxima, thirty-seventh round, 8B Q4_K_M pp512 +0.9%; x's rows form written by the norms and the
// gated activation, fortieth round, pp512 +3.2% (Q4_K_M) and +3.0% (BF16), the default since. The
// gated activation writing the maxima alone was measured no faster (its launch 4.6 us slower at 512
// tokens for the pass it saves) and removed.
#pragma once

#include <cstdint>

#include "kernels/kernels.h"

namespace memra::kernels {

// What such a kernel hands the products besides its output y: each row's largest |y| (row_max),
// y's rows form itself (rows; below), or one row's partial maxima (part_max; below).
enum class Handed { row_max, rows, part_max };

// Whether an n_rows-token product over tiled weights takes x's wgmma form by token groups (the
// steps past the decode kernels' 64 tokens on sm_90a): where handing it the row maxima pays.
bool row_max_pays(int64_t n_rows);

// rms_norm (d null) or add_rms_norm of n_rows rows, bit for bit those kernels' x and y, that also
// writes each row's largest |y| where matmul_shared_x_handed reads it in `scratch`
// (matmul_scratch_bytes(n_rows, dim) bytes, 16-byte aligned).
void rms_norm_row_max(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                      float eps, float* y, void* scratch, cudaStream_t stream);

// x's rows form (matmul_launch.cuh: x_rows_offset; the default, MEMRA_X_ROWS=0 turns it off for
// the A/B): a prompt step's norm writes the products' f16 input itself, a row a block in whole
// runs, so the products take no preparing launch at all.
//
// Whether products over n_rows x dim would read x's rows form (the steps past the decode kernels'
// 64 tokens on sm_90a with the switch on; dim whole 256-element chunks).
bool x_rows_pays(int64_t n_rows, int64_t dim);

// rms_norm (d null) or add_rms_norm of n_rows rows, bit for bit those kernels' x and y, that also
// writes y's rows form with its group sums and row scales where matmul_shared_x_handed reads them
// in `scratch` (matmul_scratch_bytes(n_rows, dim) bytes; x, d, y and scratch 16-byte aligned, dim a
// multiple of 64).
void rms_norm_x_rows(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                     float eps, float* y, void* scratch, cudaStream_t stream);

// act_mul(act, gate, up, n_rows, n_cols, ld_in = n_cols, out), bit for bit, that also writes x's
// rows form of out for the down projection where matmul_shared_x_handed reads it in `scratch`
// (matmul_scratch_bytes(n_rows, n_cols) bytes). False, with nothing launched, where the rows do
// not allow it (more than 16 rows, n_cols a multiple of 64, every pointer 16-byte aligned): the
// caller runs act_mul instead.
bool act_mul_x_rows(Act act, const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
                    float* out, void* scratch, cudaStream_t stream);

// A decode step's one-token product reading x raw (MEMRA_RAW_X, the default): the
// kernel before hands it the largest |y| of each kPartMaxElems of its one row, and every block of
// the one-token kernel (K-quants; the tiled decode kernel for F16/BF16) takes the row's largest |y|
// from those few floats and makes x's f16 fragments and group sums from y itself, as x_to_f16
// would (matmul/one_token_x.cuh), so no x_to_f16 launch runs between them: the same bits. Why not
// otherwise: the products finding the maximum themselves put a pass over the row and two block
// barriers on every block (twenty-fourth round, 8B c1 -9%), and the kernel before writing the
// prepared row made one block do the row (fifty-eighth round); partial maxima are a block reduction
// in the kernel before and a warp's few loads and shuffles in each product block.
constexpr int64_t kPartMaxElems = 1024;
constexpr int64_t kMaxParts = 64;  // the widest row handed so: 65,536
inline int64_t part_max_count(int64_t n_cols) {
  return (n_cols + kPartMaxElems - 1) / kPartMaxElems;
}
// The switch: MEMRA_RAW_X unset or 1, the gated activation hands the down product its row's
// partial maxima; 0, the products prepare x (the A/B). The default since the sixty-fifth round's
// H100 A/B (docs/PERFORMANCE.md; medians of four runs over two rounds: 8B Q4_K_M c1 340.0 -> 343.0
// tok/s, Q8_0 266.1 -> 273.0, BF16 174.8 -> 177.2; the 0.6B Q4_K_M 990.7 -> 1,011.8). The same
// bits either way.
bool raw_x_enabled();
// The o product's input the same way (MEMRA_RAW_X_ATTENTION unset or 1; 0, the products prepare
// x; `gpu_check.sh rawxattn`): a one-token step's decode attention, where its one-split form
// merges a token's splits through a cluster (decode_cluster.cuh), writes each block's largest
// |out| of the share it merges, so the o product reads its input raw too and the last x_to_f16
// launch of a one-token layer goes. Any other attention form writes none and the products prepare
// x (the same bits either way). The default since the sixty-sixth round: once x's group sums took
// a tree order (prepare_x.cuh: half_sum) the Q4_K kernel's raw form got cheaper, and the H100 A/B
// (medians of two) put the 0.6B Q4_K_M at one sequence 1,045.1 -> 1,056.8 tok/s, its BF16 936.1
// -> 953.7, the 8B Q4_K_M 352.3 -> 353.3, Q8_0 and BF16 +0.2% (the sixty-fifth round, before the
// tree: 8B Q4_K_M -1.6%). A row's partial maxima may be any number up to
// part_max_capacity(n_cols), each the largest |y| of some of the row's elements, together covering
// all of them: only their largest is read.
bool raw_x_attention_enabled();
// attention() (kernels.h) that, at one token, also hands the o product out's partial maxima in
// part_max (the matmul scratch's place: matmul_detail::scratch_part_max), at most part_max_cap of
// them, where the launch's form writes them; returns how many it wrote (0: none, and the products
// prepare x as after attention()).
int attention_part_max(const PagedKv& kv, const StepDev& step, const float* q, int64_t ldq,
                       const AttentionArgs& args, float* out, void* scratch, float* part_max,
                       int part_max_cap, cudaStream_t stream,
                       const AttentionPrologue* prologue = nullptr);
// The most partial maxima one row of n_cols may be handed: where the scratch holds them (its f16
// form's bytes), at most kMaxHandedParts.
constexpr int64_t kMaxHandedParts = 256;
inline int64_t part_max_capacity(int64_t n_cols) {
  return n_cols / 2 < kMaxHandedParts ? n_cols / 2 : kMaxHandedParts;
}
// Whether products of n_rows x n_cols read x raw where its partial maxima are handed over: one
// row, every output tiled Q4_K, Q6_K or Q8_0 (the one-token kernel) or one F16 / BF16 output of
// its dtype (the tiled decode kernel; matmul.cu checks the outputs); elsewhere they prepare x.
bool part_max_read(int64_t n_rows, int64_t n_cols);

// act_mul(act, gate, up, 1, n_cols, n_cols, out), bit for bit, for one row, that also writes the
// largest |out| of each kPartMaxElems of it where matmul_shared_x_handed(Handed::part_max) reads
// them in `scratch` (matmul_scratch_bytes(1, n_cols) bytes). False, with nothing launched, where
// the row does not allow it (n_cols a multiple of 4 up to kMaxParts x kPartMaxElems, every
// pointer 16-byte aligned): the caller runs act_mul instead.
bool act_mul_part_max(Act act, const float* gate, const float* up, int64_t n_cols, float* out,
                      void* scratch, cudaStream_t stream);

// matmul_shared_x for an x whose kernel handed the products `handed` in `scratch` (and nothing
// used the scratch since): x's wgmma form is made from the maxima without a pass of its own, or
// taken as the rows form is. Where the outputs need another form of x (any of them off the wgmma
// kernels, or, for the rows form, off the kernels that read it), x is prepared as matmul_shared_x
// does and what was handed over is not read. The same bits as matmul_shared_x. n_parts: how many
// partial maxima were handed (Handed::part_max; 0: part_max_count(n_in), the activation's).
void matmul_shared_x_handed(Handed handed, const MatmulOut* outs, int n_outs, int64_t n_in,
                            const float* x, int64_t n_tokens, void* scratch, cudaStream_t stream,
                            const SideStream* side = nullptr, int n_parts = 0);

namespace matmul_detail {
// Where the row maxima of n_rows x dim sit in a matmul scratch buffer (scratch_layout.cuh).
float* scratch_row_max(void* scratch, int64_t n_rows, int64_t dim);
// Where x's rows form of n_rows x dim sits in a matmul scratch buffer (kernel-check's teeth).
uint16_t* scratch_x_rows(void* scratch, int64_t n_rows, int64_t dim);
// Where one row's partial maxima sit in a matmul scratch buffer (kernel-check's teeth).
float* scratch_part_max(void* scratch);
}  // namespace matmul_detail

}  // namespace memra::kernels
