// Private to kernels/matmul: the arguments the host dispatch (matmul.cu) hands to the decode and
// prefill kernels, and their launchers, instantiated once per weight dtype in their own .cu files
// so the two compile in parallel.
#pragma once

#include <cuda.h>  // CUtensorMap (the type only: the driver's encoder is found at run time)
#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "kernels/common.cuh"
#include "kernels/launch.cuh"

namespace memra::kernels::matmul_detail {

struct MatmulArgs {
  const uint8_t* w = nullptr;  // n_out rows of row_bytes (or tiled records), 16-byte aligned
  int64_t row_bytes = 0;
  int n_in = 0;
  int n_out = 0;
  // x as f16 [n_tokens][n_in], each row scaled by its own power of two (matmul.cu); lane t of an
  // mma step reads elements 4t..4t+3 of the step's 16 (weight_frag.cuh's k permutation).
  const uint16_t* xh = nullptr;
  // The same x in physical k order and the wgmma kernel's tile layout (xp_offset), set only for
  // that kernel.
  const uint16_t* xp = nullptr;
  // Per token: the sum of each 32-element group of the scaled, f16-rounded x (xsum_stride groups
  // per row, the last may hold 16), and the power of two that undoes the row's scaling.
  const float* xsum = nullptr;
  int xsum_stride = 0;
  const float* xinv = nullptr;
  int n_tokens = 0;
  // xp holds x's rows form instead (x_rows_offset; the prefill kernels read it through a tensor
  // map, x_rows_map). Here, in padding, so that no other member moves.
  bool xp_rows = false;
  float* y = nullptr;
  int64_t ldy = 0;
  // One token's x read raw (one_token_x.cuh: XRaw; the one-token kernel, and the tiled decode
  // kernel's F16/BF16 launch of one token tile): its f32 row and the
  // n_parts partial maxima its kernel handed over (kernels/row_max.h: Handed::part_max), where xh,
  // xsum and xinv are then not read. Null: x's prepared form.
  const float* x_raw = nullptr;
  const float* x_parts = nullptr;
  int n_parts = 0;
  // x_raw: a warp's first chunk of it loaded before the partial maxima (one_token_x.cuh: RawFirst;
  // MEMRA_RAW_X_EARLY, the default).
  bool x_raw_early = false;
};

// Where element (token n, physical k position k) of x sits in the wgmma prefill kernel's copy
// (matmul_prefill_wgmma.cu): tiles of kXpTokens tokens x kXpK k, contiguous in k-tile order per
// token block, each [k16 step][8-token group][k half][token][8 k] (8 x 8 core matrices). Token
// rows are padded to whole blocks (rows past the batch are never written: only their own output
// columns would read them, and those are not stored).
constexpr int kXpTokens = 128, kXpK = 64;
__host__ __device__ inline int64_t xp_offset(int64_t n, int64_t k, int64_t n_in) {
  const int64_t tile = (n / kXpTokens) * (n_in / kXpK) + k / kXpK;
  const int64_t nn = n % kXpTokens, kk = k % kXpK;
  return tile * (kXpTokens * kXpK) + kk / 16 * (kXpTokens * 16) +
         ((nn / 8) * 2 + kk % 16 / 8) * 64 + nn % 8 * 8 + kk % 8;
}
inline int64_t xp_tokens(int64_t n_tokens) {
  return (n_tokens + kXpTokens - 1) / kXpTokens * kXpTokens;
}

// x's rows form (MEMRA_X_ROWS, matmul.cu): the same f16 values in physical k order, but as plain
// rows, [token][n_in], so that a kernel writing a row a block (x_to_f16, the norms) writes it in
// whole 32-byte runs instead of 16-byte pieces 128 bytes to 4 KB apart. The prefill kernels bring
// it into shared memory a box of kXRowsK x their tokens at a time through a tensor map with the
// 128-byte swizzle, which is a layout wgmma reads directly (wgmma.cuh: b_desc_rows).
constexpr int kXRowsK = 64;
__host__ __device__ inline int64_t x_rows_offset(int64_t n, int64_t k, int64_t n_in) {
  return n * n_in + k;
}
// The tensor map of x.xp's rows form (x.n_tokens rows of x.n_in f16) for boxes of kXRowsK x
// box_tokens, 128-byte swizzle, rows past the batch read as zeros; a zeroed map where x.xp_rows is
// false (the kernels then take no tensor copy). Fails (Error) where the driver refuses it.
CUtensorMap x_rows_map(const MatmulArgs& x, int box_tokens);

// The largest dynamic shared memory a block may opt into on sm_80 (A100), and on sm_90 (the
// kernels built for sm_90a only).
constexpr int kMaxSmem = 163 * 1024, kMaxSmemHopper = 227 * 1024;

// Tokens the decode kernel covers (up to eight mma n8 token tiles); more go to the prefill kernel.
constexpr int kDecodeTokens = 64;

using detail::allow_smem_once;  // kernels/common.cuh

template <DType D>
void launch_decode(const MatmulArgs& args, cudaStream_t stream);
template <DType D>
void launch_prefill(const MatmulArgs& args, cudaStream_t stream);
// The same over tiled weights (args.w: tiled.cuh records), for the dtypes kHasTiled names.
template <DType D>
void launch_decode_tiled(const MatmulArgs& args, cudaStream_t stream);
// 9-16 tokens take the decode kernels' two-token-tile form (kTwoTileTokens), the tiled kernel's
// and the file-layout one's, unless two_tile_decode_enabled() says no (MEMRA_TWO_TILE_DECODE=0:
// eight token tiles, six of them empty, the form before; the same bits).
constexpr int kTwoTileTokens = 16;
bool two_tile_decode_enabled();
// The tiled decode kernel over experts' row groups (matmul_experts.cu): block (tile, e) runs
// expert e's matrix (args.w + e * expert_bytes) over x rows [begin[e], begin[e + 1]) of args (the
// pairs sorted by expert) into the same rows of args.y, 8 or 64 rows a pass; an expert with no
// rows returns at once. begin: device memory, n_expert + 1 offsets; args.n_tokens: all the
// experts' rows together (it picks the pass size).
struct ExpertRows {
  const int32_t* begin = nullptr;
  int64_t expert_bytes = 0;
  int n_expert = 0;
};
template <DType D>
void launch_decode_tiled_grouped(const MatmulArgs& args, const ExpertRows& rows,
                                 cudaStream_t stream);
// The same over experts' matrices in the file's (ggml) layout (matmul_decode.cu; args.row_bytes
// set), for every type launch_decode takes.
template <DType D>
void launch_decode_grouped(const MatmulArgs& args, const ExpertRows& rows, cudaStream_t stream);
// The same experts one (token, expert) pair at a time, for decode steps of few pairs: block
// (row block, p) runs expert ids[p]'s matrix in the file's layout (args.w + ids[p] *
// expert_bytes; args.row_bytes set) over x row p / x_div of args into row p of args.y (args.ldy).
// ids: device memory, n_pairs entries (at most 65,535).
struct ExpertPairs {
  const int32_t* ids = nullptr;
  int64_t expert_bytes = 0;
  int n_pairs = 0;
  int x_div = 1;
};
template <DType D>
void launch_decode_pairs(const MatmulArgs& args, const ExpertPairs& pairs, cudaStream_t stream);
// x's f16 form as matmul prepares it (prepare_x.cu) for n_rows rows into scratch (laid out as for
// matmul_scratch_bytes(n_rows, n_in)): row r is x row rows[r] (rows null: row r). The returned
// args carry xh, xsum, xsum_stride, xinv and n_in.
MatmulArgs prepare_x_rows(const float* x, int64_t n_rows, int64_t n_in, const int32_t* rows,
                          void* scratch, cudaStream_t stream);
template <DType D>
void launch_prefill_tiled(const MatmulArgs& args, cudaStream_t stream);
// One token over tiled Q4_K, Q6_K or Q8_0, scale groups in the mma's columns
// (matmul_decode_single.cu); the same outputs as launch_decode_tiled, bit for bit. Up to
// kMultiOuts matrices of one dtype over the same x share one launch: blocks [tile_begin[o],
// tile_begin[o + 1]) compute output o (q, k and v of a layer, or gate and up, fill the GPU
// together where each alone would not).
constexpr int kMultiOuts = 4;
struct MultiOut {
  const uint8_t* w[kMultiOuts] = {};
  float* y[kMultiOuts] = {};
  int n_out[kMultiOuts] = {};
  int64_t ldy[kMultiOuts] = {};
  int tile_begin[kMultiOuts + 1] = {};
  int n = 0;
  // Expert mode (launch_decode_experts): output o's blocks cover every (token, expert) pair p,
  // each with all of o's row tiles: pair p multiplies expert ids[p]'s matrix (w[o] + ids[p] *
  // expert_bytes[o]) by x row p / x_div into y[o] row p.
  const int32_t* ids = nullptr;
  int64_t expert_bytes[kMultiOuts] = {};
  int x_div = 1;

  // Appends an output of n_out rows (row stride ldy floats in y) and its row tiles (n <
  // kMultiOuts).
  void add(const void* weights, float* rows, int64_t rows_out, int64_t row_stride) {
    w[n] = static_cast<const uint8_t*>(weights);
    y[n] = rows;
    n_out[n] = static_cast<int>(rows_out);
    ldy[n] = row_stride;
    tile_begin[n + 1] = tile_begin[n] + static_cast<int>((rows_out + 15) / 16);
    ++n;
  }
};
// outs with tile_begin turned from tiles into blocks of `pack` tiles (per pair in expert mode:
// n_pairs = an output's tiles / its matrix's tiles).
inline MultiOut pack_blocks(MultiOut outs, int pack) {
  int begin = 0;
  for (int o = 0; o < outs.n; ++o) {
    const int tiles = (outs.n_out[o] + 15) / 16;
    const int n = outs.tile_begin[o + 1] - outs.tile_begin[o];  // n_pairs * tiles, or tiles
    const int blocks = n / tiles * ((tiles + pack - 1) / pack);
    outs.tile_begin[o] = begin;
    begin += blocks;
  }
  outs.tile_begin[outs.n] = begin;
  return outs;
}
// Up to kMultiOuts outputs over the same x in one launch of a kernel with 128-row blocks (the
// wgmma kernels): block row b runs 128-row block b - block_begin[o] of output o, the same
// instructions as that output's own launch (so the same bits), and outputs too narrow to fill the
// GPU alone (q, k and v of a layer) run side by side instead of one launch after another.
struct BlockOuts {
  const uint8_t* w[kMultiOuts] = {};
  float* y[kMultiOuts] = {};
  int n_out[kMultiOuts] = {};
  int64_t ldy[kMultiOuts] = {};
  int block_begin[kMultiOuts + 1] = {};
  int n = 0;
  // Appends an output of n_out rows (row stride ldy floats in y) and its 128-row blocks (n <
  // kMultiOuts), as MultiOut::add.
  void add(const void* weights, float* rows, int64_t rows_out, int64_t row_stride) {
    w[n] = static_cast<const uint8_t*>(weights);
    y[n] = rows;
    n_out[n] = static_cast<int>(rows_out);
    ldy[n] = row_stride;
    block_begin[n + 1] = block_begin[n] + static_cast<int>((rows_out + 127) / 128);
    ++n;
  }
  // The same outputs in blocks of `rows` rows (a multiple of 16; a kernel of such blocks).
  BlockOuts in_blocks_of(int rows) const {
    BlockOuts b = *this;
    for (int o = 0; o < n; ++o)
      b.block_begin[o + 1] = b.block_begin[o] + (n_out[o] + rows - 1) / rows;
    return b;
  }
  // The one output of args (w, y, n_out, ldy).
  static BlockOuts of(const MatmulArgs& args) {
    BlockOuts outs;
    outs.add(args.w, args.y, args.n_out, args.ldy);
    return outs;
  }
};
// Launches kKernel(x, outs, extra...), a kernel of 128-row blocks (grid y: outs' blocks) over
// kBN-token tiles (grid x), having opted into its smem bytes of shared memory once per device.
template <auto kKernel, int kBN, typename... Extra>
void launch_block_outs(const MatmulArgs& x, const BlockOuts& outs, int threads, int smem,
                       cudaStream_t stream, const Extra&... extra) {
  static std::atomic<uint64_t> smem_set{0};
  allow_smem_once(kKernel, smem, smem_set);
  const dim3 grid(static_cast<unsigned>((x.n_tokens + kBN - 1) / kBN),
                  static_cast<unsigned>(outs.block_begin[outs.n]));
  detail::launch(kKernel, grid, threads, smem, stream, x, outs, extra...);
}
// The output of a multi-output launch that block b computes (begin[o] <= b < begin[o + 1]; outs
// has w, y, n_out, ldy and n per output: MultiOut, BlockOuts), with a's w, y, n_out and ldy set
// to it. Returns o.
template <typename Outs>
__device__ __forceinline__ int take_output(const Outs& outs, const int* begin, int b,
                                           MatmulArgs& a) {
  int o = 0;
  while (o + 1 < outs.n && b >= begin[o + 1]) ++o;
  a.w = outs.w[o];
  a.y = outs.y[o];
  a.n_out = outs.n_out[o];
  a.ldy = outs.ldy[o];
  return o;
}
// Up to kMultiOuts tiled outputs of one dtype over the same x in one launch of the tiled decode
// kernel (MultiOut's w, y, n_out, ldy, tile_begin, n; 16-row tiles), for the batches
// tiled_decode_groups_take (1-8 tokens, and 9-16 on the two-tile form): the same bits as one
// launch_decode_tiled per output. MEMRA_GROUPED_DECODE=0 turns it off (one launch per output).
bool tiled_decode_groups_take(int64_t n_tokens);
bool grouped_decode_enabled();
template <DType D>
void launch_decode_tiled_multi(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream);
// The tiled decode kernel's pair form (matmul_decode_pair.cu; Q4_K, Q6_K, Q8_0): two row tiles a
// block sharing each chunk's x rows through shared memory, the same bits as launch_decode_tiled
// (_multi). pair_x_takes says whether a one-token-tile launch over x of `tiles` row tiles takes
// it, at 5-8 tokens (MEMRA_TILED_PAIR_X: `big`, the default, launches that do not take the ahead
// form, `ahead`, of a dtype's measured number of tiles or more; 0; 1, every launch without the
// ahead form; `all`).
template <DType D>
bool pair_x_takes(const MatmulArgs& x, bool ahead, int64_t tiles);
template <DType D>
void launch_decode_pair(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream);
// MEMRA_SINGLE_DECODE=0 sends one-token batches to launch_decode_tiled instead (A/B).
bool single_decode_enabled();
// MEMRA_RAW_X_EARLY (the default; =0 off): the one-token kernels reading x raw load a warp's first
// chunk of it before the partial maxima (one_token_x.cuh: RawFirst; MatmulArgs::x_raw_early). The
// same bits.
bool raw_x_early_enabled();
// MEMRA_RAW_X_STAGE (the default; =0 off): those kernels hand column 0's lanes their fragments of x
// by a transpose through shared memory, not 32 shuffles a chunk (one_token_x.cuh: Column0). The
// same bits.
bool raw_x_column0_staged();
template <DType D>
void launch_decode_single(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream);
// The same kernel in expert mode (MultiOut::ids set; x holds the rows the pairs read).
template <DType D>
void launch_decode_experts(const MatmulArgs& x, const MultiOut& outs, cudaStream_t stream);
// 17-32 tokens over tiled weights with x staged once per cluster of blocks
// (matmul_decode_cluster.cu), the same bits as launch_decode_tiled. cluster_decode_takes says
// whether it takes one output of dtype d (n_out x n_in) at n_tokens: where the build has sm_90a
// code, the device runs it, MEMRA_CLUSTER_DECODE is not 0, and the output is one it measured
// faster on than the kernel it replaces (wide_pays: the output would otherwise run on wgmma;
// MEMRA_CLUSTER_EVERY=1 gives it every tiled output, the A/B).
constexpr int kClusterMinTokens = 16, kClusterMaxTokens = 32;
// The least K it takes by default (MEMRA_CLUSTER_MIN_K moves it, in steps of 1,024).
constexpr int64_t kClusterMinK = 4096;
bool cluster_decode_takes(DType d, int64_t n_out, int64_t n_in, int64_t n_tokens, bool wide_pays);
template <DType D>
void launch_decode_cluster(const MatmulArgs& args, cudaStream_t stream);
// Tiled F16/BF16 prefill on wgmma (args.xp set): only where prefill_wgmma_available(), i.e. the
// build has sm_90a code and the current device runs it.
bool prefill_wgmma_available();
// The current device's SM count (a persistent grid's size, whether a grid fills one wave).
int device_sms();
// Whether a launch of row_blocks 128-row blocks (one 64-token tile) runs faster as a split form's
// twice as many 64-row blocks, each walking half the chunks (chunk_teams.cuh): wherever the
// doubled grid takes fewer than twice the waves (MEMRA_SPLIT_RULE=narrow: only while it still fits
// one wave, so that the halved chain is all the change).
bool split_pays(int64_t row_blocks);
// The rule itself, on `sms` SMs (waves: the default; false: MEMRA_SPLIT_RULE=narrow).
constexpr bool split_pays_on(int64_t row_blocks, int64_t sms, bool waves) {
  if (!waves) return 2 * row_blocks <= sms;
  return (2 * row_blocks + sms - 1) / sms < 2 * ((row_blocks + sms - 1) / sms);
}
// On the H100's and H200's 132 SMs, at 64 tokens: the 8B's q/k (40 blocks), o and down (32) split
// under either rule; its gate/up launch (192: two waves against three of half the chain) only
// under `waves`; a lone gate (96: one wave either way) and the Q6_K output matrix (1,187: 9
// against 18) under neither.
static_assert(split_pays_on(40, 132, false) && split_pays_on(32, 132, false) &&
              split_pays_on(40, 132, true) && split_pays_on(32, 132, true));
static_assert(!split_pays_on(192, 132, false) && split_pays_on(192, 132, true));
static_assert(!split_pays_on(96, 132, false) && !split_pays_on(96, 132, true));
static_assert(!split_pays_on(1187, 132, false) && !split_pays_on(1187, 132, true));
// Whether a split form's launch of split_blocks 64-row blocks at n_tokens (at most 64) runs in
// token halves: blocks of 32 tokens, twice the grid at 33-64 tokens (the 8B's o and down at 64
// tokens: 64 blocks of 132 SMs), the same grid with half the work at 17-32. On unless
// MEMRA_SPLIT_HALVES=0 (the default since the fifty-first round; the same bits; =all: every split
// launch).
bool split_halves_take(int64_t split_blocks, int64_t n_tokens);
// The rule itself, on `sms` SMs: the doubled grid still fits one wave.
constexpr bool split_halves_on(int64_t split_blocks, int64_t n_tokens, int64_t sms) {
  return n_tokens <= 32 || 2 * split_blocks <= sms;
}
// On the H100's and H200's 132 SMs at 64 tokens: the 8B's o and down (64 split blocks) take them,
// its q/k (80) and gate/up (384) do not.
static_assert(split_halves_on(64, 64, 132) && !split_halves_on(80, 64, 132) &&
              !split_halves_on(384, 64, 132) && split_halves_on(384, 20, 132));
// Whether the split forms take the narrow outputs of a step of 17-32 tokens too (fold64_takes,
// scaled_split_takes in matmul.cu), where the cluster and tiled decode kernels serve them
// otherwise: by default (MEMRA_SPLIT_SMALL=q8_0) a Q8_0 output's over K of n_in where
// split_small_q8_0 says so; =1 every weight type's (the 8B Q4_K_M measured slower with it in the
// fifty-first round), =scaled Q6_K's and Q8_0's of any K, =0 none. The same bits either way.
// Their blocks then take token halves (split_halves_on).
bool split_small_takes(int64_t n_tokens, DType wtype, int64_t n_in);
// The default's rule: Q8_0 where K is 4,096 or more (kClusterMinK), the outputs the cluster
// decode kernel serves at 17-32 tokens otherwise, which the split form beats; below it the tiled
// decode kernel serves them and beats the split form (the 8B Q8_0 against the 0.6B Q8_0,
// fifty-third round).
constexpr bool split_small_q8_0(DType wtype, int64_t n_in) {
  return wtype == DType::q8_0 && n_in >= kClusterMinK;
}
// The 8B's products (K 4,096 and 12,288) take it; the 0.6B's (K 1,024, 2,048, 3,072) and other
// types do not.
static_assert(split_small_q8_0(DType::q8_0, 4096) && split_small_q8_0(DType::q8_0, 12288) &&
              !split_small_q8_0(DType::q8_0, 3072) && !split_small_q8_0(DType::q6_k, 4096));
void launch_prefill_wgmma(const MatmulArgs& args, cudaStream_t stream);
// Several F16/BF16 outputs over the same x (in the wgmma layout) in one launch.
void launch_prefill_wgmma(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream);
// The same for tiled Q4_K, Q6_K and Q8_0 (matmul_prefill_wgmma_quant.cu).
template <DType D>
void launch_prefill_wgmma_quant(const MatmulArgs& args, cudaStream_t stream);
// Tiled Q4_K in the BF16 kernel's warp-specialized structure (matmul_prefill_wgmma_fold.cu;
// args.xp set, more than 64 tokens): the same bits as launch_prefill_wgmma_quant. On unless
// MEMRA_WGMMA_FOLD=0.
bool prefill_wgmma_fold_enabled();
// The Q4_K kernel's copy warp issues a stage's bulk copies from several lanes, not one (on unless
// MEMRA_WGMMA_COPY_LANES=0).
bool prefill_wgmma_copy_lanes_enabled();
void launch_prefill_wgmma_fold(const MatmulArgs& args, cudaStream_t stream);
// Several Q4_K outputs over the same x (in the wgmma layout) in one launch.
void launch_prefill_wgmma_fold(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream);
// Tiled Q6_K and Q8_0 on a warp-specialized kernel with four group partials in flight
// (matmul_prefill_wgmma_scaled.cu; args.xp set, more than 64 tokens): the same bits as
// launch_prefill_wgmma_quant. On unless MEMRA_WGMMA_SCALED=0.
bool prefill_wgmma_scaled_enabled();
template <DType D>
void launch_prefill_wgmma_scaled(const MatmulArgs& args, cudaStream_t stream);
template <DType D>
void launch_prefill_wgmma_scaled(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream);
// Q6_K and Q8_0 products of at most 64 tokens on that kernel too (its split form for the narrow
// ones, split_pays): on unless MEMRA_SCALED_DECODE=0 (the same bits).
bool scaled_decode_enabled();
// Prefill steps' outputs of one dtype on the two kernels above share launches (BlockOuts): on
// unless MEMRA_WGMMA_PREFILL_GROUPS=0.
bool prefill_groups_enabled();

// clang-format off
#define MEMRA_MATMUL_FOR_EACH_MMA_TYPE(X) \
  X(DType::f16) X(DType::bf16) X(DType::q8_0) X(DType::q4_0) X(DType::q4_1) X(DType::q5_0) \
  X(DType::q5_1) X(DType::q4_k) X(DType::q5_k) X(DType::q6_k)
// clang-format on

}  // namespace memra::kernels::matmul_detail
