// Private to kernels/matmul: two (or three) warpgroups ("teams") of a wgmma block that take one
// 64-row tile's 256-element chunks in turn (team w chunks w, w + 2, ...: the split forms of the
// pipelined Q4_K kernel and of the scaled Q6_K / Q8_0 kernel) and still sum the chunk partials in
// chunk order, matmul.cu's canonical order: ((p0 + p1) + p2) + ...
//
// The running total lives in shared memory, 16 KB. Team thread i of either team holds the same 32
// elements of its chunk partials (wgmma's C layout over the same 64 rows and 64 tokens: n8 tile n's
// four in its registers 4n .. 4n + 3), so each slot is written by one thread of each team, in
// turn: a team adds chunk c once the other team has added chunk c - 1, then arrives on its own
// barrier (one phase a chunk, 128 arrivals). The teams are then never more than one phase apart,
// which is what lets a parity wait name the phase. A thread's tiles are 16-byte slots of its own
// 128 bytes, tile n at slot (n + i) % 8, so that a quarter warp's eight 16-byte accesses of one
// tile fall in eight different bank quads (one load and one store a tile, not four of each); at
// 32 tokens (m64n32, the token halves) 64 bytes, tile n at slot (n + i) % 4.
#pragma once

#include <cstdint>

#include "kernels/bulk_copy.cuh"

namespace memra::kernels::matmul_detail {

// kElemsT: a thread's accumulator elements (m64n64: 8 n8 tiles x 4; the token halves' m64n32: 16).
// kTeamsT: the teams (two; three in the Q4_K split form's token halves, split_teams: team w takes
// chunks w, w + 3, ...). With any count a team adds chunk c once the team of chunk
// c - 1 has; the chain of turns keeps that team at most one phase ahead of the wait (it cannot add
// chunk c - 1 + kTeams before chunk c is added), so a parity wait still names the phase.
template <int kElemsT = 32, int kTeamsT = 2>
struct ChunkTeamsOf {
  static constexpr int kTeams = kTeamsT, kThreads = 128;
  static constexpr int kElems = kElemsT;
  static constexpr int kSlots = kElems / 4;  // 16-byte slots a thread
  static_assert(kSlots == 8 || kSlots == 4, "m64n64 or m64n32");
  static constexpr int kTotalBytes = kElems * kThreads * 4;
  static constexpr int kBarBytes = kTeams * 8;

  float* total;      // [team thread][16-byte slot][4]: 16-byte aligned
  uint64_t* added;   // added[w]: team w has added one more chunk
  int team, thread;  // this thread's team and its thread in it

  // total_at: kTotalBytes of shared memory, 16-byte aligned; bars_at: kBarBytes, 8-byte aligned.
  __device__ __forceinline__ ChunkTeamsOf(uint8_t* total_at, uint8_t* bars_at, int tid)
      : total(reinterpret_cast<float*>(total_at)),
        added(reinterpret_cast<uint64_t*>(bars_at)),
        team(tid / kThreads),
        thread(tid % kThreads) {}
  // Thread 0, before the block's first barrier.
  __device__ __forceinline__ void init() const {
    detail::mbar_init_stages(added, kTeams, kThreads);
  }
  // Before adding chunk c: the team of chunk c - 1 has added it (its (c - 1) / kTeams-th).
  __device__ __forceinline__ void wait_turn(int c) const {
    if constexpr (kTeams == 2) {
      if (c > 0) detail::mbar_wait(added + (1 - team), ((c - 1) >> 1) & 1);
    } else {
      if (c > 0) detail::mbar_wait(added + (c - 1) % kTeams, ((c - 1) / kTeams) & 1);
    }
  }
  // The total after chunk c's partial p of n8 tile n (its four elements): p itself for chunk 0,
  // else the total so far plus p.
  __device__ __forceinline__ float4 sum(int c, int n, const float (&p)[4]) const {
    if (c == 0) return make_float4(p[0], p[1], p[2], p[3]);
    const float4 t = *slot(n);
    return make_float4(__fadd_rn(t.x, p[0]), __fadd_rn(t.y, p[1]), __fadd_rn(t.z, p[2]),
                       __fadd_rn(t.w, p[3]));
  }
  __device__ __forceinline__ void keep(int n, float4 v) const { *slot(n) = v; }
  // After keeping every tile of chunk c (the last chunk's sums go to y instead, and nobody
  // waits for them).
  __device__ __forceinline__ void pass() const { detail::mbar_arrive(added + team); }

 private:
  __device__ __forceinline__ float4* slot(int n) const {
    return reinterpret_cast<float4*>(total) + thread * kSlots + ((n + thread) & (kSlots - 1));
  }
};
using ChunkTeams = ChunkTeamsOf<>;

}  // namespace memra::kernels::matmul_detail
