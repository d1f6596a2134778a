// The attention prologue inside the decode kernel's one-split tensor form at one token (private to
// attention.cu; the kernel's kPrologue, kernels.h's AttentionPrologue, MEMRA_DECODE_PROLOGUE in
// the CUDA backend): q's and the new key's norms and rope and the KV write, which qk_prologue.cu
// runs as a launch of its own before attention, done by the attention blocks themselves.
//
// Why. At one sequence the prologue costs 1.2-1.3 us a layer in place (sixtieth round's
// MEMRA_DIAG_DROP on an H100), a launch and a dependent chain for ~3 KB of work, and the 0.6B's
// layer is ~33 us. Here each block stages its own query rows normed and rotated (a warp a row,
// registers only), and the blocks whose split holds the token's own key compute its K and V rows,
// write them into the cache (the kv head's first block) and over the slot's stale rows that their
// copies land, before the scores and the values read them.
//
// The same bits: every value is head_prologue4.cuh's, the arithmetic qk_prologue_kernel4 runs on
// the same operands (its q rows staged as stage_q_terms_from stages qk_prologue's output, its K and
// V rows to_cache's bits as store4_cache writes them), and a landed row is the cache row the
// separate prologue would have written before the copy read it. kernel-check's attention_prologue
// cases compare the outputs and both caches with qk_prologue then attention, bit for bit.
#pragma once

#include "kernels/attention/attention_mma.cuh"
#include "kernels/attention/decode_tensor.cuh"
#include "kernels/attention/head_prologue4.cuh"

namespace memra::kernels::detail {

// A warp's prologue operands and results, in registers. Warp r < n_rows stages query row r; the
// key warp of a block whose split holds the token's key (the warp whose scores read that key's
// K row: keys [16 w, + 16) of each 128-key chunk are warp w's) computes and writes its rows.
struct DecodePrologue {
  float q[4], k[4], v[4];  // the lane's elements 4l .. 4l + 3 of its rows
  float4 qw, kw;           // the norms' weights there
  LaneAngles4 angles;
  uint2 k_bits, v_bits;  // the new K and V elements of the lane, as the cache holds them
  int key;               // the token's key in the split (split-relative), -1 none
  int32_t slot;          // its cache slot
  bool q_row, k_row;     // this warp stages a query row / computes and writes the key's rows
};

// The operands, loaded once the kernel's wait has returned (q, k and v are the previous
// kernels'), before the copies are issued so that their round trips overlap the issue; q's loads
// depend on nothing else loaded (the slot only on the key warp). A padding token's key (slot -1)
// is neither written nor replaced: its attention reads what the slot holds, as after the separate
// prologue, which stores nothing for it.
template <typename CT>
__device__ __forceinline__ DecodePrologue load_decode_prologue(const AttnParams& p, const Run& run,
                                                               int s) {
  using C = MmaConfig<kHeadDim4, CT, false>;
  static_assert(C::kChunk == kAttnWarps * C::kKeysW, "a warp's keys: 16 of each chunk");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  DecodePrologue e{};
  const int o = run.hi - 1 - s * kSplit;
  const bool key_warp = o >= 0 && o < kSplit && warp == (o % C::kChunk) / C::kKeysW;
  e.key = -1;
  e.q_row = warp < run.n_rows;
  if (!e.q_row && !key_warp) return e;
  const float* angles = p.pro.angles + int64_t{run.tb} * kHeadDim4;  // cos, then sin
  e.angles = lane_angles4(angles, angles + kHeadDim4 / 2, p.pro.neox, lane);
  const auto load4 = [&](const float* row, float(&to)[4]) {
    const float4 x = *reinterpret_cast<const float4*>(row + 4 * lane);
    to[0] = x.x, to[1] = x.y, to[2] = x.z, to[3] = x.w;
  };
  if (e.q_row) {
    load4(p.q + int64_t{run.tb} * p.ldq + int64_t{run.h0 + warp} * kHeadDim4, e.q);
    if (p.pro.q_norm) e.qw = __ldg(reinterpret_cast<const float4*>(p.pro.q_norm) + lane);
  }
  if (key_warp) {
    const int64_t row = (int64_t{run.tb} * p.n_kv_heads + run.kv_head) * kHeadDim4;
    load4(p.pro.k + row, e.k);
    load4(p.pro.v + row, e.v);
    if (p.pro.k_norm) e.kw = __ldg(reinterpret_cast<const float4*>(p.pro.k_norm) + lane);
    e.slot = p.pro.slots[run.tb];
    e.k_row = e.slot >= 0;
    e.key = e.k_row ? o : -1;
  }
  return e;
}

// stage_q_terms_from's staging with the query rows normed and rotated here: warp r stages row r,
// four elements a lane; the tile's rows past the run's are zero. The row's key range as
// stage_q_terms_from publishes it.
template <typename CT>
__device__ __forceinline__ void stage_q_terms_prologue(const AttnParams& p, const Run& run,
                                                       const RowState& st, unsigned char* q_terms,
                                                       DecodePrologue& e) {
  using C = MmaConfig<kHeadDim4, CT, false>;
  constexpr int kPairs = kHeadDim4 / 2;  // a row's pairs
  if (threadIdx.x == 0) {
    st.qpos[0] = run.hi - 1;
    st.qlo[0] = run.lo;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (e.q_row) {
    float out[4];
    norm_rope4(e.q, p.pro.q_norm != nullptr, e.qw, p.pro.eps, e.angles, p.pro.neox, lane, out);
    store_q_pair<CT, C, C::kRows>(q_terms, warp, 4 * lane, make_float2(out[0], out[1]));
    store_q_pair<CT, C, C::kRows>(q_terms, warp, 4 * lane + 2, make_float2(out[2], out[3]));
  }
  static_assert(C::kRows >= 16, "stage_q_terms' tiles of whole rows");
  const int total = ((run.n_rows + 15) & ~15) * kPairs;
  for (int i = run.n_rows * kPairs + static_cast<int>(threadIdx.x); i < total; i += kAttnThreads)
    store_q_pair<CT, C, C::kRows>(q_terms, i / kPairs, 2 * (i % kPairs), make_float2(0.0f, 0.0f));
}

// The key warp: the new key's K row normed and rotated and its V row, as the cache holds them;
// the kv head's first block (its first query heads') writes them into the token's slot (the
// other blocks of the head hold the same rows). Under K's landing: their copies may read the slot
// before or after this write, and either way the rows they land are replaced (landed_key_rows).
template <typename CT>
__device__ __forceinline__ void prologue_key_rows(const AttnParams& p, const Run& run,
                                                  DecodePrologue& e) {
  if (!e.k_row) return;
  const int lane = threadIdx.x % 32;
  float out[4];
  norm_rope4(e.k, p.pro.k_norm != nullptr, e.kw, p.pro.eps, e.angles, p.pro.neox, lane, out);
  e.k_bits = pack4_cache16<CT>(out);
  e.v_bits = pack4_cache16<CT>(e.v);
  if (run.h0 != run.kv_head * p.group) return;
  const int64_t at = (int64_t{e.slot} * p.n_kv_heads + run.kv_head) * kHeadDim4;
  reinterpret_cast<uint2*>(static_cast<CT*>(const_cast<void*>(p.k)) + at)[lane] = e.k_bits;
  reinterpret_cast<uint2*>(static_cast<CT*>(const_cast<void*>(p.v)) + at)[lane] = e.v_bits;
}

// Once this thread has seen the rows (K's or V's) land: the key warp's lanes put the new key's
// elements over its landed row in the tensor copies' layout (decode_tensor.cuh: lane l's four are
// the second or first half of 16-byte chunk l / 2). K's row is read by the key warp alone (its
// scores), so a warp barrier publishes it; V's by every warp, after the block barrier that
// follows V's landing.
__device__ __forceinline__ void landed_key_row(const DecodePrologue& e, uint2 bits,
                                               unsigned char* rows, int bs_shift) {
  if (!e.k_row) return;
  const int lane = threadIdx.x % 32;
  *reinterpret_cast<uint2*>(rows + key_chunk_offset<true, 0>(e.key, lane / 2, bs_shift) +
                            8 * (lane & 1)) = bits;
  __syncwarp();
}

}  // namespace memra::kernels::detail
