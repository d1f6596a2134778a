// Private to kernels/matmul: two warpgroups ("teams") of a wgmma block that take one 64-row tile's
// 256-element chunks in turn (team w chunks w, w + 2, ...: the split forms of the pipelined Q4_K
// kernel and of the scaled Q6_K / Q8_0 kernel) and still sum the chunk partials in chunk order,
// matmul.cu's canonical order: ((p0 + p1) + p2) + ...
//
// The running total lives in shared memory, a slot an accumulator element. Team thread i of
// either team holds the same 32 elements of its chunk partials (wgmma's C layout over the same 64
// rows and 64 tokens), so each slot is written by one thread of each team, in turn: a team adds
// chunk c once the other team has added chunk c - 1, then arrives on its own barrier (one phase a
// chunk, 128 arrivals). The teams are then never more than one phase apart, which is what lets a
// parity wait name the phase.
#pragma once

#include <cstdint>

#include "kernels/bulk_copy.cuh"

namespace memra::kernels::matmul_detail {

struct ChunkTeams {
  static constexpr int kTeams = 2, kThreads = 128;
  static constexpr int kElems = 32;  // a thread's accumulator elements (m64n64: 8 n8 tiles x 4)
  static constexpr int kTotalBytes = kElems * kThreads * 4;
  static constexpr int kBarBytes = kTeams * 8;

  float* total;      // [element][team thread]
  uint64_t* added;   // added[w]: team w has added one more chunk
  int team, thread;  // this thread's team and its thread in it

  // total_at: kTotalBytes of shared memory; bars_at: kBarBytes, 8-byte aligned.
  __device__ __forceinline__ ChunkTeams(uint8_t* total_at, uint8_t* bars_at, int tid)
      : total(reinterpret_cast<float*>(total_at)),
        added(reinterpret_cast<uint64_t*>(bars_at)),
        team(tid / kThreads),
        thread(tid % kThreads) {}
  // Thread 0, before the block's first barrier.
  __device__ __forceinline__ void init() const {
    detail::mbar_init_stages(added, kTeams, kThreads);
  }
  // Before adding chunk c: the other team has added chunk c - 1 (its (c - 1) / 2-th).
  __device__ __forceinline__ void wait_turn(int c) const {
    if (c > 0) detail::mbar_wait(added + (1 - team), ((c - 1) >> 1) & 1);
  }
  // The total after chunk c's partial p of element j: p itself for chunk 0, else the total so far
  // plus p.
  __device__ __forceinline__ float sum(int c, int j, float p) const {
    return c == 0 ? p : __fadd_rn(total[j * kThreads + thread], p);
  }
  __device__ __forceinline__ void keep(int j, float v) const { total[j * kThreads + thread] = v; }
  // After keeping every element of chunk c (the last chunk's sums go to y instead, and nobody
  // waits for them).
  __device__ __forceinline__ void pass() const { detail::mbar_arrive(added + team); }
};

}  // namespace memra::kernels::matmul_detail
