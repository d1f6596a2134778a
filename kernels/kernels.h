// The CUDA kernels' host-side launch functions: the contract between kernels/ and the CUDA backend
// (src/backend/cuda). Kernels know no model, no tensor class and no engine: raw device pointers,
// sizes and a stream. They never allocate and never synchronize; a launch error is reported by
// the caller's next cudaGetLastError / stream check.
//
// Determinism (the product's contract, DESIGN.md): every output element's reduction order is a
// function of that element's own inputs and the problem's fixed dimensions (K, head_dim, the
// fixed attention split size), never of how many other rows, tokens or sequences share the
// launch. So a token's result is bit-identical alone or in a batch, in a prefill chunk of any
// length, or recomputed after preemption.
//
// Layouts: activations are f32 row-major [n_tokens x dim]. Weights are ggml row-major: a matrix
// maps n_in -> n_out features, each of its n_out rows holds n_in elements of `wtype` (ggml block
// layout, n_in a multiple of the type's block size), rows contiguous.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "core/dtype.h"
#include "core/sampling_math.h"

namespace memra::kernels {

// ---- matmul (kernels/matmul) -------------------------------------------------------------------

// True when matmul() has a kernel for this weight dtype (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K at least).
bool matmul_supports(DType wtype);

// Bytes of device scratch matmul() needs for n_tokens rows of n_in (the f16 copy of x, its group
// sums and row scales).
size_t matmul_scratch_bytes(int64_t n_tokens, int64_t n_in);

// Where a weight matrix's bytes sit. ggml: the file's rows of blocks (above). tiled: the same
// quants and scales regrouped at load into 16-row x 256-element records in the order the decode
// kernel's lanes read them (kernels/matmul/tiled.cuh), so decode streams weights with wide loads
// straight into registers. Both give bit-identical outputs; tiled exists for Q4_K, Q6_K, Q8_0,
// F16 and BF16 matrices whose n_in is a multiple of 256 (BF16 stored as the f16 operands the
// kernels make of it, so the same bytes).
enum class WeightLayout : uint8_t { ggml, tiled };
bool matmul_tiled_supports(DType wtype, int64_t n_in);
size_t matmul_tiled_bytes(DType wtype, int64_t n_in, int64_t n_out);  // 0 when unsupported
// Writes the tiled form of a ggml matrix (device memory) to `tiled` (matmul_tiled_bytes bytes),
// or of n_matrices stacked ones (experts: each the next after the last, in both layouts). Returns
// once they are written: the decode products read weights before they wait for the kernel before
// them (tiled_chunk.cuh's EarlyChunk), so no product may overlap the tiling.
void matmul_tile(DType wtype, const void* ggml, int64_t n_in, int64_t n_out, void* tiled,
                 cudaStream_t stream, int64_t n_matrices = 1);

// y[t][o] = sum_i W[o][i] * x[t][i] for t < n_tokens, o < n_out; y is [n_tokens x n_out] with row
// stride ldy floats (>= n_out; lets a fused QKV write into one wider row). Quantized weights are
// dequantized in registers/shared memory inside the kernel, never to a whole-matrix copy.
// n_in: a multiple of 16 for the tensor-core kernels; F32 weights, and F16 / BF16 weights whose
// n_in is no multiple of 16 (tiny test fixtures), take an exact f32 FFMA path instead, any n_in,
// one kernel and one reduction order for every n_tokens (matmul.cu).
// scratch: matmul_scratch_bytes(n_tokens, n_in) bytes of device memory.
void matmul(DType wtype, const void* w, int64_t n_in, int64_t n_out, const float* x,
            int64_t n_tokens, float* y, int64_t ldy, void* scratch, cudaStream_t stream,
            WeightLayout layout = WeightLayout::ggml);

// Several matmuls over the same x (the q, k and v projections of one input; gate and up): x is
// prepared once, then each output runs as matmul() would, with identical results. outs[i].y is
// [n_tokens x n_out] with row stride ldy. scratch: matmul_scratch_bytes(n_tokens, n_in).
struct MatmulOut {
  DType wtype;
  const void* w;
  int64_t n_out;
  float* y;
  int64_t ldy;
  WeightLayout layout = WeightLayout::ggml;
};
// A second stream for matmul_shared_x's shared wgmma launches beyond the first (a Q4_K_M layer's
// Q6_K v beside its Q4_K q and k, which alone leave much of the GPU idle: in prefill steps their
// last wave, in 33-64-token decode steps 80 of 132 SMs' blocks): those launches run on `stream`
// after `fork` (recorded on the caller's stream once x is converted), and the caller's stream
// waits for `join` before the call returns. The events are the caller's, created with
// cudaEventDisableTiming. Inside a graph capture the fork and the join become a branch of the
// graph and its merge.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
};
// x_prepared: rms_norm_for_matmul wrote x's prepared form to scratch (n_tokens <= kPreparedRows,
// and nothing else used the scratch since), so it is not made again. side: see SideStream (the
// shared wgmma launches of prefill steps use it; those of steps of at most 64 tokens unless
// MEMRA_DECODE_SIDE_STREAM=0, matmul.cu; the outputs are the same bits either way).
void matmul_shared_x(const MatmulOut* outs, int n_outs, int64_t n_in, const float* x,
                     int64_t n_tokens, void* scratch, cudaStream_t stream, bool x_prepared = false,
                     const SideStream* side = nullptr);

// rms_norm (d null) or add_rms_norm (kernels in norm.cu) of n_rows <= kPreparedRows rows that
// also writes y's matmul input to `scratch` (matmul_scratch_bytes(n_rows, dim) bytes) exactly as
// matmul_shared_x would prepare it for x = y: a decode step's norm feeds the q/k/v and gate/up
// products without a launch in between. dim: a positive multiple of 16; x, d, y 16-byte aligned.
constexpr int64_t kPreparedRows = 16;
void rms_norm_for_matmul(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim,
                         float eps, float* y, void* scratch, cudaStream_t stream);

// matmul computes BF16 weights in f16 (exact within f16's range): counts the elements of a BF16
// tensor (n elements, device memory) whose magnitude exceeds f16's largest finite value 65504,
// adding into *count (device memory, zeroed by the caller). The backend refuses such a tensor.
void bf16_count_beyond_f16(const void* w, int64_t n, unsigned long long* count,
                           cudaStream_t stream);

// ---- matmul, fast mode (matmul_dequant.cu): not batch-invariant ------------------------------
// `--deterministic off` lets a step of more than 64 tokens multiply by cuBLASLt (the backend's
// part) on a plain f16 copy of each tiled weight matrix instead of the canonical kernels: faster
// prefill, but a token's output bits then depend on which path its step took.

// Which weights have such a copy: tiled Q4_K, Q6_K, Q8_0, F16 and BF16.
bool matmul_dequant_supported(DType wtype, WeightLayout layout);
// out: f16 [n_out][n_in] (row-major, 16-byte aligned) with each weight fma(scale, q, bias)
// rounded once to f16 (F16 and tiled BF16 weights are copied exactly).
void matmul_dequant_f16(DType wtype, const void* tiled, int64_t n_in, int64_t n_out, void* out,
                        cudaStream_t stream);
// x's f16 rows as matmul prepares them (each row times its own power of two), in scratch
// (matmul_scratch_bytes(n_tokens, n_in) bytes): xh [n_tokens][n_in] and xinv [n_tokens], the
// factor that undoes each row's scaling.
struct PreparedX {
  const uint16_t* xh;
  const float* xinv;
};
PreparedX matmul_prepare_x(const float* x, int64_t n_tokens, int64_t n_in, void* scratch,
                           cudaStream_t stream);
// The persistent decode chain (matmul_decode_chain.cu), memra-kernel-bench's measure of what a
// persistent decode step saves: the one-token products of n_calls calls of
// matmul_shared_x(outs, n_outs, n_in, x, 1, scratch, stream, x_prepared = true), in call order,
// by one resident grid with a grid-wide barrier between calls where the launches have a kernel
// boundary; the same block code on the same blocks, so the same bits. Tiled Q4_K outputs only
// (others are refused by name), at most 4 a call.
struct DecodeChainCall {
  const MatmulOut* outs;
  int n_outs;
  int64_t n_in;
  void* scratch;  // x prepared there for one token (matmul_prepare_x)
};
struct DecodeChain {
  const void* plan;
  int n_calls;
  int grid;  // resident blocks: the grid of every run
  int smem;  // dynamic shared memory a block
  int n_sms;
};
constexpr int kDecodeChainCounters = 1024;  // the unsigneds of a run's counters
size_t decode_chain_bytes(int n_calls);     // device bytes of a chain's plan
// Writes the chain's plan to `plan` (decode_chain_bytes(n_calls) bytes of device memory), returning
// once it is written.
DecodeChain decode_chain_plan(const DecodeChainCall* calls, int n_calls, void* plan);
// Runs the chain (counters: kDecodeChainCounters device unsigneds, reset by the run). early: 0, a
// call's weights loaded after its barrier; 1, each block's first chunk loaded before it (as the
// launches' EarlyChunk); 2, that block's tiles also prefetched to L2 before it. spread: the
// grid's blocks take a call's blocks spread over the SMs (else in blockIdx order).
void decode_chain_run(const DecodeChain& chain, int early, bool spread, unsigned* counters,
                      cudaStream_t stream);
// The launches' boundaries alone: n_calls launches of an empty kernel of `blocks` blocks of the
// one-token kernel's 256 threads, each triggering its dependent at its exit and waiting for the
// one before, as the products do under programmatic dependent launch.
void decode_chain_boundaries(int n_calls, int blocks, cudaStream_t stream);
// y[r][0..n) *= s[r] for r < n_rows (rows at stride ld floats).
void scale_rows(float* y, const float* s, int64_t n_rows, int64_t n, int64_t ld,
                cudaStream_t stream);

// ---- mixture of experts (kernels/moe, kernels/matmul/matmul_experts.cu) ------------------------
// The ops of ops.h's MoE section. Per token: the router's softmax top-k (ids, weights [n x k] in
// increasing expert index), at most kMoeMaxExperts experts; logits [n x n_expert]; scale: null
// or [n_expert] factors.
constexpr int kMoeMaxExperts = 512;
void moe_route(const float* logits, int64_t n_tokens, int n_expert, int k, bool normalize,
               const float* scale, int32_t* ids, float* weights, cudaStream_t stream);
// out[t] = sum over j < k of weights[t k + j] * y[t k + j] (rows of dim), each product and sum
// rounded alone, from the first product.
void moe_combine(const float* y, const float* weights, int64_t n_tokens, int k, int64_t dim,
                 float* out, cudaStream_t stream);
// y[r] *= sigmoid(g[r]) (in double, rounded to f32) over n_rows rows of dim.
void sigmoid_scale_rows(float* y, const float* g, int64_t n_rows, int64_t dim, cudaStream_t stream);

// Expert matmuls with the routing on the device: y row p = expert ids[p]'s matrix times x row
// p / x_div, for every (token, expert) pair p < n_pairs, ids in [0, n_expert). Each row is
// computed by a decode kernel and so is bit-identical to matmul() of that row over that expert's
// matrix. Up to kExpertPairsPerPair pairs, each pair runs alone (the one-token kernel, one launch
// per dtype of tiled stacks, one per stack in the file's layout); more are sorted by expert on the
// device and each expert's matrix runs once over its rows (the tiled decode kernel, 64 rows at a
// time). For tiled Q4_K, Q6_K and Q8_0 stacks (and stacks in the file's layout:
// ExpertsOut::layout) and up to kExpertPairsMax pairs;
// matmul_experts_supports says yes only up to expert_pairs_on_device() pairs, and a step of more is
// the caller's to group (the backend's host-grouped path).
constexpr int64_t kExpertPairsPerPair = 64;
constexpr int64_t kExpertPairsMax = 16384;
// expert_pairs_on_device()'s default: every step the sort takes, prefill included (a 512-token
// prompt of Qwen3-30B-A3B's shape: 2,308 tok/s with the pairs grouped on the host, 3,216 on the
// device; docs/PERFORMANCE.md eleventh round).
constexpr int64_t kExpertPairsOnDevice = kExpertPairsMax;
// The most pairs matmul_experts_supports takes: MEMRA_MOE_DEVICE_MAX_PAIRS when set (an integer,
// clamped to [kExpertPairsPerPair, kExpertPairsMax]; anything else is refused by name), else
// kExpertPairsOnDevice. Read once.
int64_t expert_pairs_on_device();
bool matmul_experts_supports(DType wtype, WeightLayout layout, int64_t n_in, int64_t n_pairs);
struct ExpertsOut {
  DType wtype;
  const void* w;         // expert 0's matrix (its first row tile, or first row for ggml)
  int64_t expert_bytes;  // from one expert's matrix to the next
  int64_t n_out;
  float* y;  // [n_pairs x n_out]
  // ggml: the experts' matrices in the file's layout, for any type matmul's mma kernels take
  // (experts whose K the tiled layout cannot hold): up to kExpertPairsPerPair pairs a block per
  // pair (MEMRA_MOE_GGML_PAIRS=0: sorted there too), above sorted by expert, the ggml decode
  // kernel a pass of up to 64 rows (MEMRA_MOE_DEVICE_GGML=0 routes such experts on the host).
  WeightLayout layout = WeightLayout::tiled;
};
size_t matmul_experts_scratch_bytes(const ExpertsOut* outs, int n_outs, int64_t n_in, int x_div,
                                    int64_t n_pairs, int n_expert);
void matmul_experts(const ExpertsOut* outs, int n_outs, int64_t n_in, const float* x, int x_div,
                    const int32_t* ids, int64_t n_pairs, int n_expert, void* scratch,
                    cudaStream_t stream);
// The grouped path's sort (exposed for kernel-check): pairs p < n_pairs (1..kExpertPairsMax)
// stably sorted by ids[p] (ties in pair order): begin [n_expert + 1], where each expert's pairs
// start (begin[n_expert] = n_pairs); rows [n_pairs], the x row (p / x_div) of the i-th sorted
// pair; place [n_pairs], where pair p landed. ids must lie in [0, n_expert).
void matmul_experts_group(const int32_t* ids, int64_t n_pairs, int n_expert, int x_div,
                          int32_t* begin, int32_t* rows, int32_t* place, cudaStream_t stream);

// ---- elementwise (kernels/elementwise) ---------------------------------------------------------

// out[r][:] = table row ids[r] dequantized to f32, times scale. ids must be valid rows (the
// backend checks them on the host before upload).
void get_rows(DType dtype, const void* table, int64_t n_cols, const int32_t* ids, int64_t n_ids,
              float scale, float* out, cudaStream_t stream);
// out[r][:] = x[rows[r]][:] for r < n_rows (gathering the rows that need logits).
void gather_rows(const float* x, int64_t dim, const int32_t* rows, int64_t n_rows, float* out,
                 cudaStream_t stream);
// y = x * rsqrt(mean(x^2) + eps) * w over each row of dim (w may be null). In place allowed.
// One block per row; the sum's order depends on dim only.
void rms_norm(const float* x, const float* w, int64_t n_rows, int64_t dim, float eps, float* y,
              cudaStream_t stream);
// Fused residual add + norm: x += d (x updated in place), then y = rms_norm(x) * w.
void add_rms_norm(float* x, const float* d, const float* w, int64_t n_rows, int64_t dim, float eps,
                  float* y, cudaStream_t stream);
// Gemma's sandwich norms between two blocks in one launch, bit-identical to the plain kernels in
// this order: rms_norm(d, w_post) in place; add(x, d); scale(x, x_scale) unless x_scale is 1; and,
// when y is not null, rms_norm(x, w_pre) into y. prepared: null, or matmul scratch that also gets
// y's matmul input as rms_norm_for_matmul writes it (its limits: n_rows <= kPreparedRows, dim a
// multiple of 16, y 16-byte aligned).
void post_norm_add_norm(float* d, const float* w_post, float* x, float x_scale, const float* w_pre,
                        float* y, int64_t n_rows, int64_t dim, float eps, void* prepared,
                        cudaStream_t stream);
// Two norms of the same rows in one launch (one reduction), bit-identical to rms_norm(x, w1) into
// y1, scale(y1, s1), rms_norm(x, w2) into y2. prepared: as above, for y1.
void rms_norm_dual(const float* x, const float* w1, float s1, float* y1, const float* w2, float* y2,
                   int64_t n_rows, int64_t dim, float eps, void* prepared, cudaStream_t stream);
void add(float* y, const float* x, int64_t n, cudaStream_t stream);  // y += x
// y[t][i] += b[i] over n_rows rows of dim, row stride ld (>= dim).
void add_row(float* y, const float* b, int64_t n_rows, int64_t dim, int64_t ld,
             cudaStream_t stream);
void scale(float* y, float s, int64_t n, cudaStream_t stream);
void softcap(float* y, float cap, int64_t n, cudaStream_t stream);  // y = cap * tanh(y / cap)
// out[i] = act(gate[i]) * up[i]; act = silu or gelu (tanh approximation). Rows of n_cols read
// at row stride ld_in (gate and up may be halves of one fused [n_rows x 2*n_ff] buffer) and
// written densely.
enum class Act { silu, gelu_tanh };
void act_mul(Act act, const float* gate, const float* up, int64_t n_rows, int64_t n_cols,
             int64_t ld_in, float* out, cudaStream_t stream);

// ---- sampling (kernels/sampling) ---------------------------------------------------------------

// ids[r] = the first index of the largest of x[r][0..n_cols) (rows at stride ld floats), as
// std::max_element picks it: NaN never wins, except that a NaN x[r][0] gives 0. One block per
// row; deterministic. ids: [n_rows] device int32.
void argmax_rows(const float* x, int64_t n_rows, int64_t n_cols, int64_t ld, int32_t* ids,
                 cudaStream_t stream);

// The sampling chain of backend/cpu/sample_chain.h on n_rows rows of logits (stride ld, the
// first n_cols of each), bit for bit: one block per row, each with its own RowParams, whose
// ranges index penalties, bias (stable-sorted by token) and mask_words (uint64 grammar bitmask
// words, structured::TokenMask's layout). results[r]: the token and, when logprobs are asked,
// the raw logits' max, canonical exp-sum and top entries (the host finishes the logprobs).
// A row is left to the host (status kRowDeferred) when: a logit is NaN, or a scaled one +inf
// (the host chain names it in its error); no logit is finite; logprobs are asked of a row with
// a NaN or no finite logit; top-p needs more than the kSampleHead best tokens.
// scratch: n_rows * n_cols floats of device memory. All pointers are device memory.
constexpr int64_t kSampleMaxCols = 524288;
constexpr int kSampleHead = 1024;
void sample_rows(const float* logits, int64_t n_rows, int64_t n_cols, int64_t ld,
                 const sampling::RowParams* params, const sampling::Penalty* penalties,
                 const sampling::Bias* bias, const uint64_t* mask_words, float* scratch,
                 sampling::RowResult* results, cudaStream_t stream);

// ---- rope (kernels/rope) -----------------------------------------------------------------------

// Rotates the first n_rot dims of each head of x: [n_tokens rows, row stride ld floats] of
// n_heads x head_dim, in place, at positions[t]. inv_freq: [n_rot / 2] f64 device array (radians
// per position, scaling applied; double because position * inv_freq must match the CPU reference
// at positions of 1e5 and more). neox: pairs (i, i + n_rot/2); else pairs (2i, 2i+1). The angle
// is computed as in the CPU reference: theta = position * inv_freq[i] in double, then cos/sin
// in double, rounded to float. Dims >= n_rot are left untouched.
void rope(float* x, int64_t n_tokens, int64_t ld, int n_heads, int head_dim, int n_rot, bool neox,
          const int32_t* positions, const double* inv_freq, cudaStream_t stream);

// ---- paged KV cache and attention (kernels/attention) -----------------------------------------

// One layer's paged K or V storage: [n_blocks][block_size][n_kv_heads][head_dim] of dtype f32,
// f16, bf16 or f8_e4m3 (the cache's dtype), in device memory.
struct PagedKv {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::bf16;
  int32_t block_size = 16;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  // The cache's blocks (k and v each hold n_blocks x block_size slots): what a tensor map over
  // them spans (the decode kernel's tensor copies, MEMRA_DECODE_TENSOR). 0: not said, and those
  // copies are not taken.
  int32_t n_blocks = 0;
};

// Per-step metadata in device memory (uploaded once per step by the backend).
struct StepDev {
  int32_t n_tokens = 0;
  int32_t n_seqs = 0;
  int32_t max_blocks = 0;                 // row stride of block_tables
  const int32_t* positions = nullptr;     // [n_tokens]
  const int32_t* slots = nullptr;         // [n_tokens] cache slot = block_id * block_size + offset
  const int32_t* token_seq = nullptr;     // [n_tokens] index of the token's sequence; a
                                          // sequence's tokens are contiguous
  const int32_t* block_tables = nullptr;  // [n_seqs x max_blocks] block ids, -1 past the end
  int32_t max_context = 0;  // largest position + 1 in the step (sizes split-KV grids on the host)
  // Read by the linear-attention kernels only (kernels/ssm):
  const int32_t* seq_begin = nullptr;    // [n_seqs + 1] first token of each sequence, n_tokens last
  const int32_t* state_slots = nullptr;  // [n_seqs] recurrent-state slot of each sequence
};

// Writes k, v: [n_tokens rows (stride ld floats) x n_kv_heads x head_dim] into their slots,
// converting to the cache dtype (f16 / bf16 round-to-nearest-even; f8_e4m3 the same, saturated to
// +-448, no scale).
void kv_store(const PagedKv& kv, const StepDev& step, const float* k, const float* v, int64_t ld,
              cudaStream_t stream);

// The attention block's prologue in one launch, bit-identical to rms_norm(v rows of head_dim,
// v_norm), rms_norm(q rows, q_norm), rms_norm(k rows, k_norm), rope(q), rope(k), kv_store(k, v) in
// that order: q: [n_tokens x n_heads x head_dim], k and v: [n_tokens x n_kv_heads x head_dim]
// normed (where q_norm / k_norm / v_norm, [head_dim], are not null) and q, k rotated, in place; k
// and v (packed rows) written to the step's slots. head_dim <= 1024.
// angle_table: the step's angles for inv_freq (qk_angle_table), or null to compute them in the
// launch; the same values either way.
void qk_prologue(const PagedKv& kv, const StepDev& step, float* q, float* k, float* v, int n_heads,
                 const float* q_norm, const float* k_norm, const float* v_norm, float eps,
                 int n_rot, bool neox, const double* inv_freq, cudaStream_t stream,
                 const float* angle_table = nullptr);

// The rope angles of a step's tokens for one frequency table, as qk_prologue computes them for
// every launch (cos and sin of position * inv_freq[i] in double, rounded to float): per token, the
// n_rot / 2 cosines then the sines, rows qk_angle_table_floats(n_rot) floats apart. A step's
// layers that share inv_freq share one table, so its double-precision sincos and the dependent
// loads of the positions leave each prologue's critical path.
int64_t qk_angle_table_floats(int n_rot);
void qk_angle_table(const StepDev& step, int n_rot, const double* inv_freq, float* table,
                    cudaStream_t stream);

// How attention() schedules the fixed-size key splits of a query. Both plans compute every
// split's partial (max, sum of exp, weighted V) with the same code and merge the partials in
// increasing split order with the same log-sum-exp steps, so they give bit-identical outputs:
//   split:    one block per (query tile, kv head, split) writes partials to scratch, a second
//             kernel merges them (parallel over the context: decode with long contexts);
//   one_pass: one block per (query tile, kv head) walks its splits in order and merges as it
//             goes (no scratch: prefill and large batches, where tokens alone fill the GPU).
// automatic picks split when the step's partials fit attention_scratch_bytes' cap, the context
// spans more than one split and (multi_query blocks) the tiles alone do not fill the GPU. Tests
// force a plan to prove the two agree. Under the split plan, blocks of splits past a query's
// last key (a grid sized for a larger max_context, e.g. a CUDA graph's capacity) read nothing
// and write nothing for it.
enum class AttentionPlan { automatic, split, one_pass };

// How many query tokens a block serves. one_query: one token (decode); multi_query: a tile of
// consecutive tokens, each K/V chunk staged once for all of them (prefill; tokens of different
// sequences in one tile run one after another). Every query's arithmetic is the same in both, so
// the outputs are bit-identical; automatic picks multi_query when the step has at least 4 tokens
// per sequence, and then, with several sequences, runs the single tokens of the step (decode
// tokens) in one-query blocks of their own launch. Tests force a shape to prove they agree.
enum class AttentionTile { automatic, one_query, multi_query };

struct AttentionArgs {
  int n_heads = 0;       // query heads; n_heads % n_kv_heads == 0 (GQA)
  float scale = 1.0f;    // multiplies q.k
  float softcap = 0.0f;  // score = c * tanh(s / c) when > 0
  int32_t window = 0;    // keys j with p - window < j <= p; 0 = all j <= p
  AttentionPlan plan = AttentionPlan::automatic;
  AttentionTile tile = AttentionTile::automatic;
  // 16-bit caches at head_dim 64, 128 and 256: the tensor-core kernel (mma.sync, q and p each
  // split into 16-bit terms, two for f16 and three for bf16, so f32 accuracy) or, false, the
  // CUDA-core kernel (the only one for other caches, f32 and f8_e4m3, and sizes). They differ in
  // bits: a model keeps one setting for every step.
  bool tensor_cores = true;
};

// Keys per split (aligned to absolute positions: split i holds keys [i * S, (i + 1) * S)).
constexpr int32_t kAttentionSplit = 256;

// Device scratch bytes attention() needs for a step under the automatic plan: the split
// partials [n_tokens x n_heads x n_splits x (head_dim + 2)] f32 (n_splits from max_context)
// when they fit the cap below, else the same with n_seqs rows in place of n_tokens (the single
// decode tokens of a step that mixes them with prefill chunks), else 0 (the step runs one_pass).
// Never more than attention_scratch_bytes_max(head_dim), which a backend can allocate once for
// every step. The scratch starts with the decode kernels' arrival counters (a token's last block
// merges its partials, no combine launch): they must be zero before its first use, which
// attention_scratch_clear() makes them, and every attention() call leaves them zero. So clear a
// scratch once after allocating it, and use it for nothing else.
size_t attention_scratch_bytes(const StepDev& step, int n_heads, int head_dim);
void attention_scratch_clear(void* scratch, cudaStream_t stream);
// Whether attention() has a kernel for this head size and KV cache dtype: 16, 32, 64, 128, 256
// with an f32, f16, bf16 or f8_e4m3 cache; 512 with f16, bf16 or f8_e4m3 (an f32 cache's 512-dim
// chunks do not fit a pipelined ring in shared memory).
bool attention_supports_head_dim(int head_dim, DType cache);
size_t attention_scratch_bytes_max(int head_dim);

// Causal attention of each query token t (q: [n_tokens rows, stride ldq] x n_heads x head_dim)
// over its sequence's cached keys 0..positions[t] (which kv_store has written this step), read
// through the block table. out: [n_tokens x n_heads x head_dim] dense. Keys are processed in
// splits of a fixed number of tokens, combined with log-sum-exp in split order: the same for a
// decode token, a prefill chunk of any length and any batch. head_dim in {16, 32, 64, 128, 256},
// or 512 with an f16 / bf16 / f8_e4m3 cache (else Error(unsupported)). scratch:
// attention_scratch_bytes(step, ...) bytes (may be null when 0); a forced split plan needs the
// split partials' bytes and fails when they exceed the cap.
// kv.k / kv.v must be 16-byte aligned (cudaMalloc'd); q rows are read as floats.
// prologue (optional): qk_prologue's arguments for this step's q, k and v (without a v norm; its
// q is attention's q, its n_heads args.n_heads, its rows packed), run first: the q, k and v rows,
// the norms, the rope and the KV write as qk_prologue leaves them, then the attention. Where the
// decode kernel's one-split tensor form serves the step (one token, head_dim 128 and n_rot 128, a
// 16-bit cache, the step's angle table, 16-byte aligned rows and weights: decode_prologue.cuh)
// it runs the prologue inside that launch instead, and q and k are left as the caller wrote them
// (a caller that reads only out and the cache afterwards sees the same bits either way).
struct AttentionPrologue {
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  const float* q_norm = nullptr;  // or null: no norm
  const float* k_norm = nullptr;
  float eps = 0.0f;
  int n_rot = 0;
  bool neox = true;
  const double* inv_freq = nullptr;
  const float* angle_table = nullptr;  // qk_angle_table's, or null (never fused then)
};
void attention(const PagedKv& kv, const StepDev& step, const float* q, int64_t ldq,
               const AttentionArgs& args, float* out, void* scratch, cudaStream_t stream,
               const AttentionPrologue* prologue = nullptr);

// Decode attention's phases, a measuring instrument (memra-kernel-bench --attention --phases):
// with MEMRA_DECODE_STAMPS=1, the decode kernel's one-split form at head_dim 128 (a one-token
// step over a short context) records in each block the SM clock at the end of each phase, as
// cycles since its wait for inputs returned: the block's run read (its token's position), its
// copies' barriers set (the tensor and bulk forms: thread 0's, behind a block barrier), its
// copies issued (the tensor form: K's, or K's and V's with MEMRA_DECODE_V_AFTER=copies; none with
// MEMRA_DECODE_K_AFTER_Q=1), q staged, the copies that wait for q issued (V's with
// MEMRA_DECODE_V_AFTER=q, K's and V's with MEMRA_DECODE_K_AFTER_Q=1; else none), K landed, the
// scores, the softmax with V landed, the values and the partial; then the cluster form's merge in
// three (the peers' partials published, the block's share merged and written, its end: the block's
// largest |output| and the cluster's last barrier), or the arrival with the last block's merge as
// the first of the three (the other two none). A phase a form does not have ends where the one
// before it does. The same arithmetic either way. decode_phase_stamps copies out the last such
// launch's first blocks (out[b * kDecodePhases + i], at most max_blocks; -1 for a block without
// keys) and returns how many, then forgets them (0 until the next stamped launch).
enum DecodePhase : int {
  kPhaseRunRead,
  kPhaseBarriersSet,
  kPhaseCopiesIssued,
  kPhaseQStaged,
  kPhaseAfterQ,
  kPhaseKLanded,
  kPhaseScores,
  kPhaseSoftmax,
  kPhaseValues,
  kPhasePeers,
  kPhaseMerged,
  kPhaseEnd,
  kDecodePhases
};
constexpr int kDecodeStampBlocks = 1024;
int decode_phase_stamps(long long* out, int max_blocks, cudaStream_t stream);

// ---- linear attention: gated delta-net layers (kernels/ssm) ----------------------------------

// A linear-attention layer's recurrent state is f32 device memory per state slot (step.state_slots
// names each sequence's slot; the backend checks them on the host): the conv's last kernel - 1
// inputs [n_slots][kernel - 1][dim] (oldest first) and the delta-rule matrices [n_slots]
// [n_v_heads][k_dim][v_dim]. A sequence whose first token in the step is at position 0 starts
// from zeros (its slot's old contents are ignored). These kernels read step.n_tokens, n_seqs,
// positions, token_seq, seq_begin and state_slots. Every value's arithmetic depends only on its
// own sequence's tokens and state, in a fixed order, so a sequence's results are bit-identical
// alone or batched, in any prefill chunking.

// Causal depthwise conv then SiLU: y[t][c] = silu(w[c][k-1] * in[t][c] + sum_{j<k-1} w[c][j] *
// in[t - (k - 1) + j][c]) (the taps added in that order), where in[] is x within the sequence's
// tokens of this step and the slot's conv state before them; the state then holds the sequence's
// last k - 1 inputs. x, y: [n_tokens x dim], not aliased; w: [dim x kernel] f32.
void ssm_conv(const StepDev& step, float* conv_state, const float* x, int64_t dim, int kernel,
              const float* w, float* y, cudaStream_t stream);

struct DeltaRuleShape {
  int n_k_heads = 0;
  int n_v_heads = 0;  // a multiple of n_k_heads; v head h reads k head h % n_k_heads
  int k_dim = 0;
  int v_dim = 0;
};
// The key head sizes gated_delta_rule() has kernels for: 1 to 256 (a state column's rows are
// spread over one warp's lanes, at most 8 each).
bool gated_delta_rule_supports(int k_dim);

// The gated delta rule, the recurrent form, each sequence's tokens in order from and into its
// slot's state. qkv: [n_tokens x (2 n_k k_dim + n_v v_dim)] (q heads, k heads, v heads); a, b:
// [n_tokens x n_v] raw projections; A: [n_v] (= -exp(A_log)); dt_bias: [n_v]. Per token and v
// head: q, k l2-normalized (eps 1e-6, q then scaled by k_dim^-0.5), decay = exp(A softplus(a +
// dt_bias)) and beta = sigmoid(b) (scalars in double, rounded to f32); S = decay S; S += k (beta
// (v - S^T k))^T; out = S^T q, in f32. out: [n_tokens x n_v v_dim]. Each state column (one v
// head's value dim) is one warp's, its k_dim rows spread over the lanes: column sums add each
// lane's rows in order then a fixed xor tree, so their order depends on k_dim alone.
//
// Which kernel runs: every choice gives the same bits (kernel-check compares them). token: every
// warp computes each token's norms, decay and beta itself (8 columns per warp); chunkN: N columns
// per warp, a token's scalars batched over the lanes 32 tokens at a time. auto_: the
// MEMRA_DELTA_RULE environment variable (token, chunk1, chunk2, chunk4, chunk8: an A/B switch)
// when set, else token for decode steps and chunk4 for prefill.
enum class DeltaRuleKernel { auto_, token, chunk1, chunk2, chunk4, chunk8 };
void gated_delta_rule(const StepDev& step, float* ssm_state, const float* qkv, const float* a,
                      const float* b, const float* A, const float* dt_bias,
                      const DeltaRuleShape& shape, float* out, cudaStream_t stream,
                      DeltaRuleKernel kernel = DeltaRuleKernel::auto_);

// y = x * rsqrt(mean(x^2) + eps) * w * silu(z) over each row of dim (w: [dim]); y may alias x.
// One warp per row; the sum's order depends on dim only.
void rms_norm_gated(const float* x, const float* w, const float* z, int64_t n_rows, int64_t dim,
                    float eps, float* y, cudaStream_t stream);
// y[i] = y[i] / (1 + exp(-gate[i])) (y times sigmoid(gate)) over n values.
void sigmoid_mul(float* y, const float* gate, int64_t n, cudaStream_t stream);

}  // namespace memra::kernels
