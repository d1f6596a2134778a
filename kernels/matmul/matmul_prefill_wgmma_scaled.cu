// The wgmma prefill matmul for tiled Q6_K and Q8_0 weights on Hopper (sm_90a), warp-specialized,
// for steps of more than 64 tokens: a copy warp brings each 256-element chunk's tile records and x
// steps by bulk copies into a ring of chunk stages, and two compute warpgroups (64 rows each, warp
// w owning m16 tile w) run the canonical order with several group partials in flight.
// Unless MEMRA_SCALED_DECODE=0 it takes the 17-64-token steps too: the wide launches
// as they are, those under half the SMs' worth of blocks (split_pays) in its split form, 64-row
// blocks whose compute warpgroups ("teams": two, or three in the token halves of 33-64-token
// steps, scaled_teams) take the chunks in turn (chunk_teams.cuh).
//
// The order is matmul.cu's canonical one for the scaled types, as in matmul_prefill_wgmma_quant.cu
// and every other kernel: each scale group's wgmma chain from +0 (a Q6_K group is one k16 step, a
// Q8_0 group two), p = fma(scale, s_g, p) in group order, chunks summed left to right. Unlike Q4_K
// the group scale cannot ride in the A operand (fold.cuh): a Q6_K sc * q reaches 4096, past f16's
// exact integers, so every group costs one CUDA-core FMA per row and token beside its wgmma.
//
// Why this kernel: matmul_prefill_wgmma_quant.cu waits for group j - 1's wgmma right after issuing
// group j's (one group in flight while the CUDA cores scale), meets the whole block at every chunk
// and issues a chunk's 24 copies from one thread behind that barrier; on the 8B gate shape at 512
// tokens it took 363 us (Q4_K on the warp-specialized kernel: 137), ~430 cycles a group for a
// block whose group needs 64 cycles of tensor work and 64 of FMA issue. Here group j's partial is
// scaled after group j + 3 is issued (four register sets of 32 floats and their A fragments; with
// p and the running total ~210 of the compute threads' 232 registers; Q8_0, two wgmmas a group,
// three sets), the compute warps meet nobody (each arrives on a stage's "empty" barrier once it has
// scaled that chunk's last group), and the copy warp's lanes issue a chunk's copies side by side.
//
// Measured on the H200 (thirty-second round, PERFORMANCE.md): the gate shape Q6_K 364.6 -> 241.9
// us, Q8_0 318.1 -> 183.6; 8B Q8_0 pp512 9,437 -> 14,964 tok/s. What bounds it now is instruction
// issue (Nsight Compute: 0.66 instructions a cycle per scheduler, ~80 a group per warp of which
// 32 are the scaling FMAs, ~20 the Q6_K decode): the canonical order's FMA per row, token and
// group is as much CUDA-core issue as the group's tensor work, so this order tops out near half
// the tensor rate. Two groups a commit (half the fences and waits) measured no faster.
#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/chunk_teams.cuh"
#include "kernels/matmul/matmul_launch.cuh"
#include "kernels/matmul/tiled.cuh"
#include "kernels/matmul/weight_frag.cuh"
#include "kernels/matmul/wgmma.cuh"

namespace memra::kernels::matmul_detail {
namespace {

constexpr int kBN = 64, kCopyThreads = 128, kCopyRegs = 40;
constexpr int kSteps = kChunk / 16;
static_assert(kBN * 2 == kXpTokens, "a block's tokens are half of an xp tile");

// kRows: x arrives in x's rows form (x_rows_offset) by tensor copies of 64-k x 64-token boxes,
// four a chunk, at the stage's start (the boxes need 1,024-byte alignment, which the records'
// sizes would break), each stage rounded up to 1,024 bytes. Otherwise the records come first and
// the x steps after them, as before.
// kSplit 2 or 3: the split form (MEMRA_SCALED_DECODE, 17-64 tokens): 64-row blocks whose kSplit
// compute warpgroups ("teams") take the chunks in turn (chunk_teams.cuh), two stages in the ring a
// team (its chunk and its next one), the running total in shared memory; in either layout of x.
// kN: the block's tokens, 64, or in the split form 32 (the token halves: split_halves_take, m64n32
// wgmmas); three teams only there (scaled_teams), where their stages fit.
template <DType D, bool kRows = false, int kSplit = 1, int kN = kBN>
struct ScaledCfg {
  using T = Tiled<D>;
  using Teams = ChunkTeamsOf<kN / 2, kSplit == 1 ? 2 : kSplit>;
  static_assert(kSplit == 1 || kSplit == Teams::kTeams, "the split forms");
  static_assert(kN == kBN || (kN == 32 && kSplit >= 2), "token halves only in the split form");
  static_assert(kSplit <= 2 || kN == 32, "three teams only in the token halves");
  // The compute warpgroups (two on one 128-row chunk, or the split form's teams) and the copy
  // warpgroup; the compute threads' registers are what the copy warpgroup's kCopyRegs leave of the
  // SM's 64 K, in steps of 8 (setmaxnreg): 232 with two compute warpgroups, 152 with three.
  static constexpr int kCompute = (kSplit == 1 ? 2 : kSplit) * 128;
  static constexpr int kThreads = kCompute + kCopyThreads;
  static constexpr int kComputeRegs = kSplit <= 2 ? 232 : 152;
  static_assert(kCompute * kComputeRegs + kCopyThreads * kCopyRegs <= 64 * 1024,
                "the SM's registers");
  static constexpr int kN8 = kN / 8;                   // n8 token tiles
  static constexpr int kStepBytes = kN * 16 * 2;       // one k16 step of x (2 KB at 64 tokens)
  static constexpr int kXStage = kSteps * kStepBytes;  // a chunk (32 KB at 64 tokens)
  static constexpr int kBM = kSplit == 1 ? 128 : 64, kTiles = kBM / 16;
  static constexpr int kStages = kSplit == 1 ? 3 : 2 * kSplit;
  // A stage's readers: every compute warp, or the chunk's team's.
  static constexpr int kStageWarps = kSplit == 1 ? 8 : 4;
  static constexpr int kGroupSteps = T::kGroup / 16, kGroups = kChunk / T::kGroup;
  // Group partials in registers: kLag = kSets - 1 groups in flight while one is scaled. Q8_0's
  // groups are two wgmmas each, and with a fourth set (and its A fragments) it spilled.
  static constexpr int kSets = D == DType::q8_0 ? 3 : 4, kLag = kSets - 1;
  // A group's scales read before the wait for its wgmmas (Q6_K: gate shape 250.9 -> 241.9 us) or
  // after it (Q8_0, whose heads are 16 bytes a row: 194.5 -> 183.6), as measured.
  static constexpr bool kEarlyScales = D == DType::q6_k;
  static constexpr int kRecStage = kTiles * T::kBytes;
  static constexpr int kStageBytes = kRecStage + kXStage;  // what a stage's copies bring
  static constexpr int kXAt = kRows ? 0 : kRecStage, kRecAt = kRows ? kXStage : 0;
  static constexpr int kStage = kRows ? (kStageBytes + 1023) / 1024 * 1024 : kStageBytes;
  static constexpr int kBarsBytes = 2 * kStages * 8;  // full and empty barriers
  // The split form's total and its teams' barriers after them.
  static constexpr int kTotalAt = kStages * kStage + kBarsBytes;
  static constexpr int kTeamBarsAt = kTotalAt + Teams::kTotalBytes;
  static constexpr int kSmem = kSplit == 1 ? kTotalAt : kTeamBarsAt + Teams::kBarBytes;
  static_assert(kSmem <= kMaxSmemHopper, "shared memory over the sm_90 limit");
  static_assert(T::kBytes % 16 == 0 && kRecStage % 128 == 0, "bulk copies of whole records");
  static_assert(kSteps + kTiles <= 32, "one copy a lane");
};

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// The copy warp: chunk c into stage c % kStages once the compute warps have left chunk c -
// kStages; lane m < kTiles copies tile m's record (rows past the matrix repeat the last tile),
// lane kTiles + s the 32 kN bytes of k16 step s's xp tile that hold the block's kN tokens, or
// (kRows) lane kTiles + b the rows form's 64-k box b of the chunk (xmap).
template <DType D, bool kRows, int kSplit, int kN>
__device__ __forceinline__ void copy_chunks(const MatmulArgs& a, const CUtensorMap* xmap,
                                            uint8_t* smem, uint64_t* full, uint64_t* empty,
                                            int row0, int tok0, int lane) {
  using C = ScaledCfg<D, kRows, kSplit, kN>;
  constexpr int kStages = C::kStages, kTiles = C::kTiles;
  const int n_chunks = a.n_in / kChunk, last_tile = (a.n_out - 1) / 16;
  for (int c = 0; c < n_chunks; ++c) {
    const int b = c % kStages;
    if (c >= kStages) mbar_wait(empty + b, (c / kStages - 1) & 1);
    if (lane == 0) mbar_arrive_expect_tx(full + b, C::kStageBytes);
    __syncwarp();  // the byte count is set before any copy can complete
    uint8_t* stage = smem + b * C::kStage;
    if (lane < kTiles) {
      const int64_t tile = min(row0 / 16 + lane, last_tile);
      bulk_copy(stage + C::kRecAt + lane * C::T::kBytes, a.w + (tile * n_chunks + c) * C::T::kBytes,
                C::T::kBytes, full + b);
    } else if (kRows && lane < kTiles + kChunk / kXRowsK) {
      const int box = lane - kTiles;
      tensor_copy_2d(stage + C::kXAt + box * (kN * 128), xmap, c * kChunk + box * kXRowsK, tok0,
                     full + b);
    } else if (!kRows && lane < kTiles + kSteps) {
      const int s = lane - kTiles;
      bulk_copy(stage + C::kXAt + s * C::kStepBytes,
                a.xp + xp_offset(tok0, int64_t{c} * kChunk + 16 * s, a.n_in), C::kStepBytes,
                full + b);
    }
  }
}

// Group j's scales of this warp's rows g and g + 8, from the tile's record in its stage.
template <DType D>
__device__ __forceinline__ float2 group_scales(const uint8_t* rec, int j, int g) {
  using T = Tiled<D>;
  return make_float2(T::scale(T::head(rec, g), j).x, T::scale(T::head(rec, g + 8), j).x);
}
// p += scale * s for rows g (sc.x) and g + 8 (sc.y).
template <int kN8>
__device__ __forceinline__ void scale_group(float2 sc, const float (&s)[kN8][4],
                                            float (&p)[kN8][4]) {
#pragma unroll
  for (int n = 0; n < kN8; ++n)
    apply_group<false>(p[n], s[n], make_float2(sc.x, 0.0f), make_float2(sc.y, 0.0f), {});
}

// The chunk's partial into the running total, in chunk order; p restarts from +0.
template <int kN8>
__device__ __forceinline__ void end_chunk(int c, float (&p)[kN8][4], float (&total)[kN8][4]) {
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      total[n][i] = c == 0 ? p[n][i] : __fadd_rn(total[n][i], p[n][i]);
      p[n][i] = 0.0f;
    }
  }
}

// The split form's chunk end: the chunk's partial p added to the teams' total in its turn
// (chunk_teams.cuh), or for the last chunk added and written to y (this warp's m16 tile `tile` of
// the 64-row block at row0); p restarts from +0.
template <typename Teams, int kN8>
__device__ __forceinline__ void add_chunk_in_turn(const Teams& teams, int c, int n_chunks,
                                                  float (&p)[kN8][4], const MatmulArgs& a, int row0,
                                                  int tok0, int tile, int lane) {
  static_assert(Teams::kElems == 4 * kN8, "a thread's elements: its n8 tiles' four");
  teams.wait_turn(c);
  if (c == n_chunks - 1) {
    float sum[Teams::kElems];
#pragma unroll
    for (int n = 0; n < kN8; ++n) {
      const float4 v = teams.sum(c, n, p[n]);
      sum[4 * n] = v.x;
      sum[4 * n + 1] = v.y;
      sum[4 * n + 2] = v.z;
      sum[4 * n + 3] = v.w;
    }
    store_tile<8 * kN8>(a, sum, row0, tok0, tile, lane);
  } else {
#pragma unroll
    for (int n = 0; n < kN8; ++n) teams.keep(n, teams.sum(c, n, p[n]));
    teams.pass();
  }
#pragma unroll
  for (int n = 0; n < kN8; ++n) {
#pragma unroll
    for (int i = 0; i < 4; ++i) p[n][i] = 0.0f;
  }
}
#endif  // __CUDA_ARCH_FEAT_SM90_ALL

// Block (x, y): tokens [kN x, + kN) of the kBM-row block of outs that y names (BlockOuts in blocks
// of kBM rows). kRows: x is x.xp's rows form, read through xmap (x_rows_map for kN-token boxes; a
// zeroed map otherwise). kSplit 2 or 3: the split form (ScaledCfg), compute warpgroup w taking
// chunks w, w + kSplit, ...; kN 32 there: the token halves.
template <DType D, bool kRows, int kSplit, int kN>
__global__ void __launch_bounds__(ScaledCfg<D, kRows, kSplit, kN>::kThreads, 1)
    prefill_wgmma_scaled_kernel(const MatmulArgs x, const BlockOuts outs,
                                const __grid_constant__ CUtensorMap xmap) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = ScaledCfg<D, kRows, kSplit, kN>;
  using T = typename C::T;
  constexpr int kGroups = C::kGroups, kGroupSteps = C::kGroupSteps, kSets = C::kSets;
  constexpr int kLag = C::kLag, kStages = C::kStages, kBM = C::kBM, kN8 = C::kN8;
  constexpr int kCompute = C::kCompute;
  extern __shared__ __align__(128) uint8_t smem_xp[];
  uint8_t* const smem = kRows ? rows_smem() : smem_xp;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2;
  const int by = static_cast<int>(blockIdx.y);
  MatmulArgs a = x;
  const int o = take_output(outs, outs.block_begin, by, a);
  const int row0 = (by - outs.block_begin[o]) * kBM, tok0 = static_cast<int>(blockIdx.x) * kN;
  const int n_chunks = a.n_in / kChunk;
  uint64_t* const full = reinterpret_cast<uint64_t*>(smem + kStages * C::kStage);
  uint64_t* const empty = full + kStages;
  // The split form's teams (the compute warpgroups; thread ids past them are the copy warps').
  const typename C::Teams teams(smem + C::kTotalAt, smem + C::kTeamBarsAt, tid);
  if (tid == 0) {
    mbar_init_stages(full, kStages);
    mbar_init_stages(empty, kStages, C::kStageWarps);
    if constexpr (kSplit > 1) teams.init();
  }
  __syncthreads();
  if (warp >= kCompute / 32) {  // the copy warpgroup: its first warp issues every copy
    setmaxnreg_dec<kCopyRegs>();
    if (warp == kCompute / 32)
      copy_chunks<D, kRows, kSplit, kN>(a, &xmap, smem, full, empty, row0, tok0, lane);
    return;
  }
  setmaxnreg_inc<C::kComputeRegs>();
  // set[j % kSets]: group j's partial; p: the chunk partial; total: the running chunk sum. Index
  // [n8 tile][mma.sync C register] of this warp's rows 16 warp + g, + 8.
  float set[kSets][kN8][4] = {}, p[kN8][4] = {}, total[kN8][4] = {};
  // Each set's A fragments too: a wgmma reads its A registers while in flight, and decoding the
  // next group into them would make ptxas serialize the wgmmas (C7513).
  uint32_t frags[kSets][kGroupSteps][4];
  // The warp's m16 tile of the block; the first chunk its warpgroup takes.
  const int tile = kSplit == 1 ? warp : warp % 4, c0 = kSplit == 1 ? 0 : teams.team;
  for (int c = c0; c < n_chunks; c += kSplit) {
    mbar_wait(full + c % kStages, (c / kStages) & 1);  // chunk c has landed
    const uint8_t* stage = smem + (c % kStages) * C::kStage;
    const uint8_t* rec = stage + C::kRecAt + tile * T::kBytes;
    const uint8_t* X = stage + C::kXAt;
    typename T::Quad quad;
#pragma unroll
    for (int j = 0; j < kGroups; ++j) {
#pragma unroll
      for (int v = 0; v < kGroupSteps; ++v) {
        const int step = j * kGroupSteps + v;
        if (step % 4 == 0) quad = T::load(rec, step / 4, lane);
        T::frag(quad, step % 4, frags[j % kSets][v]);
      }
      wgmma_fence();
#pragma unroll
      for (int v = 0; v < kGroupSteps; ++v) {
        const uint64_t b = x_step_desc<kRows, kN>(X, j * kGroupSteps + v);
        if (v == 0)
          wgmma_m64nk16<false>(set[j % kSets], frags[j % kSets][v], b);
        else
          wgmma_m64nk16<true>(set[j % kSets], frags[j % kSets][v], b);
      }
      wgmma_commit();
      if (j >= kLag) {  // group j - kLag is done: scale it while the next ones run
        const int jl = j - kLag;
        float2 sc;
        if constexpr (C::kEarlyScales) sc = group_scales<D>(rec, jl, g);
        wgmma_wait<kLag>();
        if constexpr (!C::kEarlyScales) sc = group_scales<D>(rec, jl, g);
        scale_group(sc, set[jl % kSets], p);
      }
    }
    // The chunk's last groups. Nothing stays in flight past the chunk: a wgmma pending across the
    // loop's back edge makes ptxas serialize every wgmma (C7513); the other warpgroup's wgmmas
    // keep the tensor pipe busy meanwhile.
    wgmma_wait<0>();
#pragma unroll
    for (int j = kGroups - kLag; j < kGroups; ++j)
      scale_group(group_scales<D>(rec, j, g), set[j % kSets], p);
    if constexpr (kSplit == 1) {
      end_chunk(c, p, total);
      if (lane == 0) mbar_arrive(empty + c % kStages);  // the stage is free: x and the scales read
    } else {
      if (lane == 0) mbar_arrive(empty + c % kStages);  // read before the turn's wait
      add_chunk_in_turn(teams, c, n_chunks, p, a, row0, tok0, tile, lane);
    }
  }
  // total[n][i] is n8 tile n's C fragment: store_tile's order (total[4n + i]).
  if constexpr (kSplit == 1)
    store_tile<kBN>(a, reinterpret_cast<const float(&)[kBN / 2]>(total), row0, tok0, warp, lane);
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90a code
#endif
}

// One form's launch over outs in its blocks (kBM rows), x in either layout.
template <DType D, int kSplit, int kN>
void launch_scaled(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  const CUtensorMap xmap = x_rows_map(x, kN);
  if (x.xp_rows)
    launch_block_outs<prefill_wgmma_scaled_kernel<D, true, kSplit, kN>, kN>(
        x, outs, ScaledCfg<D, true, kSplit, kN>::kThreads, ScaledCfg<D, true, kSplit, kN>::kSmem,
        stream, xmap);
  else
    launch_block_outs<prefill_wgmma_scaled_kernel<D, false, kSplit, kN>, kN>(
        x, outs, ScaledCfg<D, false, kSplit, kN>::kThreads, ScaledCfg<D, false, kSplit, kN>::kSmem,
        stream, xmap);
}

// MEMRA_SCALED_TEAMS: the split form's token halves (32-token blocks) on two or three teams, each
// walking a half or a third of the chunks. unset or auto (the default since the fifty-fifth
// round): three in steps of 33-64 tokens (the 8B Q4_K_M's Q6_K v and down at 64 tokens, a Q8_0
// model's o and down there), two in steps of 17-32 (a Q8_0 model's split launches there); 2 or 3
// for the A/B. Why: the Q4_K split form's halves measured 8% faster a launch on three (fifty-first
// round, split_teams in matmul_wgmma_fold64_split.cu: a team's chunk is a latency chain, and a
// third warp a scheduler issues under it). Measured here on the H100 (docs/PERFORMANCE.md,
// fifty-fifth round), three against two: 8B Q8_0 c64 +2.9%, 0.6B Q4_K_M c64 +0.8%, 8B Q4_K_M c40
// and c64 within 0.3%, Q6_K down at 64 tokens 55.8 -> 53.7 us; but 8B Q8_0 c20 -4.5% and c32
// -4.9% (Q8_0 down at 32 tokens 52.8 -> 58.1 us), hence two there. Six stages of ~30-34 KB fit
// where the 64-token blocks' would not; the compute threads get 152 registers (the halves' four
// partial sets are half the 64-token blocks').
int scaled_teams(int64_t n_tokens) {
  static const int choice = env_choice("MEMRA_SCALED_TEAMS", {"auto", "2", "3"}, 0);
  if (choice == 0) return n_tokens > 32 ? 3 : 2;
  return choice + 1;
}

}  // namespace

// On by default (MEMRA_WGMMA_SCALED=0 for the A/B, the same bits: kernel-check's matrix cases).
bool prefill_wgmma_scaled_enabled() {
  static const bool enabled = env_switch("MEMRA_WGMMA_SCALED", true);
  return enabled;
}

// Q6_K and Q8_0 products of 17-64 tokens run here too (the same bits), the narrow ones on the
// split form: on by default since the forty-ninth round (H200, 8B Q8_0 at 64 sequences: 4,120 ->
// 6,607 tok/s); MEMRA_SCALED_DECODE=0 for the A/B.
bool scaled_decode_enabled() {
  static const bool enabled = env_switch("MEMRA_SCALED_DECODE", true);
  return enabled;
}

template <DType D>
void launch_prefill_wgmma_scaled(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  const bool decode = x.n_tokens <= kDecodeTokens;
  if (outs.n < 1 || (decode && !scaled_decode_enabled()))
    fail(ErrorCode::internal,
         "prefill_wgmma_scaled: {} tokens (it takes steps over {}, and of fewer unless "
         "MEMRA_SCALED_DECODE=0), {} outputs",
         x.n_tokens, kDecodeTokens, outs.n);
  const bool split = decode && split_pays(outs.block_begin[outs.n]);
  if (!split) {
    launch_scaled<D, 1, kBN>(x, outs, stream);
    return;
  }
  const BlockOuts blocks = outs.in_blocks_of(ScaledCfg<D, false, 2>::kBM);
  if (!split_halves_take(blocks.block_begin[blocks.n], x.n_tokens))
    launch_scaled<D, 2, kBN>(x, blocks, stream);
  else if (scaled_teams(x.n_tokens) == 3)
    launch_scaled<D, 3, 32>(x, blocks, stream);
  else
    launch_scaled<D, 2, 32>(x, blocks, stream);
}

template <DType D>
void launch_prefill_wgmma_scaled(const MatmulArgs& a, cudaStream_t stream) {
  launch_prefill_wgmma_scaled<D>(a, BlockOuts::of(a), stream);
}

template void launch_prefill_wgmma_scaled<DType::q6_k>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_wgmma_scaled<DType::q8_0>(const MatmulArgs&, cudaStream_t);
template void launch_prefill_wgmma_scaled<DType::q6_k>(const MatmulArgs&, const BlockOuts&,
                                                       cudaStream_t);
template void launch_prefill_wgmma_scaled<DType::q8_0>(const MatmulArgs&, const BlockOuts&,
                                                       cudaStream_t);

}  // namespace memra::kernels::matmul_detail
