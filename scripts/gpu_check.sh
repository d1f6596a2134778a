#!/usr/bin/env bash
# The GPU recipe, on any machine with an NVIDIA GPU: the CUDA runtime check and copy bandwidth,
# kernel-check (+ teeth), the GPU model gate (CUDA vs CPU on the fixtures and on synthetic
# real-shape models), the determinism contract on the GPU, the matmul micro-benchmark and
# memra bench on memra synth files. Receipts go to receipts/ (or $MEMRA_RECEIPTS), step logs to
# build/gpu-logs (or $OUT, where a lent GPU machine's results come back: there everything is
# bundled into gpu_check.log and receipts.tar, as few files may return). A short table is last.
#
#   scripts/gpu_check.sh [quick|bench8b|families|full]
#     quick     checks, gates, invariants, Qwen3-0.6B-shape benchmarks, kernel bench (~7 min on
#               an H200)
#     bench8b   memra bench on Qwen3-8B-shape files (Q4_K_M, Q8_0, BF16, each A/B) and the
#               server's start, TTFT and ITL (~5 min)
#     families  memra bench on issue 11's family files: the Qwen3 MoE, the Qwen3.5/3.6 hybrids
#               (dense and MoE) and Gemma 4 (MoE and dense), at 1, 8 and 64 sequences (~6 min)
#     server    the server's Python tests against the GPU engine (scripts/gpu_server_tests.sh)
#     full      all four (~20 min: where one command may run 10 minutes at most, run them apart)
#     kv        the KV cache types: kernel-check's attention, kv_store and prologue cases (+ teeth),
#               the F8_E4M3 gate against the CPU and its cost against F16, 8B Q4_K_M decode
#               at 16,384 tokens of context with each (~5 min; not part of full: every step is
#               in quick or bench8b too)
#     profile   where a step's GPU time goes (scripts/gpu_profile.py under ncu): 8B Q4_K_M decode at
#               1 and 64 sequences, Qwen3.5-9B prefill of 512 tokens, one-token decode of the two
#               MoE shapes, and the stall reasons of the one-token and cluster decode kernels (~7
#               min; not part of full)
#     ab        the fine graph buckets (MEMRA_GRAPH_SMALL_BUCKETS=fine, the default since the
#               forty-ninth round: every size to 16, every fourth to 32, every eighth to 64)
#               against =1 (1-8 and 12): the determinism contract with
#               fine, 8B and 0.6B Q4_K_M decode of 6 to 56 sequences each way, twice, alternated
#               (~3 min; not part of full)
#     split     the split forms of the pipelined Q4_K kernel and of the scaled Q6_K / Q8_0 kernel
#               at 17-64 tokens (the defaults since the forty-ninth round; MEMRA_FOLD64_SPLIT=0,
#               MEMRA_SCALED_DECODE=0 turn them off): kernel-check's matrix cases at the defaults
#               and with both off, the determinism contract, the model gate on the fixtures and
#               0.6B synth files, 8B Q4_K_M at 1, 8 and 64 sequences and Q8_0 at 64, the products
#               at 64 tokens, then the split rule's A/B (MEMRA_SPLIT_RULE=waves, the default,
#               against narrow), 8B Q4_K_M at 40 and 64 sequences, twice, alternated (~5 min; not
#               part of full)
#     xrows     x's rows form at decode steps of 33-64 tokens (the default since the fiftieth
#               round; MEMRA_X_ROWS_DECODE=0 turns it off: the products prepare x themselves)
#               against =0: kernel-check's matrix cases with it (+ teeth), the determinism
#               contract and graph replay with it, 8B Q4_K_M decode of 40 and 64 sequences, 8B Q8_0
#               and the 0.6B of 64, each way, twice, alternated; then the c64 step profile with it
#               (~4 min; not part of full)
#     halves    written without a device (fiftieth round): the split forms' token halves, and
#               (fifty-first) MEMRA_SPLIT_SMALL, the split forms at 17-32 tokens
#               (MEMRA_SPLIT_HALVES=1: 32-token blocks on m64n32 wgmmas where the split grid fills
#               at most half the SMs, and at 17-32 tokens) against the default: kernel-check's
#               matrix cases with it (+ teeth), the determinism contract and graph replay with it,
#               memra-kernel-bench at 20-64 tokens each way, 8B Q4_K_M decode of 40 and 64
#               sequences, 8B Q8_0 and the 0.6B of 24 and 64, each way, twice, alternated; 8B
#               Q4_K_M of 16, 20 and 32 with neither, the halves, and both (~5 min; not part of
#               full)
#     copies    written without a device (fifty-first round): the pipelined Q4_K kernel's chunk
#               copies shared by every warp (copy_chunk_part) and its mins' staging moved past
#               the first wgmma group; no switch (the same bits: the same copies and sums), so
#               its A/B is against the halves run's figures on the same GPU model: kernel-check's
#               matrix cases (+ teeth), the determinism contract and graph replay, the split
#               form's stalls at 64 tokens (Q4_K down), memra-kernel-bench at 32 and 64 tokens, 8B
#               Q4_K_M decode of 20 to 64 sequences, 8B Q8_0 of 64 (a control: its kernel did not
#               change) and 0.6B Q4_K_M of 24 and 64, all on two teams; then the halves' blocks on
#               three teams (MEMRA_SPLIT_TEAMS=3, the default since): kernel-check's matrix cases
#               (+ teeth), the products and the same Q4_K_M figures with them (~4 min; not part
#               of full)
#     small     the scaled kernel's split form at 17-32 tokens (MEMRA_SPLIT_SMALL=q8_0, Q8_0's of K
#               4,096 or more, the default since the fifty-third round) against =0 and =scaled: 8B Q8_0 and Q4_K_M and 0.6B
#               Q8_0 decode of 20 and 32 sequences, twice, alternated (~4 min; not part of full)
#     sidesmall the per-output launches of 17-32-token decode steps after a call's first on the
#               second stream (MEMRA_DECODE_SIDE_SMALL=1, the default since the fifty-fourth round)
#               against =0: kernel-check's matrix cases with it (+ teeth), the determinism contract
#               and graph replay with it, 8B Q4_K_M and Q8_0 and 0.6B Q4_K_M decode of 20, 24 and
#               32 sequences each way, twice, alternated (~4 min; not part of full)
#     groups    decode attention's run form with the number of split groups that finishes the grid
#               soonest, the longer runs first (MEMRA_DECODE_SPLITS=fill, the default since the
#               fifty-fourth round) against auto: kernel-check's attention cases with it in the
#               two-blocks form (+ teeth), the determinism contract and graph replay with it, 8B
#               Q4_K_M and 0.6B Q4_K_M decode of 16 to 64 sequences each way, twice,
#               alternated (~3.5 min; not part of full)
#     steams    the scaled kernel's split form's token halves (32-token blocks: the 8B Q4_K_M's
#               Q6_K v and down at 64 tokens, a Q8_0 model's o and down there and its split
#               launches of 17-32 tokens) on three teams (MEMRA_SCALED_TEAMS=3; the default at
#               33-64 tokens since the fifty-fifth round, =auto) against two: kernel-check's matrix cases with it (+ teeth), the determinism contract and
#               graph replay with it, memra-kernel-bench's Q6_K and Q8_0 products at 32 and 64
#               tokens each way, 8B Q4_K_M decode of 40 and 64 sequences, 8B Q8_0 of 20, 32 and
#               64 and 0.6B Q4_K_M of 64, each way, twice, alternated (~5 min; not part of full)
#     actregs   the gated activation writing x's rows form from registers (MEMRA_ACT_ROWS_REGS=1,
#               the default since the fifty-fifth round in decode steps of rows over 4,096 wide)
#               against =0: kernel-check's matrix cases with it (+ teeth: the rows-form activation
#               cases at 1,024 to 12,288 wide), the determinism contract and graph replay with it,
#               memra-kernel-bench's elementwise kernels each way, 8B and 0.6B Q4_K_M decode of
#               40 and 64 sequences (and their pp512) each way, twice, alternated (~4 min; not
#               part of full)
#     ring      decode attention's ring form (fifty-sixth round: a split's four chunk loads
#               through three slots, blocks of at most four query heads; MEMRA_DECODE_RING=auto,
#               the default, takes it for one-token steps whose grid is runs of splits in one
#               wave, =1 everywhere it fits, =0 nowhere): kernel-check's attention cases with =1 on the default forms, then with
#               every one-query launch in the two-blocks form (+ teeth), the determinism contract
#               and graph replay so (MEMRA_RING_BITS=0 skips these); memra-kernel-bench's attention
#               cases with =1 and =0; then auto against =0: 8B Q4_K_M decode of 8, 40 and 64
#               sequences, the 0.6B's of 8, 40 and 64, the 8B's of one at 4,096 and 16,384 tokens
#               of context, twice, alternated (~6 min; not part of full)
#     merge     decode attention's partials merged by the last of a token's blocks (fifty-seventh
#               round: no combine launch; MEMRA_DECODE_MERGE=auto, the default, steps of at
#               most 8 tokens and 8 splits in one wave, =1 wherever the counters fit, =0
#               never): kernel-check's attention cases with =1 on the default forms, then with
#               every one-query launch in the two-blocks form (+ teeth), the determinism
#               contract and graph replay so; memra-kernel-bench's attention cases with auto
#               and =0; then auto against =0: 8B Q4_K_M decode of 1, 8 and 64 sequences, the
#               0.6B's of 1, 8 and 64, twice, alternated (~2 min; not part of full)
#     side      a Q4_K_M layer's Q6_K v beside its q and k on a second stream in 33-64-token decode
#               steps, recorded graphs included (MEMRA_DECODE_SIDE_STREAM=1, the default since the
#               fifty-second round) against =0:
#               kernel-check's matrix cases with it (+ teeth), the determinism contract and graph
#               replay with it, 8B and 0.6B Q4_K_M decode of 40 and 64 sequences each way, twice,
#               alternated (~3 min; not part of full)
#     pipe      decode attention a chunk at a time in its forms with V in K's rows
#               (MEMRA_DECODE_PIPE=1, the default since the fifty-second round) against =0: kernel-check's attention cases with it (+ teeth),
#               the determinism contract and graph replay with it, 8B Q4_K_M decode of 1, 8 and 64
#               sequences and of one at 16,384 tokens of context each way, twice, alternated (~4
#               min; not part of full)
#     scan      aggregate decode of 8B and 0.6B Q4_K_M at every batch size class from 1 to 64
#               sequences (1-8, 12, 16, 20, 24, 28, 32, 40, 48, 56, 64): where throughput falls
#               as sequences are added, a kernel choice with a hole (the twenty-seventh round
#               found 9-16 tokens on six empty token tiles that way) (~3 min; not part of full)
#     holes     the scan's reversals (8B Q4_K_M at 16, 20, 24, 32 and 40 sequences) under the
#               existing 17-64-token kernel switches (cluster kernel off, four token tiles,
#               wgmma on every output), twice, alternated (~3 min; not part of full)
#     steps     where whole steps' GPU time goes (scripts/gpu_profile.py), 8B Q4_K_M decode at 1
#               and 8 sequences (the per-kernel table a persistent decode kernel starts from; or
#               MEMRA_STEPS_COUNTS, e.g. "64"; another weight type: MEMRA_STEPS_TYPE, e.g.
#               bf16) and a 512-token prompt step (MEMRA_STEPS_PROMPT=0 leaves it out;
#               MEMRA_PROFILE_ENV: switches for all of them) (~6 min; not part of full)
#     stalls    Nsight Compute's limits, stall reasons and most-stalled SASS lines of the kernels
#               of the open decode targets: the tiled decode kernel at 8 tokens (Q4_K gate and
#               down), the one-token kernel on the same gate, decode attention at one sequence of
#               512 keys, then memra-kernel-bench at 1 and 8 tokens (~4 min; not part of full)
#     stalls64  the same for the 64-token products that hold ~63% of c64's step (forty-ninth
#               round): the pipelined Q4_K kernel's 128-row form (gate) and split form (down),
#               the scaled kernel's split form (Q6_K down), then memra-kernel-bench at 64 tokens
#               (~3 min; not part of full)
#     stallsattn the same for decode attention at 64 sequences (~29% of c64's step, fifty-fifth
#               round): the run form at 64 x 640 keys (F16 cache), for its latency one
#               sequence of 512 keys, c8's eight of 640, then memra-kernel-bench's attention cases
#               (~2 min; not part of full)
#     l2        what DRAM's round trips cost the one-token products: memra-kernel-bench's 8B
#               and 0.6B shapes over enough weight copies to miss L2 and over one (--copies 1,
#               L2-resident) (~15 s; not part of full)
#     phases    where decode attention's time at one sequence goes, phase by phase
#               (MEMRA_DECODE_STAMPS: each block's clock at each phase's end): kernel-check's
#               attention cases with the stamped kernel (the same bits), then memra-kernel-bench's
#               one-sequence cases (~40 s; not part of full)
#     chains    decode attention's one-split form at one sequence with its rows by bulk copies
#               (MEMRA_DECODE_BULK) and its scores and values with short chains
#               (MEMRA_DECODE_CHAINS), each way on and off (both on: the default): kernel-check
#               of the three others, their phases, then 0.6B, 8B Q4_K_M and BF16 at one
#               sequence, twice (~2 min)
#     clustermerge  decode attention's one-split form merging a token's partials through its
#               cluster's shared memory (MEMRA_DECODE_CLUSTER_MERGE, the default since the
#               sixty-second round) against the arrival counters: kernel-check of the counters
#               (default merges, then every launch merging) and of the cluster with every launch
#               merging, the phases each way, the determinism contract with the counters, then
#               0.6B, 8B Q4_K_M and BF16 at one sequence, twice (~70 s)
#     transposed  decode attention's one-split form with its scores' and values' mma operands
#               transposed (MEMRA_DECODE_TRANSPOSED, half the products: the default since the
#               sixty-second round) against the query rows as A's: tools/probes/mma_transpose.cu
#               (the same bits either way round, and what a chain of mma costs), kernel-check of
#               the straight form, the phases each way, the determinism contract with it, then
#               0.6B, 8B Q4_K_M and BF16 at one sequence, twice (~80 s)
#     tensorcopy  decode attention's transposed form with its rows landed by tensor copies, a cache
#               block's half rows a copy (MEMRA_DECODE_TENSOR, the default since the
#               sixty-fifth round) against the bulk copies: kernel-check (also with every launch merging and
#               with the counters), the phases each way, the determinism contract, then 0.6B, 8B
#               Q4_K_M and BF16 at one sequence, twice (~80 s)
#     tchunks   decode attention's forms that take a split a chunk at a time (the pipe form: many
#               sequences, long contexts; the ring form) with their products transposed
#               (MEMRA_DECODE_TRANSPOSED_CHUNKS, the default since the sixty-fifth round) against the
#               query rows as A's: kernel-check on the default forms, with every launch in the
#               two-blocks form (+ teeth, the determinism contract) and in the ring form, the
#               kernel at 8 and 64 sequences and 16,384 keys each way, then 8B Q4_K_M c8 and c64,
#               the 0.6B's c64 and the 8B at 16,384 tokens of context, twice (~6 min)
#     rawx      the one-token down product (K-quants on the one-token kernel, F16/BF16 on the
#               tiled one) reading x raw from the gated activation's partial maxima
#               (MEMRA_RAW_X, the default since the sixty-fifth round: no x_to_f16 launch between
#               them) against x_to_f16's launch: kernel-check's matmul family with it on
#               (its raw-x cases run either way), with teeth, the determinism contract and graph
#               replay, then 0.6B Q4_K_M and 8B Q4_K_M, Q8_0 and BF16 at one sequence, twice
#               (~5 min)
#     rawxattn  the one-token o product reading x raw from decode attention's partial maxima
#               (MEMRA_RAW_X_ATTENTION, the default since the sixty-sixth round: the cluster
#               form's blocks each write their share's largest |out|, no x_to_f16 launch between
#               them; with x's group sums in a tree order, 0.6B Q4_K_M c1 +1.1%, BF16 +1.9%, 8B
#               +0.2-0.3%)
#               against x_to_f16's launch: kernel-check's matmul family with it on (its
#               `matmul attention raw x` cases run either way), with teeth, the determinism
#               contract and graph replay, then 0.6B Q4_K_M and BF16 and 8B Q4_K_M, Q8_0 and BF16
#               at one sequence, twice (~3.5 min on an H100)
#     earlymeta decode attention's one-split tensor form reading its run (the token's position
#               and sequence) and its copies' block-table entries before its wait
#               (MEMRA_DECODE_EARLY_META=1, the default since the sixty-seventh round: step
#               metadata only, which the host uploads before a step's first kernel) against after
#               it: kernel-check (also with every launch merging, and with teeth), the phases each
#               way, the determinism contract, then 0.6B, 8B Q4_K_M and BF16 at one sequence,
#               twice (~2.5 min)
#     spreadq   the tensor form's copies from the first threads against from all eight warps
#               (MEMRA_DECODE_TENSOR_SPREAD=1) and against that with each thread's first pair of
#               q loaded before the copies' issue (MEMRA_DECODE_Q_FIRST=1 too; the two together
#               the default since the sixty-eighth round: 0.6B Q4_K_M c1 +2.0%, 8B +0.4%):
#               kernel-check with each alone, with both (every launch merging, and with teeth),
#               the phases each way, the determinism contract, then 0.6B, 8B Q4_K_M and BF16 at
#               one sequence, twice (~3.5 min)
#     vafter    when the tensor form issues V's copies: with K's (copies, the default), once q
#               is staged (MEMRA_DECODE_V_AFTER=q) or once K's rows have landed (=keys), so that
#               K's rows take the SM's intake alone: kernel-check with each (every launch merging,
#               and with teeth), the phases each way, the determinism contract, then 0.6B, 8B
#               Q4_K_M and BF16 at one sequence, twice (~3.5 min)
#     asyncmerge the tensor form's cluster merge by asynchronous stores into each share's block
#               (MEMRA_DECODE_CLUSTER_MERGE=async: no release fence, no second cluster barrier)
#               against the pull merge (=1, the default): kernel-check with it (every launch
#               merging, and with teeth), the phases each way, the determinism contract, then
#               0.6B, 8B Q4_K_M and BF16 at one sequence, twice (~2.5 min)
#     vasync    vafter's and asyncmerge's switches in one shorter run (for a call with little
#               device time left): kernel-check with each, the phases of V's copies at each place
#               and of the async merge, the determinism contract with both, then 0.6B and 8B
#               Q4_K_M at one sequence four ways (neither, V after K, async, both), twice (~3 min)
#     qasync    the async merge with V's copies issued after q (MEMRA_DECODE_V_AFTER=q; both the
#               default since the seventy-first round), the pairing vasync left out: the cluster
#               hand-off probe (tools/probes), kernel-check with it (with teeth), its phases, the
#               determinism contract, then 0.6B and 8B Q4_K_M at one sequence four ways (the pull
#               merge with V beside K, async, q with async, keys with async), twice (~2.5 min)
#     qasyncload q with the async merge against the pull merge with V beside K under load: 8B
#               Q4_K_M and the 0.6B at 8 sequences, the 8B at 64, twice (~1.5 min)
#     kafterq   decode attention's tensor form issuing K's copies once q is staged
#               (MEMRA_DECODE_K_AFTER_Q=1, opt-in) against right after the kernel's wait:
#               kernel-check with it (the default merge, every launch merging, with teeth), the
#               phases each way, the determinism contract, then 0.6B, 8B Q4_K_M and BF16 at one
#               sequence, twice (~3 min)
#     earlybars decode attention's tensor form setting its copies' barriers (and the async
#               merge's inbox) before the kernel's wait, under the kernel before
#               (MEMRA_DECODE_EARLY_BARRIERS=1, opt-in) against after it: kernel-check with it
#               (every launch merging, with teeth), the phases each way, the determinism
#               contract, then 0.6B, 8B Q4_K_M and BF16 at one sequence, twice (~3 min)
#     prologue  the attention prologue (q and k's norms and RoPE, the KV write) in decode
#               attention's blocks at one token (MEMRA_DECODE_PROLOGUE=1, opt-in) against its own
#               launch before: kernel-check's attention_prologue cases (with teeth), the kernels
#               alone at 512 keys each way (memra-kernel-bench, plain and stamped), the same bits
#               through the engine each way (scripts/same_bits.py: every prompt step one token,
#               then greedy steps), the GPU model gate with it (its CPU reference run too), the
#               determinism contract, then 0.6B, 8B Q4_K_M and BF16 at one sequence, twice
#               (~4-5 min)
#     pushes    the cluster push probe (tools/probes/cluster_push.cu): the async merge's pushes
#               by scalar st.async (today), staged and pushed 16 bytes a store, staged and pushed
#               by one bulk copy a block, against the pull merge's publish (~30 s)
#     rawxearly a one-token product reading x raw loads a warp's first chunk of x right after its
#               wait, before the partial maxima (MEMRA_RAW_X_EARLY=1, the default since the
#               sixty-seventh round: one L2 round trip off the first chunk's chain; the one-token
#               kernel's K-quants and the tiled kernel's F16/BF16 launch) against after them:
#               kernel-check's matmul family with it on, with teeth, the determinism contract and
#               graph replay, then 0.6B Q4_K_M and BF16 and 8B Q4_K_M, Q8_0 and BF16 at one
#               sequence, twice (~3.5 min)
#     rawxstage a one-token product reading x raw hands column 0's lanes their fragments by a
#               transpose through shared memory (MEMRA_RAW_X_STAGE=1, the default since the
#               seventieth round: ~20 shared-memory wavefronts a chunk, no selects) against 32
#               shuffles (=0; the Q4_K one-token kernel and the tiled kernel's F16/BF16 launch;
#               Q8_0's products take no such fragments, a control): kernel-check's matmul family
#               with it on, with teeth, the determinism contract and graph replay, then 0.6B
#               Q4_K_M and BF16 and 8B Q4_K_M, Q8_0 and BF16 at one sequence, twice (~2.5 min)
#     drop      what each class of a one-token step's small kernels costs in place, under
#               programmatic launch's overlap (which a serialized profile cannot say): 8B Q4_K_M
#               at 1 and 8 sequences, BF16 and the 0.6B at 1, with the launches of that class
#               skipped (MEMRA_DIAG_DROP; every output is then wrong: a measuring instrument),
#               default first, twice, alternated (~7 min; not part of full)
#     gemma4    Gemma 4's norm chains fused against the plain kernels (MEMRA_FUSED_NORMS=0): the
#               norm kernels' kernel-check, 26B-A4B and 31B at 1 and 8 sequences (~4 min)
#     moe       mixture-of-experts decode: kernel-check's routing and expert cases (+ teeth, and
#               with one row tile a pair block, MEMRA_MOE_GGML_PACK=0), the MoE
#               micro-benchmark (Qwen3-30B-A3B's and Gemma 4 26B-A4B's shapes) with Gemma 4's
#               file-layout experts a block per pair, sorted (MEMRA_MOE_GGML_PAIRS=0) and unpacked,
#               the MoE model gates and determinism contract, and memra bench of both shapes at 1
#               and 8 sequences with the same A/B (~7 min; not part of full)
#     bins      the same benchmarks with two builds, alternated twice: $MEMRA_GPU_BIN_BASE (the
#               baseline's binaries: scripts/device_pack_base.sh keeps a pack's) and
#               $MEMRA_GPU_BIN, for a change no switch can turn off (a build option, or an
#               arithmetic every kernel shares): now the weights' L1 use (the default against
#               -DMEMRA_WEIGHTS_L1=plain): memra-kernel-bench at 1 and 8 tokens (Q4_K, Q6_K,
#               Q8_0, BF16), 8B Q4_K_M pp512 and decode of 1, 8, 16, 32 and 64 sequences, Q8_0
#               of 8, BF16 pp512 and decode of 1, the 0.6B's of 1 (~5 min; not part of full)
#     prefill   the three prefill targets alone, at the defaults: 8B BF16 at 512 and 2,048 tokens
#               and Q4_K_M at 512, two rounds of memra bench's three runs each, and the
#               comparison with the targets (~1 min; not part of full: bench8b runs them too)
#     smoke     kernel-check of the matrix kernels, the determinism contract, graph replay and
#               the MoE device path on the fixtures, the matmul micro-benchmark at 512 tokens and
#               one 8B Q4_K_M benchmark, the matmul micro-benchmark at one token (~4 min: a
#               changed kernel's or default's first check)
#
# Binaries: $MEMRA_GPU_BIN (what scripts/device_pack.sh packed, e.g. .device/bin), else the
# `device` preset is built here first (needs scripts/setup.sh's packages and nvcc).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-quick}
case "$MODE" in
  quick | bench8b | families | server | full | smoke | prefill | profile | steps | kv | ab | split | xrows | halves | copies | small | sidesmall | groups | steams | actregs | ring | merge | side | pipe | bins | scan | holes | stalls | stalls64 | stallsattn | l2 | drop | phases | chains | clustermerge | transposed | tensorcopy | tchunks | rawx | rawxattn | rawxearly | rawxstage | earlymeta | spreadq | vafter | asyncmerge | vasync | qasync | qasyncload | kafterq | earlybars | prologue | pushes | gemma4 | moe) ;;
  *) echo "usage: $0 [quick|bench8b|families|server|full|smoke|prefill|profile|steps|kv|ab|split|xrows|halves|copies|small|sidesmall|groups|steams|actregs|ring|merge|side|pipe|bins|scan|holes|stalls|stalls64|stallsattn|l2|drop|phases|chains|clustermerge|transposed|tensorcopy|tchunks|rawx|rawxattn|rawxearly|rawxstage|earlymeta|spreadq|vafter|asyncmerge|vasync|qasync|qasyncload|kafterq|earlybars|prologue|pushes|gemma4|moe]" >&2; exit 2 ;;
esac
runs() { [ "$MODE" = full ] || [[ " $* " == *" $MODE "* ]]; }  # runs MODE...: this mode's part?
ROOT=$PWD
LOGS=$ROOT/build/gpu-logs
RECEIPTS=${MEMRA_RECEIPTS:-$ROOT/receipts}
DAY=$(date -u +%Y-%m-%d)
mkdir -p "$LOGS" "$RECEIPTS"
export MEMRA_SOURCE_DIR=$ROOT
# The binaries' commit: the pack's COMMIT beside them (MEMRA_GPU_BIN, else .device/bin).
export MEMRA_COMMIT=${MEMRA_COMMIT:-$(cat "${MEMRA_GPU_BIN:-.device/bin}/../COMMIT" 2>/dev/null ||
  git rev-parse HEAD 2>/dev/null || echo unknown)}

if [ -n "${MEMRA_GPU_BIN:-}" ]; then
  BIN=$(cd "$MEMRA_GPU_BIN" && pwd)
else
  if runs server; then scripts/device_pack.sh --server || exit 1; else scripts/device_pack.sh || exit 1; fi
  BIN=$ROOT/.device/bin
fi
# The pack's libraries: beside the binaries, or .device/lib's for a second pack unpacked next to
# the first (.device-branch: scripts/device_pack_base.sh's comment).
for lib in "$BIN/../lib" .device/lib; do
  if [ -d "$lib" ]; then
    export LD_LIBRARY_PATH=$(cd "$lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    break
  fi
done
# cuBLASLt (the bf16 GEMM ceiling) from the CUDA toolkit, or the copy a PyTorch install carries.
if ! ldd "$BIN/memra" 2>/dev/null | grep -q 'libcublasLt.so.* => /'; then
  lt=$(find /usr/local/cuda* /usr/lib /opt -name 'libcublasLt.so.1[0-9]*' 2>/dev/null | head -n 1)
  [ -n "$lt" ] && export LD_LIBRARY_PATH=$(dirname "$lt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
ldd "$BIN/memra" | grep -E 'not found' && echo "gpu_check: missing shared libraries" >&2

declare -a TABLE
bundle() {  # what comes back from a lent machine: one log, one archive of today's receipts
  [ -n "${OUT:-}" ] || return 0
  cat "$LOGS"/*.log >"$OUT/gpu_check.log" 2>/dev/null
  (cd "$RECEIPTS" && tar -cf "$OUT/receipts.tar" $(ls "$DAY"-*.json 2>/dev/null)) 2>/dev/null
  printf '%s\n' "${TABLE[@]}" >"$OUT/table.txt"
}
step() {  # step NAME SECONDS COMMAND...: runs it under a time limit, logs, records the verdict
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  echo "== $name: $*" >"$LOGS/$name.log"
  timeout "$limit" "$@" >>"$LOGS/$name.log" 2>&1 </dev/null
  local rc=$?
  TABLE+=("$(printf '%-34s %-8s %4ds' "$name" "$([ $rc -eq 0 ] && echo ok || echo FAIL:$rc)" $((SECONDS - t0)))")
  tail -n 12 "$LOGS/$name.log"
  bundle
  return $rc
}

# probe NAME: tools/probes/NAME.cu built for sm_90a and run (its step: probe-NAME, with - for _).
probe() {
  local dir
  dir=$(mktemp -d)
  step "probe-${1//_/-}" 120 env PATH="$PATH:/usr/local/cuda/bin" bash -c "nvcc -O2 -std=c++17 \
    -gencode=arch=compute_90a,code=sm_90a tools/probes/$1.cu -o $dir/$1 && $dir/$1"
}

# kcheck NAME SECONDS [VAR=VALUE...] [ARGS...]: memra-kernel-check ARGS under the switches given,
# its receipt $DAY-NAME.json.
kcheck() {
  local name=$1 limit=$2
  shift 2
  local vars=()
  while [[ "${1:-}" == *=* ]]; do
    vars+=("$1")
    shift
  done
  local cmd=("$BIN/memra-kernel-check" "$@" --commit "$MEMRA_COMMIT"
    --json "$RECEIPTS/$DAY-$name.json")
  [ ${#vars[@]} -gt 0 ] && cmd=(env "${vars[@]}" "${cmd[@]}")
  step "$name" "$limit" "${cmd[@]}"
}

# switch_bits FILTER NAME VAR=VALUE...: an opt-in switch's bits before its speed: kernel-check's
# FILTER cases (matmul, attention) under it, with and without teeth
# (kernel-check-FILTER-NAME[-teeth]), then the determinism contract and graph replay under it
# (engine-invariants-NAME).
switch_bits() {
  local filter=$1 name=$2
  shift 2
  kcheck "kernel-check-$filter-$name" 300 "$@" --filter "$filter"
  kcheck "kernel-check-$filter-$name-teeth" 300 "$@" --filter "$filter" --teeth
  if [ -x "$BIN/memra_engine_fixture_test" ]; then
    invariants "engine-invariants-$name" "$(IFS=,; echo "$*")"
  fi
}

MODELS_DIR=${MEMRA_GPU_MODELS:-/tmp/memra-synth}
mkdir -p "$MODELS_DIR"
synth() {  # synth SHAPE TYPE [extra...]: prints the path of a memra synth file, made once
  local tag=""  # a file of the first L layers (--layers L) is named apart
  [[ " ${*:3} " =~ " --layers "([0-9]+) ]] && tag="-${BASH_REMATCH[1]}layers"
  local f="$MODELS_DIR/$1-$2$tag.gguf"
  [ -f "$f" ] || "$BIN/memra" synth --shape "$1" --type "$2" --seed 0 -o "$f" "${@:3}" \
    >>"$LOGS/synth.log" 2>&1
  echo "$f"
}
BENCH_RECEIPTS=()  # this run's memra bench receipts, for the comparison at the end
# fresh_receipt NAME: whether no earlier bench of this run wrote the receipt bench-NAME, recording
# it; else a failed step that says so (a second bench of one name would overwrite the first's
# receipt and log, as the seventy-second round's qasyncload did with its 8B c8 and c64 A/Bs).
fresh_receipt() {
  local r="$RECEIPTS/$DAY-bench-$1.json" seen
  for seen in "${BENCH_RECEIPTS[@]}"; do
    if [ "$seen" = "$r" ]; then
      step "bench-$1-name-reused" 5 bash -c "echo 'bench-$1: this run already wrote $r' >&2; exit 1"
      return 1
    fi
  done
  BENCH_RECEIPTS+=("$r")
}
bench() {  # bench MODEL ARGS...: memra bench with a receipt named after the model
  local name
  name=$(basename "$1" .gguf)
  fresh_receipt "$name" || return 1
  step "bench-$name" 300 "$BIN/memra" bench -m "$1" --device cuda -r 3 "${@:2}" \
    --json "$RECEIPTS/$DAY-bench-$name.json"
}
# bench_with MODEL SUFFIX VAR=VALUE[,VAR=VALUE] ARGS...: the same benchmark with switches set (an A/B in one
# run), its receipt named after the model and the suffix.
bench_with() {  # bench_with MODEL NAME VAR=VALUE[,VAR=VALUE...] ARGS...
  local name
  name=$(basename "$1" .gguf)-$2
  fresh_receipt "$name" || return 1
  # shellcheck disable=SC2086  # the variables split at their commas
  step "bench-$name" 300 env ${3//,/ } "$BIN/memra" bench -m "$1" --device cuda -r 3 "${@:4}" \
    --json "$RECEIPTS/$DAY-bench-$name.json"
}
# switch_ab NAME SETTINGS BENCH-ARGS MODEL...: an A/B of switch settings (LABEL:VAR=VALUE[,...],
# space-separated) on each model's memra bench (BENCH-ARGS, split at spaces), rounds alternated
# (MEMRA_AB_ROUNDS, 2 by default): receipts named NAME-LABEL-ROUND.
switch_ab() {
  local name=$1 settings=$2 args=$3 round f m
  shift 3
  for round in $(seq 1 "${MEMRA_AB_ROUNDS:-2}"); do
    for f in $settings; do
      for m in "$@"; do
        # shellcheck disable=SC2086  # the bench arguments split at spaces
        bench_with "$m" "$name-${f%%:*}-$round" "${f#*:}" $args
      done
    done
  done
}

# one_token_ab NAME VAR OFF ON: a one-token product form's switch, VAR=0 (way OFF) against VAR=1
# (way ON): kernel-check's matmul family with it on, with teeth, the determinism contract and graph
# replay, then 0.6B Q4_K_M and BF16 and 8B Q4_K_M, Q8_0 and BF16 at one sequence, each way.
one_token_ab() {
  local name=$1 var=$2 ways="$3:$2=0 $4:$2=1"
  switch_bits matmul "$name" "$var=1"
  switch_ab "$name" "$ways" "-n 128 -c 1" "$(synth qwen3-0.6b q4_k_m --fast-quant)" \
    "$(synth qwen3-0.6b bf16)"
  switch_ab "$name" "$ways" "-n 64 -c 1" "$(synth qwen3-8b q4_k_m --fast-quant)" \
    "$(synth qwen3-8b q8_0)" "$(synth qwen3-8b bf16)"
}

# attention_phases WAYS: decode attention's one-split kernel stamped under each way's settings
# (LABEL:VAR=VALUE[,...], space-separated): memra-kernel-bench's one sequence of 512 keys, its
# receipt kernel-bench-attention-LABEL.
attention_phases() {
  local f vars
  for f in $1; do
    vars=${f#*:}
    # shellcheck disable=SC2086  # the variables split at their commas
    step "kernel-bench-attention-${f%%:*}" 60 env MEMRA_DECODE_STAMPS=1 ${vars//,/ } \
      "$BIN/memra-kernel-bench" --attention --only 'decode 1x512 f16,decode 1x512' \
      --json "$RECEIPTS/$DAY-kernel-bench-attention-${f%%:*}.json"
  done
}

# invariants STEP VAR=VALUE[,...]: the determinism contract and graph replay under the settings.
invariants() {
  # shellcheck disable=SC2086  # the variables split at their commas
  step "$1" 180 env MEMRA_TEST_DEVICE=cuda ${2//,/ } "$BIN/memra_engine_fixture_test" \
    --gtest_filter='*Invariant*:*GraphReplay*'
}

# one_query_steps NAME WAYS: 0.6B and 8B Q4_K_M at one sequence each way (switch_ab's rounds).
one_query_steps() {
  switch_ab "$1" "$2" "-n 128 -c 1" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  switch_ab "$1" "$2" "-n 64 -c 1" "$(synth qwen3-8b q4_k_m --fast-quant)"
}

# merge_way LABEL V-AFTER CLUSTER-MERGE: a switch_ab way of decode attention's V placement
# (MEMRA_DECODE_V_AFTER) and cluster merge (MEMRA_DECODE_CLUSTER_MERGE).
merge_way() {
  echo "$1:MEMRA_DECODE_V_AFTER=$2,MEMRA_DECODE_CLUSTER_MERGE=$3"
}

# one_query_ab NAME WAYS INVARIANTS-STEP VAR=VALUE[,...]: forms of decode attention's one-split
# kernel against each other (WAYS: switch_ab's, a setting a way): the phases each way, the
# determinism contract with VAR=VALUE[,...], then 0.6B, 8B Q4_K_M and BF16 at one sequence, each
# way.
one_query_ab() {
  local name=$1 ways=$2
  attention_phases "$ways"
  invariants "$3" "$4"
  one_query_steps "$name" "$ways"
  switch_ab "$name" "$ways" "-n 64 -c 1" "$(synth qwen3-8b bf16)"
}

# one_query_switch NAME VAR OFF ON: a switch of decode attention's one-split form that keeps its
# bits, VAR=0 (way OFF) against VAR=1 (way ON): kernel-check's attention family with it on (the
# default merge, every launch merging, with teeth), then one_query_ab.
one_query_switch() {
  local name=$1 var=$2
  kcheck "kernel-check-attention-$name" 120 "$var=1" --filter attention
  kcheck "kernel-check-attention-$name-all" 120 "$var=1" MEMRA_DECODE_MERGE=1 --filter attention
  kcheck "kernel-check-attention-$name-teeth" 120 "$var=1" --filter attention --teeth
  one_query_ab "$name" "$3:$var=0 $4:$var=1" "engine-invariants-$name" "$var=1"
}

# kernel_stalls NAME REGEX SKIP BENCH-ARGS: Nsight Compute's sections, stall reasons and 60 most
# stalled SASS lines of one launch of the kernels matching REGEX under memra-kernel-bench (after
# SKIP of them: past its warm-ups), for the stalls modes.
kernel_stalls() {
  step "$1" 240 python3 scripts/gpu_profile.py --bin "$BIN" --kernel-bench --detail "$2" \
    --skip "$3" --count 1 --source 60 --bench-args "$4"
}

# The FP8 KV cache (--kv-dtype F8_E4M3), in quick and kv: the gate against the CPU with both
# caches in FP8 (core/fp8.h's bits on both: the kernels judged over the same rounding), then what
# the rounding costs against CUDA's F16 cache, measured (the gate's KV cache type mode,
# --report-only: FP8 falls short of its thresholds on these models, PERFORMANCE.md).
kv_fp8_gates() {
  local models=(tests/fixtures/models/llama tests/fixtures/models/qwen3
    tests/fixtures/models/gemma3 "$(synth qwen3-0.6b q4_k_m)")
  step model-gate-kv-fp8 180 python3 scripts/gpu_model_gate.py --bin "$BIN" --kv-dtype F8_E4M3 \
    --json "$RECEIPTS/$DAY-gpu-model-gate-kv-fp8.json" "${models[@]}"
  step kv-fp8-accuracy 180 python3 scripts/gpu_model_gate.py --bin "$BIN" --report-only \
    --reference-device cuda --reference-kv-dtype F16 --kv-dtype F8_E4M3 \
    --json "$RECEIPTS/$DAY-kv-fp8-accuracy.json" "${models[@]}"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGS/0-gpu.log"

# Ordered by what matters most, so a run cut short by a time limit still returns the gates.
if [ "$MODE" = smoke ]; then  # not part of full: every step here is in quick or bench8b too
  kcheck kernel-check-matmul 180 --filter matmul
  step engine-invariants 180 env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test" \
    --gtest_filter='*Invariant*:*GraphReplay*:*MoeDevice*'
  step model-gate-moe 180 python3 scripts/gpu_model_gate.py --bin "$BIN" \
    --json "$RECEIPTS/$DAY-gpu-model-gate-moe.json" tests/fixtures/models/gemma4_moe \
    tests/fixtures/models/qwen3_moe tests/fixtures/models/qwen3_5_moe
  step kernel-bench-512 120 "$BIN/memra-kernel-bench" --tokens 512 \
    --json "$RECEIPTS/$DAY-kernel-bench-512.json"
  bench "$(synth qwen3-8b q4_k_m --fast-quant)" -p 512 -n 64 -c 1,64
  # The one-token products alone (8B shapes), beside the rows above.
  step kernel-bench-1 120 "$BIN/memra-kernel-bench" --tokens 1 \
    --json "$RECEIPTS/$DAY-kernel-bench-1.json"
fi
if runs quick; then
  step cuda-check 60 "$BIN/memra-cuda-check" --mib 2048 --receipt "$RECEIPTS/$DAY-cuda-runtime-check.json"
  kcheck kernel-check 180
  # The split plan's one-query launches on the generic kernel (MEMRA_DECODE_KERNEL=0), which the
  # decode kernel takes by default wherever it applies: what fp8 caches, mixed steps and block
  # sizes that are no power of two run, checked on every case.
  kcheck kernel-check-attention-generic 120 MEMRA_DECODE_KERNEL=0 --filter attention
  # And every one of them through the decode kernel's two-blocks form (MEMRA_DECODE_SHARED_ROWS=
  # all), which by default only grids of more blocks than SMs take.
  kcheck kernel-check-attention-shared 120 MEMRA_DECODE_SHARED_ROWS=all --filter attention
  # And that form a phase at a time (MEMRA_DECODE_PIPE=0; a chunk at a time is the default).
  kcheck kernel-check-attention-phases 120 MEMRA_DECODE_PIPE=0 MEMRA_DECODE_SHARED_ROWS=all \
    --filter attention
  # And on the ring form wherever it fits (MEMRA_DECODE_RING=1; by default only one-token steps
  # whose grid is runs in one wave take it, which no case's mixed step is).
  kcheck kernel-check-attention-ring 120 MEMRA_DECODE_RING=1 MEMRA_DECODE_SHARED_ROWS=all \
    --filter attention
  # And the one-split form at head_dim 128 as sm_80 devices run it (cp.async copies, chunk by
  # chunk arithmetic; on Hopper bulk copies and short chains are the default, sixty-first round).
  kcheck kernel-check-attention-cp-async 120 MEMRA_DECODE_BULK=0 MEMRA_DECODE_CHAINS=0 \
    --filter attention
  # And with every decode kernel launch merging its own partials (MEMRA_DECODE_MERGE=1; by
  # default steps of at most 8 tokens and 8 splits in one wave), long contexts included.
  kcheck kernel-check-attention-merge 120 MEMRA_DECODE_MERGE=1 --filter attention
  # And the tensor form's clusters by the pull merge with V's copies beside K's (the defaults
  # before the seventy-first round: MEMRA_DECODE_CLUSTER_MERGE=async, MEMRA_DECODE_V_AFTER=q now).
  kcheck kernel-check-attention-pull 120 MEMRA_DECODE_CLUSTER_MERGE=1 MEMRA_DECODE_V_AFTER=copies \
    --filter attention
  # And the one_pass query tiles on attention_mma.cuh's 32-row tiles (MEMRA_ATTENTION_FLASH=0),
  # which the row-owning form takes by default at head_dim 64 and 128 where its grid fills the
  # GPU; and every one_pass tile case on the row-owning form (=1), whatever its grid.
  kcheck kernel-check-attention-no-flash 120 MEMRA_ATTENTION_FLASH=0 --filter attention
  kcheck kernel-check-attention-flash 120 MEMRA_ATTENTION_FLASH=1 --filter attention
  # Determinism contract on the GPU: alone vs batched, prefix hit vs cold, chunked vs whole,
  # preempted vs uninterrupted, a hybrid resuming from a state snapshot vs cold, through
  # Engine::create on the fixtures.
  step engine-invariants 180 env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test" \
    --gtest_filter='*Invariant*:*StateSnapshots*'
  # The same contract and graph replay with each decode product launched alone
  # (MEMRA_GROUPED_DECODE=0; the default groups a step's products of one input).
  step engine-invariants-ungrouped 180 env MEMRA_TEST_DEVICE=cuda MEMRA_GROUPED_DECODE=0 \
    "$BIN/memra_engine_fixture_test" --gtest_filter='*Invariant*:*GraphReplay*'
  # CUDA graph replay vs eager, device greedy argmax vs the host sampler, a failed recording.
  step graphs-vs-eager 180 env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test" \
    --gtest_filter='*GraphReplay*:*MoeDevice*'
  # Sampling on the device vs the host sampler on the same logits (tokens, logprob bits), and
  # seeded requests on the GPU vs the CPU.
  step device-sampling 180 env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test" \
    --gtest_filter='*SeededSampling*'
  # The fixtures (gemma4: an 8-wide per-layer input; qwen3_5_moe: a 24-wide shared expert, both
  # on the exact matmul path for K not a multiple of 16), then the synth files.
  GATE=(tests/fixtures/models/llama tests/fixtures/models/qwen2 tests/fixtures/models/qwen3
    tests/fixtures/models/gemma3 tests/fixtures/models/gemma4)
  # The MoE fixtures (BF16 experts in the file's layout) and the first 4 layers of the
  # Qwen3-30B-A3B shape in Q4_K_M (tiled experts): routing and expert matmuls on the device.
  GATE+=(tests/fixtures/models/qwen3_moe tests/fixtures/models/qwen3_5_moe)
  N_GATE_FIXTURES=${#GATE[@]}  # model-gate-fast takes the synth files only
  for spec in "qwen3-0.6b bf16" "qwen3-0.6b q8_0" "qwen3-0.6b q4_k_m" "gemma3-270m q4_k_m" \
    "qwen3-30b-a3b q4_k_m --layers 4"; do
    GATE+=("$(synth $spec)")
  done
  step model-gate 400 python3 scripts/gpu_model_gate.py --bin "$BIN" \
    --json "$RECEIPTS/$DAY-gpu-model-gate.json" "${GATE[@]}"
  # The families whose greedy tokens parted from the CPU's on near-ties, which the gate's greedy
  # rule now allows (docs/TESTING.md), and which CUDA now runs by default: the qwen3_5 hybrid
  # (linear attention) and Gemma 4's MoE fixture (16- and 512-wide head kernels), measured apart.
  step model-gate-linear-attention 120 python3 scripts/gpu_model_gate.py --bin "$BIN" \
    --json "$RECEIPTS/$DAY-gpu-model-gate-linear-attention.json" tests/fixtures/models/qwen3_5
  step model-gate-gemma4 120 python3 scripts/gpu_model_gate.py \
    --bin "$BIN" --json "$RECEIPTS/$DAY-gpu-model-gate-gemma4.json" tests/fixtures/models/gemma4_moe
  kv_fp8_gates
  # The MoE fixtures' experts in the file's layout routed on the host instead
  # (MEMRA_MOE_DEVICE_GGML=0, the path before 2026-12-02's thirteenth round): the gate and the
  # determinism contract there too, as users may pick it.
  step model-gate-moe-host 180 env MEMRA_MOE_DEVICE_GGML=0 python3 scripts/gpu_model_gate.py \
    --bin "$BIN" --json "$RECEIPTS/$DAY-gpu-model-gate-moe-host.json" \
    tests/fixtures/models/gemma4_moe tests/fixtures/models/qwen3_moe
  step engine-invariants-moe-host 180 env MEMRA_TEST_DEVICE=cuda MEMRA_MOE_DEVICE_GGML=0 \
    "$BIN/memra_engine_fixture_test" --gtest_filter='*Invariant*:*GraphReplay*'
  # `--deterministic off` (cuBLASLt prefill on f16 weight copies, not batch-invariant): no
  # greedy-identical promise across batch shapes, but the same gate against the CPU. Its bound
  # lowered to 64 tokens, so that the gate's 128-token steps take the path (the default, 1,024,
  # would leave them canonical: fast_gemm.h).
  step model-gate-fast 300 env MEMRA_DETERMINISTIC=0 MEMRA_FAST_MIN_TOKENS=64 \
    python3 scripts/gpu_model_gate.py \
    --bin "$BIN" --json "$RECEIPTS/$DAY-gpu-model-gate-fast.json" "${GATE[@]:$N_GATE_FIXTURES}"
  step fault-check 180 python3 scripts/gpu_fault_check.py --bin "$BIN" \
    --model "$(synth qwen3-0.6b q4_k_m)" --json "$RECEIPTS/$DAY-gpu-fault-check.json"
  bench "$(synth qwen3-0.6b q4_k_m)" -p 512 -n 128
  # The same figures with every step eager: CUDA graphs on vs off, side by side in one run.
  bench_with "$(synth qwen3-0.6b q4_k_m)" eager MEMRA_CUDA_GRAPHS=0 -p 512 -n 128
  # And with programmatic dependent launch off (kernels/launch.cuh): plain stream ordering.
  bench_with "$(synth qwen3-0.6b q4_k_m)" no-pdl MEMRA_PDL=0 -p 512 -n 128
  # Last: that kernel-check catches each deliberately broken kernel (its own power, which changes
  # only with kernel-check, not with the kernels; ~2.5 min, so a run cut short keeps the gates).
  kcheck kernel-check-teeth 180 --teeth
fi
if runs bench8b; then
  # Speed does not depend on the weights' values: K-quant benchmark files get random valid
  # blocks (--fast-quant, seconds instead of minutes); the gate models above are encoded.
  bench "$(synth qwen3-8b q4_k_m --fast-quant)" -p 512 -n 128 -c 1,8,64
  # The same file with its K-quant matrices in the file's (ggml) layout instead of tiled ones:
  # the weight layouts side by side in one run (their outputs are bit-identical).
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" ggml-layout MEMRA_WEIGHT_LAYOUT=ggml \
    -p 512 -n 128 -c 1,8
  # One-token decode with tokens in the mma's columns (the batched kernel) instead of scale
  # groups (matmul_decode_single.cu), and the attention prologue as five kernels: A/B in one run.
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" tokens-in-columns MEMRA_SINGLE_DECODE=0 \
    -p 512 -n 128
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" unfused-prologue MEMRA_FUSED_PROLOGUE=0 \
    -p 512 -n 128
  # 8 sequences with q/k/v and gate/up a launch per matrix instead of one each (the default).
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" ungrouped MEMRA_GROUPED_DECODE=0 \
    -p 512 -n 128 -c 8
  # Decode at depth: after untimed prompts of 0, 4,096 and 16,384 tokens (llama.cpp's
  # baseline rows; the setting named is the default, only the receipt's name is new).
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" depth MEMRA_DETERMINISTIC=1 -p 512 -n 128 \
    -d 0,4096,16384
  # The FP8 KV cache's A/B against the F16 rows just above: decode at 16,384 (half the K/V bytes
  # a token reads) and prefill at 512 (its attention on the CUDA cores, no tensor-core kernel).
  # The setting named is the default again; --kv-dtype makes the difference.
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" depth-kv-fp8 MEMRA_DETERMINISTIC=1 -p 512 \
    -n 128 -d 16384 --kv-dtype F8_E4M3
  # (The depth A/B of attention on the CUDA cores, 39 s, ran from the tenth to the twelfth round:
  # the tensor cores won at 4,096 and 16,384 (237.5 / 194.7 against 232.0 / 185.3) and tied at 0
  # (276.0 against 278.6);
  # its BF16 prefill A/B below stays.)
  # Q4_K's wgmma products of more than 64 tokens on the quantized kernel instead of the
  # warp-specialized one (MEMRA_WGMMA_FOLD=0; the same bits): the prefill A/B.
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" quant-prefill MEMRA_WGMMA_FOLD=0 -p 512 \
    -n 64
  # What determinism costs: the fast, not batch-invariant prefill (--deterministic off) beside
  # each default figure, at 512 tokens and at longer prompts both ways. Its steps of over 1,024
  # tokens take the f16 copies (fast_gemm.h, kDefaultMinTokens: measured in the forty-first round,
  # the copies pay from ~1,500 tokens), so at 512 and 1,024 the two modes run the same kernels;
  # `fast-64` is the bound before (64), for the A/B at 512.
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" fast MEMRA_DETERMINISTIC=0 \
    -p 512,1024,2048,4096 -n 128
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" fast-64 \
    MEMRA_DETERMINISTIC=0,MEMRA_FAST_MIN_TOKENS=64 -p 512 -n 16
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" long-prompts MEMRA_DETERMINISTIC=1 \
    -p 1024,2048,4096 -n 16
  bench "$(synth qwen3-8b q8_0)" -p 512,2048 -n 128
  bench_with "$(synth qwen3-8b q8_0)" fast MEMRA_DETERMINISTIC=0 -p 512,2048 -n 128
  bench_with "$(synth qwen3-8b q8_0)" ggml-layout MEMRA_WEIGHT_LAYOUT=ggml -p 512 -n 128
  # (No fast run for BF16: the fast path leaves F16/BF16 weights on the canonical kernels.)
  bench "$(synth qwen3-8b bf16)" -p 512,2048 -n 128
  bench_with "$(synth qwen3-8b bf16)" attention-fma MEMRA_ATTENTION_TENSOR_CORES=0 \
    -p 512,2048 -n 128
  # q/k/v and gate/up of a decode step a launch per matrix instead of one launch each (the
  # default, since this A/B: BF16 at one token, K-quants at 8 sequences).
  bench_with "$(synth qwen3-8b bf16)" ungrouped MEMRA_GROUPED_DECODE=0 -p 512 -n 128
  # Through the server: start to ready (file in the page cache) and TTFT of a 512-token prompt
  # (before the family files: a run cut short by the time limit keeps the 8B figures).
  step server-ttft-qwen3-8b-q4_k_m 300 python3 scripts/server_ttft.py --bin "$BIN" \
    --model "$(synth qwen3-8b q4_k_m --fast-quant)" --device cuda \
    --json "$RECEIPTS/$DAY-server-ttft-qwen3-8b-q4_k_m.json"
  BENCH_RECEIPTS+=("$RECEIPTS/$DAY-server-ttft-qwen3-8b-q4_k_m.json")
  step server-ttft-qwen3-8b-q4_k_m-fast 300 env MEMRA_DETERMINISTIC=0 python3 \
    scripts/server_ttft.py --bin "$BIN" --model "$(synth qwen3-8b q4_k_m --fast-quant)" \
    --device cuda --json "$RECEIPTS/$DAY-server-ttft-qwen3-8b-q4_k_m-fast.json"
  step server-ttft-qwen3-8b-bf16 300 python3 scripts/server_ttft.py --bin "$BIN" \
    --model "$(synth qwen3-8b bf16)" --device cuda \
    --json "$RECEIPTS/$DAY-server-ttft-qwen3-8b-bf16.json"
  BENCH_RECEIPTS+=("$RECEIPTS/$DAY-server-ttft-qwen3-8b-bf16.json")
fi
if runs families; then
  # The lent machine's disk (64 GB) holds one of these files at a time beside the 8B ones: each
  # is removed after its benchmarks.
  # Issue 11's families on the GPU, each at 1, 8 and 64 sequences (the issue asks for decode at
  # batch 1 and 64). Qwen3-30B-A3B (qwen3moe): routing and expert matmuls on the
  # device, decode steps up to 64 sequences as graphs. The Qwen3.5 hybrid (delta-net layers) dense
  # and MoE. Gemma 4 (gated on its MoE fixture) last.
  bench "$(synth qwen3-30b-a3b q4_k_m --fast-quant)" -p 512 -n 128 -c 1,8,64
  # (The A/Bs of routing on the host, MEMRA_MOE_DEVICE=0 and MEMRA_MOE_DEVICE_MAX_PAIRS=512, and
  # of Gemma 4's file-layout experts on the host, MEMRA_MOE_DEVICE_GGML=0, decided those defaults;
  # their figures are in receipts/2026-12-02-gpu-check-bench8b-families-run.log.xz.)
  # The lent machine's disk holds the 8B files, the 30B and the 35B one not together.
  rm -f "$MODELS_DIR/qwen3-30b-a3b-q4_k_m.gguf"
  bench "$(synth qwen3.5-9b q4_k_m --fast-quant)" -p 512 -n 64 -c 1,64
  bench "$(synth qwen3.6-35b-a3b q4_k_m --fast-quant)" -p 512 -n 64 -c 1,8,64
  rm -f "$MODELS_DIR/qwen3.5-9b-q4_k_m.gguf" "$MODELS_DIR/qwen3.6-35b-a3b-q4_k_m.gguf"
  # Qwen3.6-27B: the dense hybrid at its largest.
  bench "$(synth qwen3.6-27b q4_k_m --fast-quant)" -p 512 -n 64 -c 1,8,64
  rm -f "$MODELS_DIR/qwen3.6-27b-q4_k_m.gguf"
  # Gemma 4's MoE shape (128 experts of 704, top 8; sliding and 512-wide full layers).
  bench "$(synth gemma-4-26b-a4b q4_k_m --fast-quant)" -p 512 -n 64 -c 1,8,64
  rm -f "$MODELS_DIR/gemma-4-26b-a4b-q4_k_m.gguf"
  # Gemma 4 31B, dense (60 layers, 512-wide full-attention heads; decode steps as graphs).
  bench "$(synth gemma-4-31b q4_k_m --fast-quant)" -p 512 -n 64 -c 1,8,64
  rm -f "$MODELS_DIR/gemma-4-31b-q4_k_m.gguf"
fi
if runs server; then
  # The server's Python tests with every memra-server on the GPU (scripts/gpu_server_tests.sh:
  # the default model's shape with its real tokenizer over random weights; the tests that need the
  # real model's answers are deselected, those that need the pinned test data skip).
  step server-tests 540 env JOBS=2 scripts/gpu_server_tests.sh "$BIN" \
    "$BIN/../vocab/gemma-3-270m.vocab.gguf" "$RECEIPTS/$DAY-gpu-server-tests.json"
fi
if [ "$MODE" = kv ]; then
  for k in attention kv_store qk_prologue; do
    kcheck "kernel-check-$k" 180 --filter "$k"
  done
  kcheck kernel-check-attention-teeth 180 --filter attention --teeth
  kv_fp8_gates
  for t in F16 F8_E4M3; do
    bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" "depth-16k-kv-$t" MEMRA_DETERMINISTIC=1 \
      -p 512 -n 128 -d 16384 --kv-dtype "$t"
  done
fi
if [ "$MODE" = ab ]; then
  # The fine graph buckets (MEMRA_GRAPH_SMALL_BUCKETS=fine, the default since the forty-ninth
  # round's run of this mode at 0e42030: every size to 16, every fourth to 32, every eighth to 64)
  # against =1 (every size to 8 and 12, then 16, 24, 32, 48, 64; the receipts of that run name it
  # `default`). The determinism contract and graph replay with fine, then 8B and 0.6B Q4_K_M
  # decode of 6, 11, 14, 16, 20, 28, 40 and 56 sequences each way, twice, alternated (6 and 16:
  # controls, the same graph both ways). (The forty-seventh round's ab runs of =1 against =0 are
  # this script at 4e0637a and 7fb284b; the forty-sixth round's pair-rule A/B at cf280f3.)
  if [ -x "$BIN/memra_engine_fixture_test" ]; then
    step engine-invariants-fine-buckets 180 env MEMRA_TEST_DEVICE=cuda \
      MEMRA_GRAPH_SMALL_BUCKETS=fine "$BIN/memra_engine_fixture_test" \
      --gtest_filter='*Invariant*:*GraphReplay*'
  fi
  ways="fine:MEMRA_GRAPH_SMALL_BUCKETS=fine small:MEMRA_GRAPH_SMALL_BUCKETS=1"
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  q06=$(synth qwen3-0.6b q4_k_m --fast-quant)
  for round in 1 2; do
    for f in $ways; do
      bench_with "$q8b" "buckets-${f%%:*}-$round" "${f#*:}" -n 64 -c 6,11,14,16,20,28,40,56
      bench_with "$q06" "buckets-${f%%:*}-$round" "${f#*:}" -n 64 -c 6,11,14,16,20,28,40,56
    done
  done
fi
if [ "$MODE" = split ]; then
  # The split forms as defaults (forty-ninth round; measured on against off at 0e42030's
  # `split`: 8B Q4_K_M at 64 sequences 4,800 -> 5,530 tok/s, Q8_0 4,120 -> 6,607). Their bits
  # first: every matrix case at the defaults (the 8B's q/k/v, gate/up and down shapes and the
  # 0.6B's at 40 and 64 tokens take them, one chunk and five included) and with both off (the
  # A/B's other way), the determinism contract and graph replay, the model gate on the fixtures
  # and 0.6B synth files. Then the default's figures (8B Q4_K_M at 1, 8 and 64 sequences, Q8_0 at
  # 64, the products at 64 tokens), and the split rule's A/B: `waves` (the default) against
  # `narrow` (only where the doubled grid fits one wave), 8B Q4_K_M at 40 and 64, twice,
  # alternated.
  kcheck kernel-check-matmul 300 --filter matmul
  if [ -x "$BIN/memra_engine_fixture_test" ]; then
    step engine-invariants 180 env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test" \
      --gtest_filter='*Invariant*:*GraphReplay*'
  fi
  step model-gate-split 300 python3 scripts/gpu_model_gate.py --bin "$BIN" \
    --json "$RECEIPTS/$DAY-gpu-model-gate-split.json" tests/fixtures/models/llama \
    tests/fixtures/models/qwen3 tests/fixtures/models/gemma3 "$(synth qwen3-0.6b q4_k_m)" \
    "$(synth qwen3-0.6b q8_0)"
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  bench "$q8b" -p 512 -n 128 -c 1,8,64
  # (Q8_0's receipt named apart from bench8b's; MEMRA_SPLIT_RULE=waves is the default, set only
  # so that the receipt's command says which rule ran.)
  bench_with "$(synth qwen3-8b q8_0)" split-default MEMRA_SPLIT_RULE=waves -n 64 -c 64
  step kernel-bench-split 120 "$BIN/memra-kernel-bench" --tokens 64 --dtypes q4_k,q6_k,q8_0 \
    --json "$RECEIPTS/$DAY-kernel-bench-split.json"
  for round in 1 2; do
    for rule in waves narrow; do
      bench_with "$q8b" "split-$rule-$round" "MEMRA_SPLIT_RULE=$rule" -n 64 -c 40,64
    done
  done
  kcheck kernel-check-matmul-split-off 300 MEMRA_FOLD64_SPLIT=0 MEMRA_SCALED_DECODE=0 \
    --filter matmul
fi
if [ "$MODE" = xrows ]; then
  # x's rows form at 33-64 tokens (written in the forty-ninth round, measured and made the default
  # in the fiftieth). Its bits first: every matrix case with it (the products at 40 and 64 tokens
  # read x's rows form; the norm and activation cases at 40 and 64 rows hand it over, with teeth:
  # a zeroed piece of it must show), the determinism contract and graph replay with it; then its
  # speed against =0, and the c64 step with it by kernel.
  switch_bits matmul xrows MEMRA_X_ROWS_DECODE=1
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  q88=$(synth qwen3-8b q8_0)
  q06=$(synth qwen3-0.6b q4_k_m --fast-quant)
  for round in 1 2; do
    for f in on:MEMRA_X_ROWS_DECODE=1 off:MEMRA_X_ROWS_DECODE=0; do
      bench_with "$q8b" "xrows-${f%%:*}-$round" "${f#*:}" -n 64 -c 40,64
      bench_with "$q88" "xrows-${f%%:*}-$round" "${f#*:}" -n 64 -c 64
      bench_with "$q06" "xrows-${f%%:*}-$round" "${f#*:}" -n 64 -c 64
    done
  done
  step profile-qwen3-8b-q4_k_m-c64-xrows 300 env MEMRA_X_ROWS_DECODE=1 python3 \
    scripts/gpu_profile.py --bin "$BIN" --model "$q8b" --skip 16000 --count 2500 \
    --bench-args "-n 64 -r 3 -c 64"
fi
if [ "$MODE" = halves ]; then
  # Written without a device (fiftieth round): the split forms' token halves; and (fifty-first)
  # MEMRA_SPLIT_SMALL, the split forms on the narrow outputs at 17-32 tokens too, where they run
  # on halves. Their bits first: every matrix case with both (the narrow products at 17-64 tokens
  # take 32-token blocks), with teeth, the determinism contract and graph replay with both; then
  # the products at 20-64 tokens and whole decode steps each way.
  switch_bits matmul halves MEMRA_SPLIT_HALVES=1 MEMRA_SPLIT_SMALL=1
  # (all: every split launch on halves, q/k/v's 96 split blocks too: whether a 32-token chunk
  # is any faster than a 64-token one, which two waves of them against one tells.)
  for f in on:MEMRA_SPLIT_HALVES=1,MEMRA_SPLIT_SMALL=1 off:MEMRA_SPLIT_HALVES=0 \
    all:MEMRA_SPLIT_HALVES=all; do
    switches=${f#*:}
    # shellcheck disable=SC2086  # the variables split at their commas
    step "kernel-bench-halves-${f%%:*}" 120 env ${switches//,/ } "$BIN/memra-kernel-bench" \
      --tokens 32,64 --dtypes q4_k,q6_k,q8_0 \
      --json "$RECEIPTS/$DAY-kernel-bench-halves-${f%%:*}.json"
  done
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  q88=$(synth qwen3-8b q8_0)
  q06=$(synth qwen3-0.6b q4_k_m --fast-quant)
  # (MEMRA_AB_ROUNDS: fewer rounds where device time is short.)
  for round in $(seq 1 "${MEMRA_AB_ROUNDS:-2}"); do
    for f in on:MEMRA_SPLIT_HALVES=1 off:MEMRA_SPLIT_HALVES=0; do
      bench_with "$q8b" "halves-${f%%:*}-$round" "${f#*:}" -n 64 -c 40,64
      bench_with "$q88" "halves-${f%%:*}-$round" "${f#*:}" -n 64 -c 64
      bench_with "$q06" "halves-${f%%:*}-$round" "${f#*:}" -n 64 -c 24,64
    done
  done
  # 17-32 sequences (c20 below c16 since the split forms came): neither, the halves alone (the
  # 8B's gate/up launch, 192 row blocks, already takes the split form there), both.
  switch_ab small \
    "off:MEMRA_SPLIT_HALVES=0 halves:MEMRA_SPLIT_HALVES=1 small:MEMRA_SPLIT_HALVES=1,MEMRA_SPLIT_SMALL=1" \
    "-n 64 -c 16,20,32" "$q8b"
fi
if [ "$MODE" = copies ]; then
  # Written without a device (fifty-first round): the first wgmma of a chunk waits for its whole
  # warpgroup, and warp 0 issued every copy of the next chunk before it (18% of the split form's
  # warp samples at 64 tokens). The bits first, then the split form's stalls again, then the
  # products and whole decode steps (against the halves run's figures: no switch). Two teams
  # for this part, as run at 21b4f47 (three are the token halves' default since).
  export MEMRA_SPLIT_TEAMS=2
  kcheck kernel-check-matmul 300 --filter matmul
  kcheck kernel-check-matmul-teeth 300 --filter matmul --teeth
  if [ -x "$BIN/memra_engine_fixture_test" ]; then
    step engine-invariants 180 env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test" \
      --gtest_filter='*Invariant*:*GraphReplay*'
  fi
  kernel_stalls stalls-fold64-64-down wgmma_fold64 60 "--tokens 64 --dtypes q4_k --only down"
  kernel_stalls stalls-fold64-64-gate wgmma_fold64 60 "--tokens 64 --dtypes q4_k --only gate"
  step kernel-bench-copies 120 "$BIN/memra-kernel-bench" --tokens 32,64 --dtypes q4_k,q6_k,q8_0 \
    --json "$RECEIPTS/$DAY-kernel-bench-copies.json"
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" copies MEMRA_SPLIT_TEAMS=2 -n 64 \
    -c 20,32,40,64
  bench_with "$(synth qwen3-8b q8_0)" copies MEMRA_SPLIT_TEAMS=2 -n 64 -c 64
  bench_with "$(synth qwen3-0.6b q4_k_m --fast-quant)" copies MEMRA_SPLIT_TEAMS=2 -n 64 -c 24,64
  # Then the token halves' blocks on three teams (MEMRA_SPLIT_TEAMS=3, written in the same round,
  # the default since): their bits (+ teeth), the products and the same decode figures with them.
  kcheck kernel-check-matmul-teams3 300 MEMRA_SPLIT_TEAMS=3 --filter matmul
  kcheck kernel-check-matmul-teams3-teeth 300 MEMRA_SPLIT_TEAMS=3 --filter matmul --teeth
  step kernel-bench-teams3 120 env MEMRA_SPLIT_TEAMS=3 "$BIN/memra-kernel-bench" --tokens 32,64 \
    --dtypes q4_k --json "$RECEIPTS/$DAY-kernel-bench-teams3.json"
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" teams3 MEMRA_SPLIT_TEAMS=3 -n 64 \
    -c 20,32,40,64
  bench_with "$(synth qwen3-0.6b q4_k_m --fast-quant)" teams3 MEMRA_SPLIT_TEAMS=3 -n 64 -c 24,64
fi
if [ "$MODE" = small ]; then
  # The scaled kernel's split form on the narrow products of 17-32 tokens: Q8_0's of K 4,096 or
  # more, the default since the fifty-third round (MEMRA_SPLIT_SMALL=q8_0), against none (=0) and
  # against Q6_K's and every K too (=scaled, which the fifty-third round measured slower on the 8B
  # Q4_K_M and the 0.6B Q8_0): 8B Q8_0 and Q4_K_M and 0.6B Q8_0 decode of 20 and 32 sequences,
  # twice, alternated. (quick's kernel-check runs the default; the halves run's covered those
  # launches under =1.)
  switch_ab small "off:MEMRA_SPLIT_SMALL=0 q8_0:MEMRA_SPLIT_SMALL=q8_0 scaled:MEMRA_SPLIT_SMALL=scaled" \
    "-n 64 -c 20,32" "$(synth qwen3-8b q8_0)" "$(synth qwen3-8b q4_k_m --fast-quant)" \
    "$(synth qwen3-0.6b q8_0)"
fi
if [ "$MODE" = sidesmall ]; then
  # The per-output launches of 17-32-token decode steps (the cluster and tiled decode kernels: one
  # output a launch) after a call's first on the second stream, recorded graphs included
  # (MEMRA_DECODE_SIDE_SMALL=1, measured in the fifty-fourth round and the default since): its bits
  # first (the Q4_K/Q6_K call at 20 and 32 tokens over K = 4,096 handed a second stream, + teeth;
  # the determinism contract and graph replay), then 8B Q4_K_M and Q8_0 and 0.6B Q4_K_M decode of
  # 20, 24 and 32 sequences each way, twice, alternated (a failed recording would show in the
  # bench logs: the step then runs eager).
  switch_bits matmul sidesmall MEMRA_DECODE_SIDE_SMALL=1
  switch_ab sidesmall "on:MEMRA_DECODE_SIDE_SMALL=1 off:MEMRA_DECODE_SIDE_SMALL=0" \
    "-n 64 -c 20,24,32" "$(synth qwen3-8b q4_k_m --fast-quant)" "$(synth qwen3-8b q8_0)" \
    "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  grep -l "failed, it runs eagerly" "$LOGS"/bench-*sidesmall-on-*.log || true
fi
if [ "$MODE" = groups ]; then
  # Decode attention's split groups by the makespan rule (attention.cu's fill_groups), the longer
  # runs first on grids of more than a wave (measured in the fifty-fourth round and the default
  # since; the fifty-fifth measured and removed `last`, the longer runs last in a token's splits).
  # Bits first: kernel-check's attention cases with every one-query launch in the two-blocks form
  # (its long-context decode tokens take uneven runs there), + teeth, the determinism contract and
  # graph replay; then 8B Q4_K_M decode of 16, 20, 40, 48 and 64 sequences (at three splits a
  # column fill_groups gives 2, 2, 2, 2 and 1 groups, auto 2, 1, 1, 1 and 1; at 16 fill's grid is
  # auto's) and 0.6B Q4_K_M of the same, each way, twice, alternated.
  switch_bits attention groups MEMRA_DECODE_SPLITS=fill MEMRA_DECODE_SHARED_ROWS=all
  switch_ab groups "fill:MEMRA_DECODE_SPLITS=fill auto:MEMRA_DECODE_SPLITS=auto" \
    "-n 64 -c 16,20,40,48,64" "$(synth qwen3-8b q4_k_m --fast-quant)" \
    "$(synth qwen3-0.6b q4_k_m --fast-quant)"
fi
if [ "$MODE" = steams ]; then
  # The scaled kernel's token halves on three teams (MEMRA_SCALED_TEAMS=3, written and measured
  # in the fifty-fifth round: the default at 33-64 tokens since, two at 17-32): the bits first (kernel-check's tiled model shapes run the halves at
  # 20, 40 and 64 tokens over 4, 5, 16 and 48 chunks, and one chunk, where two teams have none;
  # + teeth; the determinism contract and graph replay), then the products alone each way, then
  # decode each way, twice, alternated.
  switch_bits matmul steams MEMRA_SCALED_TEAMS=3
  for f in 3:MEMRA_SCALED_TEAMS=3 2:MEMRA_SCALED_TEAMS=2; do
    step "kernel-bench-steams-${f%%:*}" 120 env "${f#*:}" "$BIN/memra-kernel-bench" \
      --tokens 32,64 --dtypes q6_k,q8_0 --json "$RECEIPTS/$DAY-kernel-bench-steams-${f%%:*}.json"
  done
  for round in $(seq 1 "${MEMRA_AB_ROUNDS:-2}"); do
    for f in 3:MEMRA_SCALED_TEAMS=3 2:MEMRA_SCALED_TEAMS=2; do
      bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" "steams-${f%%:*}-$round" "${f#*:}" \
        -n 64 -c 40,64
      bench_with "$(synth qwen3-8b q8_0)" "steams-${f%%:*}-$round" "${f#*:}" -n 64 -c 20,32,64
      bench_with "$(synth qwen3-0.6b q4_k_m --fast-quant)" "steams-${f%%:*}-$round" "${f#*:}" \
        -n 64 -c 64
    done
  done
fi
if [ "$MODE" = actregs ]; then
  # The gated activation's rows form from registers (MEMRA_ACT_ROWS_REGS=1, written and measured
  # in the fifty-fifth round, the default since in decode steps of rows over 4,096 wide): its bits, the elementwise kernels alone each way (its row at 512
  # and 2,048 tokens), then decode (and the bench's 512-token prefill) each way, twice, alternated.
  switch_bits matmul actregs MEMRA_ACT_ROWS_REGS=1
  for f in on:MEMRA_ACT_ROWS_REGS=1 off:MEMRA_ACT_ROWS_REGS=0; do
    step "kernel-bench-actregs-${f%%:*}" 120 env "${f#*:}" "$BIN/memra-kernel-bench" \
      --elementwise --json "$RECEIPTS/$DAY-kernel-bench-actregs-${f%%:*}.json"
  done
  switch_ab actregs "on:MEMRA_ACT_ROWS_REGS=1 off:MEMRA_ACT_ROWS_REGS=0" "-n 64 -c 40,64" \
    "$(synth qwen3-8b q4_k_m --fast-quant)" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
fi
if [ "$MODE" = ring ]; then
  # Decode attention's ring form (written in the fifty-sixth round; auto, the default, on one-token
  # steps whose grid is runs in one wave): its bits with =1 on the default forms, then with every one-query launch in the
  # two-blocks form (+ teeth), the determinism contract and graph replay so; the kernel with =1
  # and =0; then decode with auto and =0, twice, alternated.
  if [ "${MEMRA_RING_BITS:-1}" != 0 ]; then
    kcheck kernel-check-attention-ring-default-forms 120 MEMRA_DECODE_RING=1 --filter attention
    switch_bits attention ring MEMRA_DECODE_RING=1 MEMRA_DECODE_SHARED_ROWS=all
  fi
  for f in on:MEMRA_DECODE_RING=1 off:MEMRA_DECODE_RING=0; do
    step "kernel-bench-attention-ring-${f%%:*}" 120 env "${f#*:}" "$BIN/memra-kernel-bench" \
      --attention --json "$RECEIPTS/$DAY-kernel-bench-attention-ring-${f%%:*}.json"
  done
  switch_ab ring "auto:MEMRA_DECODE_RING=auto off:MEMRA_DECODE_RING=0" "-n 64 -c 8,40,64" \
    "$(synth qwen3-8b q4_k_m --fast-quant)" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  for round in $(seq 1 "${MEMRA_AB_ROUNDS:-2}"); do
    for f in auto:MEMRA_DECODE_RING=auto off:MEMRA_DECODE_RING=0; do
      bench_with "$q8b" "ring-depth-${f%%:*}-$round" "${f#*:}" -p 512 -n 32 -d 4096,16384
    done
  done
fi
if [ "$MODE" = merge ]; then
  # Decode attention's partials merged by the last of a token's blocks (written in the
  # fifty-seventh round; auto, the default, steps of at most 8 tokens and 8 splits in one wave):
  # its bits with =1 on the default forms, then with every one-query launch in the two-blocks
  # form (+ teeth), the determinism contract and graph replay so; the kernel with auto and =0;
  # then decode with auto and =0, twice, alternated.
  if [ "${MEMRA_MERGE_BITS:-1}" != 0 ]; then
    kcheck kernel-check-attention-merge-default-forms 120 MEMRA_DECODE_MERGE=1 --filter attention
    switch_bits attention merge MEMRA_DECODE_MERGE=1 MEMRA_DECODE_SHARED_ROWS=all
  fi
  for f in auto:MEMRA_DECODE_MERGE=auto off:MEMRA_DECODE_MERGE=0; do
    step "kernel-bench-attention-merge-${f%%:*}" 120 env "${f#*:}" "$BIN/memra-kernel-bench" \
      --attention --json "$RECEIPTS/$DAY-kernel-bench-attention-merge-${f%%:*}.json"
  done
  switch_ab merge "auto:MEMRA_DECODE_MERGE=auto off:MEMRA_DECODE_MERGE=0" "-n 64 -c 1,8,64" \
    "$(synth qwen3-8b q4_k_m --fast-quant)" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
fi
if [ "$MODE" = phases ]; then
  # Decode attention at one sequence is a chain of phases in series (sixtieth round: sixteen warps
  # a block measured no faster); which of them is long, each block's clock at each phase's end.
  kcheck kernel-check-attention-stamps 120 MEMRA_DECODE_STAMPS=1 --filter attention
  step kernel-bench-attention-phases 60 env MEMRA_DECODE_STAMPS=1 "$BIN/memra-kernel-bench" \
    --attention --only 'decode 1x512 f16,decode 1x512' \
    --json "$RECEIPTS/$DAY-kernel-bench-attention-phases.json"
fi
if [ "$MODE" = clustermerge ]; then
  # A token's splits as one cluster, merging through its blocks' shared memory (the default),
  # against the arrival counters and the last block's L2 loads (MEMRA_DECODE_CLUSTER_MERGE=0):
  # the sixty-first round's stamps put ~3,000 cycles of a block's ~20,000 at 512 keys in the
  # arrival and merge. Kernel-check (the counters with the default merge rule and with every
  # launch merging, the cluster with every launch merging), the phases each way, the
  # determinism contract with the counters, then whole steps.
  kcheck kernel-check-attention-counters 120 MEMRA_DECODE_CLUSTER_MERGE=0 --filter attention
  kcheck kernel-check-attention-counters-all 120 MEMRA_DECODE_CLUSTER_MERGE=0 \
    MEMRA_DECODE_MERGE=1 --filter attention
  kcheck kernel-check-attention-cluster-all 120 MEMRA_DECODE_MERGE=1 --filter attention
  ways="counters:MEMRA_DECODE_CLUSTER_MERGE=0 cluster:MEMRA_DECODE_CLUSTER_MERGE=1"
  one_query_ab clustermerge "$ways" engine-invariants-counters MEMRA_DECODE_CLUSTER_MERGE=0
fi
if [ "$MODE" = transposed ]; then
  # The one-split form's scores and values with the query rows as A's carry one query row as 1
  # of an mma's 16 rows (~768 mma a block at 512 keys); transposed (keys or dims the rows, the
  # query rows the columns: the default), half the products. First the probe (whether an
  # element's bits depend on its place in the tile, and a chain's cost a link), then kernel-check
  # of the straight form (quick's covers the transposed one), the phases each way, the
  # determinism contract with the straight form, then whole steps.
  probe mma_transpose
  kcheck kernel-check-attention-straight 120 MEMRA_DECODE_TRANSPOSED=0 --filter attention
  ways="straight:MEMRA_DECODE_TRANSPOSED=0 transposed:MEMRA_DECODE_TRANSPOSED=1"
  one_query_ab transposed "$ways" engine-invariants-straight MEMRA_DECODE_TRANSPOSED=0
fi
if [ "$MODE" = tensorcopy ]; then
  # The sixty-second round's stamps put the copies' issue first among the transposed form's
  # phases (~4,400 cycles for 512 cp.async.bulk a block); tensor copies of a cache block's half
  # rows take 64. Kernel-check (the default merge, every launch merging, the counters), the
  # phases each way, the determinism contract, then whole steps.
  kcheck kernel-check-attention-tensor 120 MEMRA_DECODE_TENSOR=1 --filter attention
  kcheck kernel-check-attention-tensor-all 120 MEMRA_DECODE_TENSOR=1 MEMRA_DECODE_MERGE=1 \
    --filter attention
  kcheck kernel-check-attention-tensor-counters 120 MEMRA_DECODE_TENSOR=1 \
    MEMRA_DECODE_CLUSTER_MERGE=0 --filter attention
  ways="bulk:MEMRA_DECODE_TENSOR=0 tensor:MEMRA_DECODE_TENSOR=1"
  one_query_ab tensorcopy "$ways" engine-invariants-tensor MEMRA_DECODE_TENSOR=1
fi
if [ "$MODE" = earlymeta ]; then
  # The tensor form's one-split blocks open their chain with the run's read (~1,070 cycles at 512
  # keys on an H100) and their block-table entries (most of the ~2,500 to the copies' issue),
  # after the wait; MEMRA_DECODE_EARLY_META=1 reads them before it (step metadata only: the same
  # bits). Kernel-check (the default merge, every launch merging, with teeth), the phases each
  # way, the determinism contract, then whole steps.
  one_query_switch earlymeta MEMRA_DECODE_EARLY_META after early
fi
if [ "$MODE" = spreadq ]; then
  # The tensor form's chain to its scores at 512 keys on an H100 (sixty-seventh round): ~2,300
  # cycles issuing the copies (32 a warp from two warps), then ~1,560 staging q (its L2 round
  # trip behind them), while K's rows had landed 140 cycles after. Three ways: the copies from
  # the first threads (packed), from all eight warps (spread, MEMRA_DECODE_TENSOR_SPREAD=1), and
  # spread with q's first pair loaded before the copies' issue (spreadq, MEMRA_DECODE_Q_FIRST=1
  # too; the default since the sixty-eighth round). The same bits each way: kernel-check with each
  # switch alone (the default merge, every launch merging, with teeth), the phases each way, the
  # determinism contract, then whole steps.
  kcheck kernel-check-attention-spread 120 MEMRA_DECODE_TENSOR_SPREAD=1 MEMRA_DECODE_Q_FIRST=0 \
    --filter attention
  kcheck kernel-check-attention-qfirst 120 MEMRA_DECODE_TENSOR_SPREAD=0 MEMRA_DECODE_Q_FIRST=1 \
    --filter attention
  kcheck kernel-check-attention-spreadq-all 120 MEMRA_DECODE_TENSOR_SPREAD=1 \
    MEMRA_DECODE_Q_FIRST=1 MEMRA_DECODE_MERGE=1 --filter attention
  kcheck kernel-check-attention-spreadq-teeth 120 MEMRA_DECODE_TENSOR_SPREAD=1 \
    MEMRA_DECODE_Q_FIRST=1 --filter attention --teeth
  ways="packed:MEMRA_DECODE_TENSOR_SPREAD=0,MEMRA_DECODE_Q_FIRST=0"
  ways+=" spread:MEMRA_DECODE_TENSOR_SPREAD=1,MEMRA_DECODE_Q_FIRST=0"
  ways+=" spreadq:MEMRA_DECODE_TENSOR_SPREAD=1,MEMRA_DECODE_Q_FIRST=1"
  one_query_ab spreadq "$ways" engine-invariants-spreadq \
    MEMRA_DECODE_TENSOR_SPREAD=1,MEMRA_DECODE_Q_FIRST=1
fi
if [ "$MODE" = vafter ]; then
  # With q loaded first (sixty-eighth round) the tensor form's chain to its scores at 512 keys ends
  # on K's landing, 764 cycles after q's staging, while V's copies land beside K's through the same
  # SM's intake and the values start ~3,000 cycles after K. Three ways: V's copies with K's (the
  # default), once q is staged, once K's rows have landed (MEMRA_DECODE_V_AFTER). The same bits
  # each way: kernel-check with each, the phases each way, the determinism contract, whole steps.
  kcheck kernel-check-attention-vafter-q 120 MEMRA_DECODE_V_AFTER=q --filter attention
  kcheck kernel-check-attention-vafter-keys 120 MEMRA_DECODE_V_AFTER=keys --filter attention
  kcheck kernel-check-attention-vafter-keys-all 120 MEMRA_DECODE_V_AFTER=keys \
    MEMRA_DECODE_MERGE=1 --filter attention
  kcheck kernel-check-attention-vafter-keys-teeth 120 MEMRA_DECODE_V_AFTER=keys \
    --filter attention --teeth
  one_query_ab vafter "copies:MEMRA_DECODE_V_AFTER=copies q:MEMRA_DECODE_V_AFTER=q \
keys:MEMRA_DECODE_V_AFTER=keys" engine-invariants-vafter MEMRA_DECODE_V_AFTER=keys
fi
if [ "$MODE" = asyncmerge ]; then
  # The cluster merge's first barrier took ~1,430 cycles at 512 keys (sixty-eighth round's stamps,
  # H100), its blocks' values ending within a few cycles of each other. The async merge pushes
  # each partial into the merging blocks' inboxes with st.async (the same values merged in the same
  # order: the same bits). kernel-check with it, the phases each way, the determinism contract,
  # whole steps.
  kcheck kernel-check-attention-asyncmerge 120 MEMRA_DECODE_CLUSTER_MERGE=async --filter attention
  kcheck kernel-check-attention-asyncmerge-all 120 MEMRA_DECODE_CLUSTER_MERGE=async \
    MEMRA_DECODE_MERGE=1 --filter attention
  kcheck kernel-check-attention-asyncmerge-teeth 120 MEMRA_DECODE_CLUSTER_MERGE=async \
    --filter attention --teeth
  one_query_ab asyncmerge "pull:MEMRA_DECODE_CLUSTER_MERGE=1 async:MEMRA_DECODE_CLUSTER_MERGE=async" \
    engine-invariants-asyncmerge MEMRA_DECODE_CLUSTER_MERGE=async
fi
if [ "$MODE" = vasync ]; then
  # vafter's and asyncmerge's questions in one run, the 8B BF16 model left out.
  kcheck kernel-check-attention-vafter-keys 120 MEMRA_DECODE_V_AFTER=keys --filter attention
  kcheck kernel-check-attention-asyncmerge 120 MEMRA_DECODE_CLUSTER_MERGE=async --filter attention
  kcheck kernel-check-attention-vasync-teeth 120 MEMRA_DECODE_V_AFTER=keys \
    MEMRA_DECODE_CLUSTER_MERGE=async --filter attention --teeth
  attention_phases "copies:MEMRA_DECODE_V_AFTER=copies q:MEMRA_DECODE_V_AFTER=q \
keys:MEMRA_DECODE_V_AFTER=keys async:MEMRA_DECODE_CLUSTER_MERGE=async"
  invariants engine-invariants-vasync MEMRA_DECODE_V_AFTER=keys,MEMRA_DECODE_CLUSTER_MERGE=async
  ways="$(merge_way base copies 1) $(merge_way keys keys 1) $(merge_way async copies async)"
  one_query_steps vasync "$ways $(merge_way both keys async)"
fi
if [ "$MODE" = qasync ]; then
  # vasync's both (V after K with the async merge) ran ahead of the defaults in both rounds though
  # V after K alone lost 2.8%; V after q with the async merge was left out. The four pairings of
  # the async merge, twice, to say which (if any) is real. First the probe: what the cluster
  # barrier's hand-off costs by itself, and an mbarrier's in its place.
  probe cluster_handoff
  kcheck kernel-check-attention-qasync-teeth 120 MEMRA_DECODE_V_AFTER=q \
    MEMRA_DECODE_CLUSTER_MERGE=async --filter attention --teeth
  attention_phases "qasync:MEMRA_DECODE_V_AFTER=q,MEMRA_DECODE_CLUSTER_MERGE=async"
  invariants engine-invariants-qasync MEMRA_DECODE_V_AFTER=q,MEMRA_DECODE_CLUSTER_MERGE=async
  ways="$(merge_way base copies 1) $(merge_way async copies async)"
  one_query_steps qasync "$ways $(merge_way qasync q async) $(merge_way both keys async)"
fi
if [ "$MODE" = qasyncload ]; then
  # qasync's pairing where several sequences share a step (the cluster form runs wherever a
  # token's splits fit a cluster: every sequence of a short context).
  ways="$(merge_way base copies 1) $(merge_way qasync q async)"
  switch_ab qasyncload "$ways" "-n 64 -c 8" "$(synth qwen3-8b q4_k_m --fast-quant)" \
    "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  # (c64's own name: its 8B receipts and logs would overwrite c8's, as they did in the
  # seventy-second round's runs.)
  switch_ab qasyncload64 "$ways" "-n 64 -c 64" "$(synth qwen3-8b q4_k_m --fast-quant)"
fi
if [ "$MODE" = kafterq ]; then
  # At 512 keys q's staging ends ~2,750 cycles after the wait though its first pair is loaded
  # before the copies (an L2 round trip alone is ~600-800), and K lands ~400 cycles later: is q's
  # load returning behind K's 64 KB? K's copies issued once q is staged, against right after.
  one_query_switch kafterq MEMRA_DECODE_K_AFTER_Q kfirst kafterq
fi
if [ "$MODE" = earlybars ]; then
  # At 512 keys the copies' issue ends ~1,400 cycles after the wait, K's 32 copies ~400 of it:
  # thread 0's barrier initialization and the block barrier behind it moved before the wait.
  one_query_switch earlybars MEMRA_DECODE_EARLY_BARRIERS late early
fi
if [ "$MODE" = prologue ]; then
  # The prologue costs 1.2-1.3 us a layer in place at one sequence (sixtieth round): a launch and
  # its chain for ~3 KB of work. In decode attention's blocks instead (decode_prologue.cuh).
  kcheck kernel-check-attention-prologue 120 --filter attention_prologue
  kcheck kernel-check-attention-prologue-teeth 120 --filter attention_prologue --teeth
  step same-bits-prologue 300 python3 scripts/same_bits.py --bin "$BIN" \
    --a MEMRA_DECODE_PROLOGUE=0 --b MEMRA_DECODE_PROLOGUE=1 --chunk 1 \
    --json "$RECEIPTS/$DAY-same-bits-prologue.json" "$(synth qwen3-0.6b q4_k_m --fast-quant)" \
    "$(synth qwen3-0.6b bf16)" "$(synth qwen3-8b q4_k_m --fast-quant --layers 4)"
  step model-gate-prologue 300 env MEMRA_DECODE_PROLOGUE=1 python3 scripts/gpu_model_gate.py \
    --bin "$BIN" --json "$RECEIPTS/$DAY-gpu-model-gate-prologue.json" "$(synth qwen3-0.6b q4_k_m)"
  # The kernels alone at 512 keys: qk_prologue then attention against attention with it inside,
  # then both stamped (the q staging's cost in the blocks).
  pro_rows='decode 1x512 f16 prologue,decode 1x512 f16 prologue inside'
  step kernel-bench-attention-prologue 60 "$BIN/memra-kernel-bench" --attention --only \
    "$pro_rows" --json "$RECEIPTS/$DAY-kernel-bench-attention-prologue.json"
  step kernel-bench-attention-prologue-stamps 60 env MEMRA_DECODE_STAMPS=1 \
    "$BIN/memra-kernel-bench" --attention --only "$pro_rows" \
    --json "$RECEIPTS/$DAY-kernel-bench-attention-prologue-stamps.json"
  ways="separate:MEMRA_DECODE_PROLOGUE=0 inside:MEMRA_DECODE_PROLOGUE=1"
  invariants engine-invariants-prologue MEMRA_DECODE_PROLOGUE=1
  one_query_steps prologue "$ways"
  switch_ab prologue "$ways" "-n 64 -c 1" "$(synth qwen3-8b bf16)"
fi
if [ "$MODE" = pushes ]; then
  # The async merge's pushes add ~600 cycles to the values at 512 keys: the remote stores' count,
  # or the hand-off's latency? Fewer, wider stores (staged) and one bulk copy a block, measured.
  probe cluster_push
fi
if [ "$MODE" = rawx ]; then
  # A one-token step's down product prepares x in an x_to_f16 launch (~1.7 us a layer in place on
  # the 8B, sixtieth round); with MEMRA_RAW_X (the default) the activation hands it its row's
  # partial maxima and the product's blocks make x's f16 fragments and group sums themselves (the
  # same bits).
  switch_bits matmul rawx MEMRA_RAW_X=1
  ways="prepared:MEMRA_RAW_X=0 raw:MEMRA_RAW_X=1"
  switch_ab rawx "$ways" "-n 128 -c 1" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  switch_ab rawx "$ways" "-n 64 -c 1" "$(synth qwen3-8b q4_k_m --fast-quant)" \
    "$(synth qwen3-8b q8_0)" "$(synth qwen3-8b bf16)"
fi
if [ "$MODE" = rawxattn ]; then
  # The o product's input was the last a one-token layer prepared in an x_to_f16 launch; with
  # MEMRA_RAW_X_ATTENTION (the default) decode attention's cluster form hands it its blocks'
  # partial maxima and the product's blocks make x's operands themselves, as the down product
  # does (the same bits).
  one_token_ab rawxattn MEMRA_RAW_X_ATTENTION prepared raw
fi
if [ "$MODE" = rawxearly ]; then
  # A product reading x raw waits for the partial maxima (an L2 round trip) before it loads its
  # first chunk of x (another); with MEMRA_RAW_X_EARLY=1 the first chunk's loads go out first and
  # fly beside the maxima's (the same bits).
  one_token_ab rawxearly MEMRA_RAW_X_EARLY after early
fi
if [ "$MODE" = rawxstage ]; then
  # Column 0's fragments of x read raw by a transpose through the warp's shared memory instead of
  # 32 shuffles a chunk (one_token_x.cuh: Column0; the same bits).
  one_token_ab rawxstage MEMRA_RAW_X_STAGE shuffle stage
fi
if [ "$MODE" = tchunks ]; then
  # The one-split form's transposed products (the default since the sixty-second round: half the
  # mma) in the forms that take a split a chunk at a time, where many sequences and long contexts
  # run: kernel-check with it on the default forms, with every one-query launch in the two-blocks
  # form (+ teeth, the determinism contract and graph replay), and in the ring form; the kernel
  # each way; then whole steps, each way, twice, alternated.
  on=MEMRA_DECODE_TRANSPOSED_CHUNKS=1
  kcheck kernel-check-attention-tchunks-default-forms 120 "$on" --filter attention
  switch_bits attention tchunks "$on" MEMRA_DECODE_SHARED_ROWS=all
  kcheck kernel-check-attention-tchunks-ring 120 "$on" MEMRA_DECODE_RING=1 \
    MEMRA_DECODE_SHARED_ROWS=all --filter attention
  ways="straight:MEMRA_DECODE_TRANSPOSED_CHUNKS=0 transposed:$on"
  for f in $ways; do
    step "kernel-bench-attention-tchunks-${f%%:*}" 120 env "${f#*:}" "$BIN/memra-kernel-bench" \
      --attention --only 'decode 8x640 f16,decode 64x640 f16,decode 64x4096,decode 1x16384 f16' \
      --json "$RECEIPTS/$DAY-kernel-bench-attention-tchunks-${f%%:*}.json"
  done
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  switch_ab tchunks "$ways" "-n 64 -c 8,64" "$q8b" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  for round in $(seq 1 "${MEMRA_AB_ROUNDS:-2}"); do
    for f in $ways; do
      bench_with "$q8b" "tchunks-depth-${f%%:*}-$round" "${f#*:}" -p 512 -n 32 -d 16384
    done
  done
fi
if [ "$MODE" = chains ]; then
  # The one-split form's phases (sixty-first round's stamps at 512 keys, H100): ~8,200 cycles
  # issuing the split's cp.async and staging q, ~4,100 each for the scores and the values (48
  # dependent mma a warp), ~2,900 the arrival and merge. Bulk copies take the issue, short chains
  # the two arithmetic phases (both the default since); the same bits each way. Kernel-check of
  # the forms the defaults leave out (quick's covers both on), their phases, then whole steps.
  kcheck kernel-check-attention-nobulk 120 MEMRA_DECODE_BULK=0 --filter attention
  kcheck kernel-check-attention-nochains 120 MEMRA_DECODE_CHAINS=0 --filter attention
  kcheck kernel-check-attention-neither 120 MEMRA_DECODE_BULK=0 MEMRA_DECODE_CHAINS=0 \
    --filter attention
  ways="off:MEMRA_DECODE_BULK=0,MEMRA_DECODE_CHAINS=0 bulk:MEMRA_DECODE_CHAINS=0"
  ways="$ways chains:MEMRA_DECODE_BULK=0 both:MEMRA_DECODE_BULK=auto"
  for f in $ways; do
    v=${f#*:}
    # shellcheck disable=SC2086  # the way's variables split at their commas
    step "kernel-bench-attention-${f%%:*}" 60 env MEMRA_DECODE_STAMPS=1 ${v//,/ } \
      "$BIN/memra-kernel-bench" --attention --only 'decode 1x512 f16,decode 1x512' \
      --json "$RECEIPTS/$DAY-kernel-bench-attention-${f%%:*}.json"
  done
  # The determinism contract and graph replay with neither (quick's run the defaults).
  step engine-invariants-neither 180 env MEMRA_TEST_DEVICE=cuda MEMRA_DECODE_BULK=0 \
    MEMRA_DECODE_CHAINS=0 "$BIN/memra_engine_fixture_test" \
    --gtest_filter='*Invariant*:*GraphReplay*'
  switch_ab chains "$ways" "-n 128 -c 1" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  switch_ab chains "$ways" "-n 64 -c 1" "$(synth qwen3-8b q4_k_m --fast-quant)"
  switch_ab chains "$ways" "-n 64 -c 1" "$(synth qwen3-8b bf16)"
fi
if [ "$MODE" = drop ]; then
  # Each way skips one class of kernels (MEMRA_DIAG_DROP, kernels/launch.cuh): x's two
  # preparations (o's and down's inputs), the two norms, the attention prologue, decode attention
  # and its combine, the activation, and all of them at once (the products alone: the bound of
  # any fusion of the small kernels, a persistent step's included), and the products (the small
  # kernels' chain alone).
  small="x_to_f16_kernel+norm_to_f16+qk_prologue+decode_attention_kernel+attention_combine+act_mul"
  ways="default:MEMRA_DIAG_DROP= xprep:MEMRA_DIAG_DROP=x_to_f16_kernel"
  ways="$ways norm:MEMRA_DIAG_DROP=norm_to_f16 prologue:MEMRA_DIAG_DROP=qk_prologue"
  ways="$ways attn:MEMRA_DIAG_DROP=decode_attention_kernel+attention_combine"
  ways="$ways act:MEMRA_DIAG_DROP=act_mul small:MEMRA_DIAG_DROP=$small"
  ways="$ways products:MEMRA_DIAG_DROP=single_decode+tiled_decode+pair_decode"
  switch_ab drop "$ways" "-n 64 -c 1,8" "$(synth qwen3-8b q4_k_m --fast-quant)"
  switch_ab drop "$ways" "-n 64 -c 1" "$(synth qwen3-8b bf16)"
  switch_ab drop "$ways" "-n 128 -c 1" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
fi
if [ "$MODE" = l2 ]; then
  # The one-token products with their weights in L2 against from DRAM (memra-kernel-bench's
  # --copies 1 against its default rotation): what DRAM's round trips cost each product, the most
  # any prefetch of its weights could buy it. (The fifty-ninth round's prefetch of the next
  # products' weights into L2, MEMRA_L2_PREFETCH, was measured by this mode at 0aa5227's script
  # and removed.)
  for c in dram l2; do
    copies=()
    [ $c = l2 ] && copies=(--copies 1)
    step "kernel-bench-l2-8b-$c" 300 "$BIN/memra-kernel-bench" --tokens 1 \
      --dtypes q4_k,q6_k,bf16 "${copies[@]}" --json "$RECEIPTS/$DAY-kernel-bench-l2-8b-$c.json"
    step "kernel-bench-l2-06b-$c" 180 "$BIN/memra-kernel-bench" --shapes qwen3-0.6b --tokens 1 \
      --dtypes q4_k,q6_k "${copies[@]}" --json "$RECEIPTS/$DAY-kernel-bench-l2-06b-$c.json"
  done
fi
if [ "$MODE" = side ]; then
  # A Q4_K_M layer's Q6_K v beside its Q4_K q and k in 33-64-token decode steps, recorded graphs
  # included (MEMRA_DECODE_SIDE_STREAM=1, written in the fifty-first round, measured in the
  # fifty-second and the default since; the A/B names both settings). Its bits
  # first: every matrix case with it (the narrow Q4_K + Q6_K case at 40 and 64 tokens handed a
  # second stream, + teeth), the determinism contract and graph replay with it; then 8B and 0.6B
  # Q4_K_M decode of 40 and 64 sequences each way, twice, alternated (a failed recording would
  # show in the bench logs: the step then runs eager).
  switch_bits matmul side MEMRA_DECODE_SIDE_STREAM=1
  switch_ab side "on:MEMRA_DECODE_SIDE_STREAM=1 off:MEMRA_DECODE_SIDE_STREAM=0" "-n 64 -c 40,64" \
    "$(synth qwen3-8b q4_k_m --fast-quant)" "$(synth qwen3-0.6b q4_k_m --fast-quant)"
  grep -l "failed, it runs eagerly" "$LOGS"/bench-*side-on-*.log || true
fi
if [ "$MODE" = pipe ]; then
  # Decode attention a chunk at a time in its forms with V in K's rows (MEMRA_DECODE_PIPE=1,
  # written and measured in the fifty-second round, the default since; the A/B names both):
  # kernel-check's attention cases with it on the default forms, then with every one-query launch
  # in the two-blocks form (+ teeth) and the determinism contract and graph replay so; then 8B
  # Q4_K_M decode of 1, 8 and 64 sequences after 512 tokens and of one at 16,384 tokens of
  # context, each way, twice, alternated. (The fifty-second round's receipts name the two-blocks
  # runs kernel-check-attention-pipe-shared[-teeth], the default forms' kernel-check-attention-pipe.)
  kcheck kernel-check-attention-pipe-default-forms 120 MEMRA_DECODE_PIPE=1 --filter attention
  switch_bits attention pipe MEMRA_DECODE_PIPE=1 MEMRA_DECODE_SHARED_ROWS=all
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  for round in $(seq 1 "${MEMRA_AB_ROUNDS:-2}"); do
    for f in on:MEMRA_DECODE_PIPE=1 off:MEMRA_DECODE_PIPE=0; do
      bench_with "$q8b" "pipe-${f%%:*}-$round" "${f#*:}" -p 512 -n 64 -c 1,8,64
      bench_with "$q8b" "pipe-depth-${f%%:*}-$round" "${f#*:}" -p 512 -n 64 -d 16384
    done
  done
fi
if [ "$MODE" = bins ]; then
  # Two builds of the same commit, or a commit and its baseline. Now: the tiled records' loads
  # past L1 or first out of it (the default since the forty-seventh round, kernels/matmul/tiled.cuh
  # L1Use) against the plain loads of before (cmake --preset device -DMEMRA_WEIGHTS_L1=plain,
  # scripts/device_pack.sh, scripts/device_pack_base.sh; or the pack of 4e0637a, the commit
  # before). The same bits (a load's caching is not its value): kernel-check's matrix cases run
  # on the new build first. pp512 is measured too: since 91b3aff the prefill kernels load plain in
  # every build (6a4806a's split loads there cost it 0.8%), so it is a control; and c16-c64, where
  # the tiled kernel's token-group launches (33-64 tokens) take the split loads unmeasured. (The
  # forty-second round's bins, prefill attention across two commits, is this script at cf280f3;
  # the forty-seventh's first, every load past L1, at 4e0637a.)
  if [ -z "${MEMRA_GPU_BIN_BASE:-}" ] || [ ! -x "$MEMRA_GPU_BIN_BASE/memra" ]; then
    echo "gpu_check: bins needs MEMRA_GPU_BIN_BASE, a folder with the baseline's memra" >&2
    exit 2
  fi
  BASE_BIN=$(cd "$MEMRA_GPU_BIN_BASE" && pwd)
  NEW_BIN=$BIN NEW_COMMIT=$MEMRA_COMMIT
  BASE_COMMIT=$(cat "$BASE_BIN/../COMMIT" 2>/dev/null || echo unknown)
  kcheck kernel-check-matmul-bins 300 --filter matmul
  Q4=$(synth qwen3-8b q4_k_m --fast-quant)
  Q8=$(synth qwen3-8b q8_0)
  Q06=$(synth qwen3-0.6b q4_k_m --fast-quant)
  BF16=$(synth qwen3-8b bf16)
  for round in 1 2; do
    for side in base new; do
      BIN=$([ $side = base ] && echo "$BASE_BIN" || echo "$NEW_BIN")
      export MEMRA_COMMIT=$([ $side = base ] && echo "$BASE_COMMIT" || echo "$NEW_COMMIT")
      step "kernel-bench-bins-$side-$round" 180 "$BIN/memra-kernel-bench" --tokens 1,8 \
        --dtypes q4_k,q6_k,q8_0,bf16 --json "$RECEIPTS/$DAY-kernel-bench-bins-$side-$round.json"
      bench_with "$Q4" "$side-$round" MEMRA_DETERMINISTIC=1 -p 512 -n 64 -c 1,8,16,32,64
      bench_with "$Q8" "$side-$round" MEMRA_DETERMINISTIC=1 -n 64 -c 8
      bench_with "$BF16" "$side-$round" MEMRA_DETERMINISTIC=1 -p 512 -n 64 -c 1
      bench_with "$Q06" "$side-$round" MEMRA_DETERMINISTIC=1 -n 64 -c 1
    done
  done
  BIN=$NEW_BIN MEMRA_COMMIT=$NEW_COMMIT
fi
if [ "$MODE" = prefill ]; then
  # The prefill rows of issue 10's table with nothing else on the machine: a default's end-to-end
  # figure after a prefill kernel change, in a minute where bench8b takes five or more.
  bf16=$(synth qwen3-8b bf16)
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  for round in 1 2; do
    bench_with "$bf16" "prefill-$round" MEMRA_DETERMINISTIC=1 -p 512,2048 -n 4
    bench_with "$q8b" "prefill-$round" MEMRA_DETERMINISTIC=1 -p 512 -n 4
  done
fi
if [ "$MODE" = scan ]; then
  # Every decode kernel choice is per token count (1, 2-8, 9-16, 17-32, 33-64) and per shape, so a
  # batch size whose tok/s is below a smaller one's marks a choice to measure again.
  counts=1,2,3,4,5,6,7,8,12,16,20,24,28,32,40,48,56,64
  bench_with "$(synth qwen3-8b q4_k_m --fast-quant)" scan MEMRA_DETERMINISTIC=1 -n 64 -c $counts
  bench_with "$(synth qwen3-0.6b q4_k_m --fast-quant)" scan MEMRA_DETERMINISTIC=1 -n 64 -c $counts
fi
if [ "$MODE" = holes ]; then
  # The scan's reversals (c20 below c16, c40 below c32: each the first batch size of a kernel
  # class) under the existing kernel-choice switches of 17-64 tokens, default first, twice,
  # alternated: whether a choice already written does better there.
  q8b=$(synth qwen3-8b q4_k_m --fast-quant)
  ways="default:MEMRA_CLUSTER_DECODE=1 nocluster:MEMRA_CLUSTER_DECODE=0 tiles4:MEMRA_BATCH_TOKEN_TILES=4"
  ways="$ways wgmmaall:MEMRA_WGMMA_DECODE_ALL=1"
  for round in 1 2; do
    for f in $ways; do
      bench_with "$q8b" "holes-${f%%:*}-$round" "${f#*:}" -n 64 -c 16,20,24,32,40
    done
  done
fi
if [ "$MODE" = steps ]; then
  # Serialized kernel time per decode step, by kernel, at 1 and 8 sequences (the 8-sequence
  # step costs ~1 ms more than the one-sequence step for the same weights: where), or at the
  # counts of MEMRA_STEPS_COUNTS (e.g. "64": the split forms' c64 step, with MEMRA_PROFILE_ENV).
  # MEMRA_STEPS_TYPE: the 8B file's weight type (q4_k_m by default; bf16, q8_0); MEMRA_STEPS_PROMPT=0
  # leaves the prompt step out.
  wtype=${MEMRA_STEPS_TYPE:-q4_k_m}
  extra=()
  [ "$wtype" = q4_k_m ] && extra=(--fast-quant)
  model=$(synth qwen3-8b "$wtype" "${extra[@]}")
  for c in ${MEMRA_STEPS_COUNTS:-1 8}; do
    window="--skip 8000 --count 2000" decode="-n 128"
    [ "$c" -gt 16 ] && window="--skip 16000 --count 2500" decode="-n 64"
    # shellcheck disable=SC2086  # the variables split at their spaces
    step "profile-qwen3-8b-$wtype-c$c" 240 env ${MEMRA_PROFILE_ENV:-} python3 \
      scripts/gpu_profile.py --bin "$BIN" --model "$model" $window --bench-args "$decode -r 3 -c $c"
  done
  # A 512-token prompt step per kernel (the thirty-sixth round's table, PERFORMANCE.md), with the
  # switches of MEMRA_PROFILE_ENV if set (e.g. MEMRA_X_ROWS=0).
  if [ "${MEMRA_STEPS_PROMPT:-1}" != 0 ]; then
    # shellcheck disable=SC2086  # the variables split at their spaces
    step "prompt-profile-qwen3-8b-$wtype-512" 240 env ${MEMRA_PROFILE_ENV:-} python3 \
      scripts/gpu_profile.py --bin "$BIN" --model "$model" --prompt \
      --skip 0 --count 2500 --bench-args "-p 512 -n 2 -r 3"
  fi
fi
if [ "$MODE" = stalls64 ]; then
  # Why a 64-token chunk takes ~2.3 us where its wgmmas need ~0.55 (forty-ninth round: the
  # products are ~63% of c64's step): Nsight Compute's limits, stall reasons and most-stalled SASS
  # lines of the pipelined Q4_K kernel's 128-row form (gate: 96 blocks, no split), its split form
  # (down: 32 blocks of 128 rows, split) and the scaled kernel's split form (Q6_K down).
  for sh in gate down; do
    kernel_stalls "stalls-fold64-64-$sh" wgmma_fold64 60 "--tokens 64 --dtypes q4_k --only $sh"
  done
  kernel_stalls stalls-scaled-64-down prefill_wgmma_scaled 60 \
    "--tokens 64 --dtypes q6_k --only down"
  step kernel-bench-stalls64 120 "$BIN/memra-kernel-bench" --tokens 64 --dtypes q4_k,q6_k,q8_0 \
    --json "$RECEIPTS/$DAY-kernel-bench-stalls64.json"
fi
if [ "$MODE" = profile ]; then
  # Serialized kernel time per step, by kernel (without -p, memra bench runs only the -c figures:
  # a warm-up, the 512-token prompts' prefill, then decode, so the skips land in decode steps):
  # one-token decode (furthest from its target) and
  # the two figures whose time is not yet broken down (64-sequence decode, the hybrid's prefill).
  step profile-qwen3-8b-q4_k_m-c1 180 python3 scripts/gpu_profile.py --bin "$BIN" \
    --model "$(synth qwen3-8b q4_k_m --fast-quant)" --skip 8000 --count 2000 \
    --bench-args "-n 128 -r 3 -c 1"
  # The one-token matrix kernel's limits (throughput, stalls, bytes in flight): the four
  # products of one layer (q/k/v, o, gate/up, down).
  step profile-detail-single-decode 180 python3 scripts/gpu_profile.py --bin "$BIN" \
    --model "$(synth qwen3-8b q4_k_m --fast-quant)" --detail single_decode_kernel --skip 400 \
    --count 4 --bench-args "-n 64 -r 3 -c 1"
  # The cluster decode kernel's limits at 32 sequences (Q4_K): its stall reasons say whether the
  # copy pipeline's round trip bounds it (docs/PERFORMANCE.md, seventeenth round).
  step profile-detail-cluster-decode 180 python3 scripts/gpu_profile.py --bin "$BIN" \
    --model "$(synth qwen3-8b q4_k_m --fast-quant)" --demangled \
    --detail 'cluster_decode_kernel<\(memra::DType\)12' --skip 200 --count 3 \
    --bench-args "-n 64 -r 3 -c 32"
  step profile-qwen3-8b-q4_k_m-c64 240 python3 scripts/gpu_profile.py --bin "$BIN" \
    --model "$(synth qwen3-8b q4_k_m --fast-quant)" --skip 16000 --count 2500 \
    --bench-args "-n 64 -r 3 -c 64"
  step profile-qwen3.5-9b-q4_k_m-pp512 240 python3 scripts/gpu_profile.py --bin "$BIN" \
    --model "$(synth qwen3.5-9b q4_k_m --fast-quant)" --skip 1000 --count 2000 \
    --bench-args "-p 512 -n 2 -r 3 -c 1"
  rm -f "$MODELS_DIR/qwen3.5-9b-q4_k_m.gguf"
  # (Qwen3-30B-A3B: a skip of 6,000 gave a window with no whole step, its warm-up and prompt
  # launches not counted; 60,000 of a 128-token decode should land in decode.)
  # The two mixture-of-experts figures furthest from their ceilings (issue 11): one-token decode
  # of Qwen3-30B-A3B (~10% of its active-weight ceiling) and Gemma 4 26B-A4B (7%, and how many
  # kernels a layer it launches).
  step profile-qwen3-30b-a3b-q4_k_m-c1 240 python3 scripts/gpu_profile.py --bin "$BIN" \
    --model "$(synth qwen3-30b-a3b q4_k_m --fast-quant)" --skip 60000 --count 2500 \
    --bench-args "-n 128 -r 3 -c 1"
  rm -f "$MODELS_DIR/qwen3-30b-a3b-q4_k_m.gguf"
  step profile-gemma-4-26b-a4b-q4_k_m-c1 240 python3 scripts/gpu_profile.py --bin "$BIN" \
    --model "$(synth gemma-4-26b-a4b q4_k_m --fast-quant)" --skip 6000 --count 2500 \
    --bench-args "-n 64 -r 3 -c 1"
  rm -f "$MODELS_DIR/gemma-4-26b-a4b-q4_k_m.gguf"
fi
if [ "$MODE" = moe ]; then
  for k in moe_route matmul_experts; do
    kcheck "kernel-check-$k" 180 --filter "$k"
    kcheck "kernel-check-$k-teeth" 180 --filter "$k" --teeth
  done
  # The file-layout pair kernel's blocks of one row tile (MEMRA_MOE_GGML_PACK=0; packed by
  # default): its expert cases against matmul, bit for bit.
  kcheck kernel-check-matmul_experts-ggml-unpacked 180 MEMRA_MOE_GGML_PACK=0 --filter matmul_experts
  step kernel-bench-moe 120 "$BIN/memra-kernel-bench" --moe \
    --json "$RECEIPTS/$DAY-kernel-bench-moe.json"
  step kernel-bench-moe-ggml-sorted 120 env MEMRA_MOE_GGML_PAIRS=0 "$BIN/memra-kernel-bench" \
    --moe --json "$RECEIPTS/$DAY-kernel-bench-moe-ggml-sorted.json"
  step kernel-bench-moe-ggml-unpacked 120 env MEMRA_MOE_GGML_PACK=0 "$BIN/memra-kernel-bench" \
    --moe --json "$RECEIPTS/$DAY-kernel-bench-moe-ggml-unpacked.json"
  step model-gate-moe 300 python3 scripts/gpu_model_gate.py --bin "$BIN" \
    --json "$RECEIPTS/$DAY-gpu-model-gate-moe.json" tests/fixtures/models/gemma4_moe \
    tests/fixtures/models/qwen3_moe tests/fixtures/models/qwen3_5_moe \
    "$(synth qwen3-30b-a3b q4_k_m --layers 4)"
  step engine-invariants-moe 180 env MEMRA_TEST_DEVICE=cuda "$BIN/memra_engine_fixture_test" \
    --gtest_filter='*Invariant*:*GraphReplay*:*MoeDevice*'
  step engine-invariants-moe-ggml-unpacked 180 env MEMRA_TEST_DEVICE=cuda MEMRA_MOE_GGML_PACK=0 \
    "$BIN/memra_engine_fixture_test" --gtest_filter='*Invariant*:*GraphReplay*:*MoeDevice*'
  bench "$(synth gemma-4-26b-a4b q4_k_m --fast-quant)" -n 64 -c 1,8
  bench_with "$(synth gemma-4-26b-a4b q4_k_m --fast-quant)" ggml-sorted MEMRA_MOE_GGML_PAIRS=0 \
    -n 64 -c 1,8
  bench_with "$(synth gemma-4-26b-a4b q4_k_m --fast-quant)" ggml-unpacked MEMRA_MOE_GGML_PACK=0 \
    -n 64 -c 1,8
  rm -f "$MODELS_DIR/gemma-4-26b-a4b-q4_k_m.gguf"
  bench "$(synth qwen3-30b-a3b q4_k_m --fast-quant)" -n 64 -c 1,8
  rm -f "$MODELS_DIR/qwen3-30b-a3b-q4_k_m.gguf"
fi
if [ "$MODE" = gemma4 ]; then
  kcheck kernel-check-norm-fused 120 --filter norm
  for shape in gemma-4-26b-a4b gemma-4-31b; do
    bench "$(synth $shape q4_k_m --fast-quant)" -p 512 -n 64 -c 1,8
    bench_with "$(synth $shape q4_k_m --fast-quant)" unfused-norms MEMRA_FUSED_NORMS=0 \
      -n 64 -c 1,8
    rm -f "$MODELS_DIR/$shape-q4_k_m.gguf"
  done
fi
if [ "$MODE" = stalls ]; then
  # Why the kernels of the open decode targets wait (docs/PERFORMANCE.md, forty-fifth round), each
  # under memra-kernel-bench with Nsight Compute's limits, stall reasons and most-stalled SASS
  # lines: the tiled kernel at 8 tokens (c8: Q4_K gate, two chunks a warp, and down, the ahead
  # form), the one-token kernel on the same gate (its control), and decode attention's block at one
  # sequence of 512 keys (c1 and the 0.6B: a latency chain that copies before the wait shortened
  # alone and lengthened whole steps). Then the products at 1 and 8 tokens beside them. (The
  # forty-third round's stalls, the row-owning prefill attention, is this script at 3810156.)
  for sh in gate down; do
    kernel_stalls "stalls-tiled-8-$sh" tiled_decode_kernel 60 "--tokens 8 --dtypes q4_k --only $sh"
  done
  kernel_stalls stalls-single-1-gate single_decode_kernel 60 "--tokens 1 --dtypes q4_k --only gate"
  kernel_stalls stalls-decode-attention-1x512 decode_attention_kernel 50 \
    "--attention --only 'decode 1x512 f16'"
  step kernel-bench-stalls 120 "$BIN/memra-kernel-bench" --tokens 1,8 --dtypes q4_k,q6_k \
    --json "$RECEIPTS/$DAY-kernel-bench-stalls.json"
fi
if [ "$MODE" = stallsattn ]; then
  # Why decode attention's block at 64 sequences reads the cache at ~63% of copy (75.8 us a layer
  # on the H100, fifty-fifth round's c64 step): Nsight Compute's limits, stall reasons and
  # most-stalled SASS lines of the run form (two blocks an SM, a split a chunk at a time) at 64 x
  # 640 keys, then of one sequence of 512 keys (the one-block form: its chain alone) and of eight
  # of 640 (c8's), then every attention case of memra-kernel-bench.
  kernel_stalls stalls-decode-attention-64x640 decode_attention_kernel 50 \
    "--attention --only 'decode 64x640 f16'"
  kernel_stalls stalls-decode-attention-1x512 decode_attention_kernel 50 \
    "--attention --only 'decode 1x512 f16'"
  kernel_stalls stalls-decode-attention-8x640 decode_attention_kernel 50 \
    "--attention --only 'decode 8x640 f16'"
  step kernel-bench-attention 120 "$BIN/memra-kernel-bench" --attention \
    --json "$RECEIPTS/$DAY-kernel-bench-attention.json"
fi
if runs quick; then
  bench "$(synth qwen3-0.6b bf16)" -p 512 -n 128
  step kernel-bench 180 "$BIN/memra-kernel-bench" --json "$RECEIPTS/$DAY-kernel-bench.json"
  # Q4_K at 512 tokens on the quantized wgmma kernel (MEMRA_WGMMA_FOLD=0) instead of the
  # warp-specialized one: the A/B against the rows above.
  step kernel-bench-quant-prefill 120 env MEMRA_WGMMA_FOLD=0 "$BIN/memra-kernel-bench" \
    --tokens 512 --json "$RECEIPTS/$DAY-kernel-bench-quant-prefill.json"
fi
if [ "$MODE" != quick ]; then
  # This run's figures beside llama.cpp's and the issue 10 targets, from its receipts (nothing is
  # run again; docs/PERFORMANCE.md "Against a peer and the targets").
  written=()
  for r in "${BENCH_RECEIPTS[@]}"; do [ -f "$r" ] && written+=("$r"); done
  [ ${#written[@]} -gt 0 ] && step bench-compare 60 "$BIN/memra" bench \
    --compare bench/baselines/llama.cpp-h200-2026-11-29.json --receipts "${written[@]}" \
    --json "$RECEIPTS/$DAY-compare-llama.cpp.json"
fi

echo
echo "== gpu_check $MODE on $(head -n1 "$LOGS/0-gpu.log"), commit $MEMRA_COMMIT"
printf '%s\n' "${TABLE[@]}"
bundle
