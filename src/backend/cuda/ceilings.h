// The two ceilings of one GPU, measured in place so a benchmark can report each figure as a
// percentage of what this very GPU does in the same run: device copy bandwidth (what bounds decode)
// and the bf16 dense matrix rate of cuBLASLt (what bounds prefill).
#pragma once

#include <vector>

namespace memra::cuda {

// TB/s of a 2 GiB device-to-device copy, counting bytes read + bytes written (10^12 bytes/s); one
// value per event-timed run, after warm-up copies. Allocates 4 GiB on the GPU while it runs.
std::vector<double> measure_copy_tb_s(int ordinal, int runs = 20);

// TFLOP/s (2 * 8192^3 per call) of a cuBLASLt bf16 x bf16 -> bf16 GEMM with f32 accumulation,
// 8192^3, on random data in [-1, 1) (zeros would draw less power and read too fast); one value
// per event-timed run, after warm-up calls.
std::vector<double> measure_bf16_tflops(int ordinal, int runs = 20);

}  // namespace memra::cuda
