// The pipelined Q4_K wgmma kernel's split form (on unless MEMRA_FOLD64_SPLIT=0), for the
// 33-64-token launches whose doubled grid takes fewer waves than twice the 128-row grid's
// (split_pays; MEMRA_SPLIT_RULE=narrow: only those whose doubled grid fits one wave): 64-row
// blocks whose two warpgroups ("teams") take the chunks in turn, team w chunks w, w + 2, w + 4 ...
// (three teams for the token halves' 32-token blocks: split_teams, below).
//
// Why. The 128-row form (matmul_wgmma_fold64.cu) walks every chunk of its rows in one block at
// ~2.2-2.5 us a chunk, whatever the rows (its warps wait on issue: two a scheduler; nineteenth
// round, Nsight). The narrow launches leave most SMs idle for that walk: the 8B's q/k launch is 40
// blocks, o 32, and the down projection (48 chunks) 32, which is why down stayed on the tiled
// decode kernel (100 us a layer at 64 tokens, against ~9 us of weight bytes). Here those launches
// have twice the blocks and half the chain each: predicted ~20 us for q/k and o (35-40 now) and
// ~55 us for down, ~75 us a layer of the 8B's ~367 us step at 64 sequences.
//
// The same bits. A team's chunk is the 128-row form's chunk, operand for operand (wgmma_fold64.cuh:
// the chain, the chunk's end), and the teams add the chunk partials in chunk order through shared
// memory (chunk_teams.cuh), so the sum is ((p0 + p1) + p2) + ..., every Q4_K kernel's. The team
// with the last chunk writes y.
//
// A team's pipeline: two stages, one chunk ahead. A stage is refilled at the top of the chunk after
// the one it held: by then every warp of the team has waited for that chunk's wgmmas, and its rows'
// headers, which its end (in the next chunk) needs, are in registers, not read from the stage.
// Shared memory: 4 stages of 41 KB, the mins' fragments, the 16 KB total: one block an SM, 8 warps,
// as the 128-row form.
//
// Token halves (split_halves_take; the default since the fifty-first round, MEMRA_SPLIT_HALVES=0
// for the A/B): blocks of 32 tokens on m64n32 wgmmas. A launch whose split grid fills at most half
// the SMs (the 8B's o and down at 64 tokens: 64 blocks) then runs twice the blocks, each chain as
// long as before; a team's chunk is bound by its chain's latency, not by its tokens (a 64-token
// chunk takes ~2.5 us where its wgmmas need ~0.3 at the tensor rate), for twice the weight records'
// L2 reads (9 KB a chunk beside x's 16 KB). Measured (H100): the Q4_K down product at 64 tokens
// 56.2 -> 48.0 us (-15%, not half).
#include <type_traits>

#include "core/env.h"
#include "kernels/launch.cuh"
#include "kernels/matmul/chunk_teams.cuh"
#include "kernels/matmul/cluster.cuh"
#include "kernels/matmul/matmul_wgmma_fold64.h"
#include "kernels/matmul/wgmma_fold64.cuh"

namespace memra::kernels::matmul_detail {
namespace {

using fold64::chunk_chain;
using fold64::chunk_end;
using fold64::copy_chunk;
using fold64::copy_chunk_part;
using fold64::T;
constexpr int kBM = 64, kTeamThreads = ChunkTeams::kThreads;
constexpr int kTeamStages = 2;
constexpr int kTiles = kBM / 16;  // a team's warps: one m16 tile each

// The layout of a block of kN tokens (64, or the token halves' 32) and kTeams teams (two, or three:
// the token halves' default, where three teams' stages fit; split_teams).
template <int kN, int kTeams = 2>
struct SplitCfg {
  using S = fold64::Stage<kTiles, kN>;
  using Teams = ChunkTeamsOf<kN / 2, kTeams>;
  static constexpr int kThreads = kTeams * kTeamThreads;
  static constexpr int kXs = fold64::kXsOf<kN>;  // a chunk's mins' fragments: team threads
  static constexpr int kStagesBytes = kTeams * kTeamStages * S::kBytes;
  static constexpr int kXsBytes = kTeams * 2 * kXs * 16;  // a team's two chunks' mins' fragments
  static constexpr int kTotalAt = kStagesBytes + kXsBytes;
  static constexpr int kBarsAt = kTotalAt + Teams::kTotalBytes;
  static constexpr int kSmem = kBarsAt + kTeams * kTeamStages * 8 + Teams::kBarBytes;
  static_assert(kSmem <= kMaxSmemHopper, "shared memory over the sm_90 limit");
  static_assert(kXs <= kTeamThreads, "a team thread stages at most one token half's fragments");
  static_assert(Teams::kElems == kN / 2 && Teams::kElems * kTeamThreads == kBM * kN,
                "a thread's accumulator elements: store_tile's");
};

// Block (x, y): tokens [kN x, + kN) of the 64-row block of outs that y names (BlockOuts in blocks
// of kBM rows). kRows: x is x.xp's rows form, read through xmap (x_rows_map for kN-token boxes; a
// zeroed map otherwise). kN: 64, or 32 (the token halves: split_halves_take). kTeams: 2, or 3
// (split_teams).
template <bool kRows, int kN, int kTeams>
__global__ void __launch_bounds__(SplitCfg<kN, kTeams>::kThreads, 1)
    wgmma_fold64_split_kernel(const MatmulArgs x, const BlockOuts outs,
                              const __grid_constant__ CUtensorMap xmap) {
  detail::wait_for_inputs();
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using C = SplitCfg<kN, kTeams>;
  using S = typename C::S;
  using Teams = typename C::Teams;
  constexpr int kXs = C::kXs;
  extern __shared__ __align__(128) uint8_t smem_xp[];
  uint8_t* const smem = kRows ? rows_smem() : smem_xp;
  const int tid = threadIdx.x, lane = tid & 31, g = lane >> 2;
  const Teams teams(smem + C::kTotalAt, smem + C::kBarsAt + kTeams * kTeamStages * 8, tid);
  const int team = teams.team, ttid = teams.thread, twarp = ttid >> 5;
  const int by = static_cast<int>(blockIdx.y);
  MatmulArgs a = x;
  const int o = take_output(outs, outs.block_begin, by, a);
  const int row0 = (by - outs.block_begin[o]) * kBM, tok0 = static_cast<int>(blockIdx.x) * kN;
  const int n_chunks = a.n_in / kChunk;
  // Chunks team, team + kTeams, ... below n_chunks.
  const int n_mine = (n_chunks - team + kTeams - 1) / kTeams;
  uint8_t* const stages = smem + team * kTeamStages * S::kBytes;
  uint4* const xs = reinterpret_cast<uint4*>(smem + C::kStagesBytes) + team * 2 * kXs;
  uint64_t* const bars = reinterpret_cast<uint64_t*>(smem + C::kBarsAt);
  uint64_t* const full = bars + team * kTeamStages;  // the team's stages
  // Team thread i < kXs owns token i / 2's sums 4 (i % 2) .. + 3 of each of the team's chunks,
  // loaded a chunk before they are staged (the address clamped into the batch; the value is not
  // used past it).
  const bool x_owner = ttid < kXs;
  const int x_tok = tok0 + (ttid >> 1);
  const float* x_src =
      a.xsum + static_cast<int64_t>(min(x_tok, a.n_tokens - 1)) * a.xsum_stride + 4 * (ttid & 1);
  float4 xv = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (n_mine > 0 && x_owner) xv = __ldg(reinterpret_cast<const float4*>(x_src + 8 * team));
  if (tid == 0) {
    mbar_init_stages(bars, kTeams * kTeamStages);
    teams.init();
  }
  __syncthreads();          // the last barrier of the whole block: the teams meet only on `teams`
  if (n_mine == 0) return;  // fewer chunks than teams (K = 256: one): the later teams have none
  if (twarp == 0) copy_chunk<kTiles, kRows, kN>(a, &xmap, stages, full, team, row0, tok0, lane);
  const auto team_sync = [&] { named_barrier_sync(1 + team, kTeamThreads); };

  // Adds chunk c's partial (s: its completed chain; fr: its rows' headers; xs_c: its staged mins'
  // fragments) to the total in its turn (ChunkTeams); the last chunk's sums go to y (kLast).
  const auto add_chunk = [&](auto last, int c, const float(&s)[kN / 8][4], const FoldRow(&fr)[2],
                             const uint4* xs_c) {
    constexpr bool kLast = decltype(last)::value;
    teams.wait_turn(c);
    float sum[Teams::kElems];
    chunk_end(fr[0], fr[1], xs_c, lane, s, [&](int n, const float(&p)[4]) {
      const float4 v = teams.sum(c, n, p);
      if constexpr (kLast) {
        sum[4 * n] = v.x;
        sum[4 * n + 1] = v.y;
        sum[4 * n + 2] = v.z;
        sum[4 * n + 3] = v.w;
      } else {
        teams.keep(n, v);
      }
    });
    if constexpr (kLast)
      store_tile<kN>(a, sum, row0, tok0, twarp, lane);
    else
      teams.pass();
  };

  // s0, s1: the chains of the team's even and odd chunks (its k-th chunk is the block's chunk
  // kTeams k + team); f0, f1: their rows' headers; af: chunk_chain's two A sets.
  float s0[kN / 8][4] = {}, s1[kN / 8][4] = {};
  FoldRow f0[2], f1[2];
  uint32_t af[2][4][4];
  // The team's k-th chunk into cur (its headers into fr); prev / fr_prev: its (k - 1)-th, complete,
  // added to the total while this one's first group runs.
  auto run_chunk = [&](auto add_prev, int k, float(&cur)[kN / 8][4], const float(&prev)[kN / 8][4],
                       FoldRow(&fr)[2], const FoldRow(&fr_prev)[2]) {
    const int c = kTeams * k + team;
    const uint8_t* stage = stages + (k % kTeamStages) * S::kBytes;
    mbar_wait(full + k % kTeamStages, (k / kTeamStages) & 1);  // chunk c has landed
    // The next chunk's stage held chunk k - 1, whose phase is complete: armed before the team
    // meets, filled after it by the team's four warps (copy_chunk_part).
    const bool next = k + 1 < n_mine;
    if (ttid == 0 && next) fold64::arm_stage<kTiles, kN>(full + (k + 1) % kTeamStages);
    // Every warp of the team is past its chunk k - 1's wait for its wgmmas (that stage is free:
    // its headers are in fr_prev) and past chunk k - 2's end (its mins' buffer, k % 2, is free).
    team_sync();
    if (next)
      copy_chunk_part<kTiles, kRows, kN, kTiles>(
          a, &xmap, stages + ((k + 1) % kTeamStages) * S::kBytes, full + (k + 1) % kTeamStages,
          c + kTeams, row0, tok0, twarp, lane);
    const uint8_t* rec = stage + twarp * T::kBytes;
    fr[0] = fold_row(T::head(rec, g));
    fr[1] = fold_row(T::head(rec, g + 8));
    chunk_chain<kRows>(rec, stage + S::kRecBytes, fr[0], fr[1], lane, af, cur, [&] {
      // While the first group runs: chunk c's mins' fragments, staged for its end in the team's
      // next chunk (after that chunk's team_sync); not before the chain, where the owners' warps
      // would hold the team's first wgmma.
      if (x_owner) {
        xs[(k & 1) * kXs + ttid] =
            x_tok < a.n_tokens ? bias_b_both(xv) : make_uint4(0u, 0u, 0u, 0u);
        if (c + kTeams < n_chunks)
          xv = __ldg(reinterpret_cast<const float4*>(x_src + 8 * (c + kTeams)));
      }
      if constexpr (decltype(add_prev)::value)
        add_chunk(std::false_type{}, c - kTeams, prev, fr_prev, xs + ((k - 1) & 1) * kXs);
    });
  };
  // As the 128-row form: the team's chunks in pairs, then an odd last one (the sets stay in
  // registers; matmul_wgmma_fold64.cu).
  run_chunk(std::false_type{}, 0, s0, s1, f0, f1);
  int k = 1;
  for (; k + 1 < n_mine; k += 2) {
    run_chunk(std::true_type{}, k, s1, s0, f1, f0);
    run_chunk(std::true_type{}, k + 1, s0, s1, f0, f1);
  }
  if (k < n_mine) run_chunk(std::true_type{}, k, s1, s0, f1, f0);
  wgmma_wait<0>();
  team_sync();  // the last chunk's staged mins are published to the team
  const int last = n_mine - 1, c_last = kTeams * last + team;
  const uint4* last_xs = xs + (last & 1) * kXs;
  const auto finish = [&](const float(&s)[kN / 8][4], const FoldRow(&fr)[2]) {
    if (c_last == n_chunks - 1)
      add_chunk(std::true_type{}, c_last, s, fr, last_xs);
    else
      add_chunk(std::false_type{}, c_last, s, fr, last_xs);
  };
  if (last & 1)  // (a branch, not a reference to either: the sets stay in registers)
    finish(s1, f1);
  else
    finish(s0, f0);
#else
  __trap();  // launched only where prefill_wgmma_available() found sm_90a code
#endif
}

// The launch of one token tile width and team count.
template <int kN, int kTeams = 2>
void launch_split(const MatmulArgs& x, const BlockOuts& blocks, cudaStream_t stream) {
  using C = SplitCfg<kN, kTeams>;
  const CUtensorMap xmap = x_rows_map(x, kN);
  if (x.xp_rows)
    launch_block_outs<wgmma_fold64_split_kernel<true, kN, kTeams>, kN>(x, blocks, C::kThreads,
                                                                       C::kSmem, stream, xmap);
  else
    launch_block_outs<wgmma_fold64_split_kernel<false, kN, kTeams>, kN>(x, blocks, C::kThreads,
                                                                        C::kSmem, stream, xmap);
}

// MEMRA_SPLIT_TEAMS: 3 (the default since the fifty-first round) or 2 (the A/B): the token halves'
// blocks run three teams, each walking a third of the chunks. Why: a team's chunk is a latency
// chain (the split form issued 0.37 instructions a cycle per scheduler with two warps each), so a
// third warp a scheduler cuts a block's time at the same bits (ChunkTeams sums in chunk order for
// any team count): measured on an H100, the Q4_K down product at 64 tokens 44.6 -> 40.9 us (0.50
// issued a cycle), 8B Q4_K_M c64 6,300 -> 6,552 tok/s and c40 4,100 -> 4,266 (two more rounds
// alternated: +3.9% and +4.7%). Three teams of 64-token blocks would need 246 KB of stages; the
// halves' need 151 KB, and their kernel's ~160 registers fit 384 threads (at most 168).
int split_teams() {
  static const int teams = 2 + env_choice("MEMRA_SPLIT_TEAMS", {"2", "3"}, 1);
  return teams;
}

}  // namespace

// On by default since the forty-ninth round (H200, 8B Q4_K_M at 64 sequences: 4,800 -> 5,530
// tok/s with MEMRA_SCALED_DECODE); MEMRA_FOLD64_SPLIT=0 for the A/B (the same bits either way).
bool fold64_split_enabled() {
  static const bool enabled = env_switch("MEMRA_FOLD64_SPLIT", true);
  return enabled;
}

bool fold64_split_takes(int64_t row_blocks) {
  return fold64_split_enabled() && split_pays(row_blocks);
}

void launch_wgmma_fold64_split(const MatmulArgs& x, const BlockOuts& outs, cudaStream_t stream) {
  if (x.n_in % kChunk != 0 || outs.n < 1 || x.n_tokens > fold64::kBN)
    fail(ErrorCode::internal,
         "wgmma_fold64_split: K {} (whole 256-element chunks), {} outputs, {} tokens (at most {})",
         x.n_in, outs.n, x.n_tokens, fold64::kBN);
  const BlockOuts blocks = outs.in_blocks_of(kBM);
  if (!split_halves_take(blocks.block_begin[blocks.n], x.n_tokens))
    launch_split<64>(x, blocks, stream);
  else if (split_teams() == 3)
    launch_split<32, 3>(x, blocks, stream);
  else
    launch_split<32>(x, blocks, stream);
}

}  // namespace memra::kernels::matmul_detail
