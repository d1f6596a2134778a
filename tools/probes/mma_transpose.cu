// A probe, not part of the build: whether the tensor cores' m16n8k16 product gives the same bits
// for an element computed as (A B + C)[i][j] and as (B^T A^T + C^T)[j][i], over chains of dependent
// products (bf16 and f16 inputs, f32 accumulators); and what a dependent chain of them costs a link
// against independent ones (one warp, then 8 warps a block). Decode attention at one query row
// wastes 15 of an mma's 16 rows; with its operands transposed (keys or dims as the rows, the query
// rows as the columns) it wastes 7 of 8 columns and needs half the products, the same bits only if
// the hardware's dot product does not depend on an element's place. Run on the GPU box:
//   nvcc -O2 -std=c++17 -gencode=arch=compute_90a,code=sm_90a tools/probes/mma_transpose.cu \
//     -o /tmp/mma_transpose && /tmp/mma_transpose
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

template <typename T>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                    uint32_t b1) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <typename T>
__device__ uint32_t pack(T lo, T hi) {
  uint16_t l, h;
  memcpy(&l, &lo, 2), memcpy(&h, &hi, 2);
  return uint32_t{l} | (uint32_t{h} << 16);
}

// One warp. x: [links][16][16] (A of each link, row-major), y: [links][16][16] (B's 16 x 16: the
// second 8 columns for the transposed side), c0: [16][16] f32 start. Straight: D[16][16] =
// chain of A_l Y_l (two n8 tiles). Transposed: D^T = chain of Y_l^T A_l^T (Y^T 16 x 16 as A, A^T as
// two n8 tiles of B). out_s, out_t: [16][16] each (out_t stored back in D's orientation).
template <typename T>
__global__ void chains(const T* x, const T* y, const float* c0, int links, float* out_s,
                       float* out_t) {
  const int lane = threadIdx.x, g = lane >> 2, t = lane & 3;
  float s[2][4], tr[2][4];
  for (int n = 0; n < 2; ++n)
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e >> 1), col = 8 * n + 2 * t + (e & 1);
      s[n][e] = c0[r * 16 + col];
      tr[n][e] = c0[col * 16 + r];  // C^T[r][col] with r in [0, 16) as D^T's rows
    }
  for (int l = 0; l < links; ++l) {
    const T* A = x + l * 256;
    const T* Y = y + l * 256;
    uint32_t a[4], at[4];
    a[0] = pack(A[g * 16 + 2 * t], A[g * 16 + 2 * t + 1]);
    a[1] = pack(A[(g + 8) * 16 + 2 * t], A[(g + 8) * 16 + 2 * t + 1]);
    a[2] = pack(A[g * 16 + 2 * t + 8], A[g * 16 + 2 * t + 9]);
    a[3] = pack(A[(g + 8) * 16 + 2 * t + 8], A[(g + 8) * 16 + 2 * t + 9]);
    // Y^T as A: row i, col k = Y[k][i].
    at[0] = pack(Y[(2 * t) * 16 + g], Y[(2 * t + 1) * 16 + g]);
    at[1] = pack(Y[(2 * t) * 16 + g + 8], Y[(2 * t + 1) * 16 + g + 8]);
    at[2] = pack(Y[(2 * t + 8) * 16 + g], Y[(2 * t + 9) * 16 + g]);
    at[3] = pack(Y[(2 * t + 8) * 16 + g + 8], Y[(2 * t + 9) * 16 + g + 8]);
    for (int n = 0; n < 2; ++n) {
      // Straight: B = Y[:, 8n + j], b0 rows 2t, 2t+1 col g.
      const uint32_t b0 = pack(Y[(2 * t) * 16 + 8 * n + g], Y[(2 * t + 1) * 16 + 8 * n + g]);
      const uint32_t b1 = pack(Y[(2 * t + 8) * 16 + 8 * n + g], Y[(2 * t + 9) * 16 + 8 * n + g]);
      mma<T>(s[n], a, b0, b1);
      // Transposed: B = A^T[:, 8n + j]: B[k][j] = A[8n + j][k].
      const uint32_t c0b = pack(A[(8 * n + g) * 16 + 2 * t], A[(8 * n + g) * 16 + 2 * t + 1]);
      const uint32_t c1b = pack(A[(8 * n + g) * 16 + 2 * t + 8], A[(8 * n + g) * 16 + 2 * t + 9]);
      mma<T>(tr[n], at, c0b, c1b);
    }
  }
  for (int n = 0; n < 2; ++n)
    for (int e = 0; e < 4; ++e) {
      const int r = g + 8 * (e >> 1), col = 8 * n + 2 * t + (e & 1);
      out_s[r * 16 + col] = s[n][e];
      out_t[col * 16 + r] = tr[n][e];  // D^T[r][col] = D[col][r]
    }
}

// kChains independent chains of `links` dependent mma a warp; cycles of the whole loop.
template <int kChains>
__global__ void timing(int links, float* sink, long long* cycles) {
  float c[kChains][4] = {};
  uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, 7u, 9u};
  __syncthreads();
  const long long t0 = clock64();
  for (int l = 0; l < links; ++l)
#pragma unroll
    for (int k = 0; k < kChains; ++k) mma<__nv_bfloat16>(c[k], a, 0x3c003c00u + k, 0x3c003c00u);
  __syncthreads();
  const long long t1 = clock64();
  float acc = 0;
  for (int k = 0; k < kChains; ++k) acc += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <typename T>
int compare(const char* name, int links, std::mt19937& rng) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<T> x(links * 256), y(links * 256);
  std::vector<float> c0(256);
  for (auto& v : x) v = T(nd(rng) * 4.0f);
  for (auto& v : y) v = T(nd(rng));
  for (auto& v : c0) v = nd(rng) * 100.0f;
  T *dx, *dy;
  float *dc, *ds, *dt;
  cudaMalloc(&dx, x.size() * sizeof(T)), cudaMalloc(&dy, y.size() * sizeof(T));
  cudaMalloc(&dc, 1024), cudaMalloc(&ds, 1024), cudaMalloc(&dt, 1024);
  cudaMemcpy(dx, x.data(), x.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dy, y.data(), y.size() * sizeof(T), cudaMemcpyHostToDevice);
  cudaMemcpy(dc, c0.data(), 1024, cudaMemcpyHostToDevice);
  chains<T><<<1, 32>>>(dx, dy, dc, links, ds, dt);
  std::vector<float> s(256), t(256);
  cudaMemcpy(s.data(), ds, 1024, cudaMemcpyDeviceToHost);
  cudaMemcpy(t.data(), dt, 1024, cudaMemcpyDeviceToHost);
  int diff = 0;
  for (int i = 0; i < 256; ++i) diff += memcmp(&s[i], &t[i], 4) != 0;
  printf("%s links %d: %d of 256 elements differ between A B and (B^T A^T)^T\n", name, links, diff);
  cudaFree(dx), cudaFree(dy), cudaFree(dc), cudaFree(ds), cudaFree(dt);
  return diff;
}

template <int kChains>
void time_chains(int warps, int links) {
  float* sink;
  long long* cycles;
  cudaMalloc(&sink, 132 * warps * 32 * 4), cudaMalloc(&cycles, 132 * 8);
  timing<kChains><<<132, warps * 32>>>(links, sink, cycles);
  long long c = 0;
  cudaMemcpy(&c, cycles, 8, cudaMemcpyDeviceToHost);
  printf(
      "%d warps a block, %d chains a warp of %d links: %lld cycles, %.1f a link, %.1f an mma "
      "a sub-partition\n",
      warps, kChains, links, c, double(c) / links,
      double(c) / (double(links) * kChains * warps / 4.0));
  cudaFree(sink), cudaFree(cycles);
}

int main() {
  std::mt19937 rng(7);
  int bad = 0;
  for (int links : {1, 3, 48}) {
    bad += compare<__nv_bfloat16>("bf16", links, rng);
    bad += compare<__half>("f16", links, rng);
  }
  for (int warps : {1, 8}) {
    time_chains<1>(warps, 48);
    time_chains<2>(warps, 48);
    time_chains<4>(warps, 48);
  }
  printf(bad ? "transposed: DIFFERENT bits\n" : "transposed: the same bits\n");
  return bad ? 1 : 0;
}
