// Which matrix products `--deterministic off` sends to cuBLASLt (backend/cuda/fast_gemm.h): only
// steps over FastGemm::kDefaultMinTokens tokens (or MEMRA_FAST_MIN_TOKENS, never under 64) whose
// outputs are all quantized tiled matrices (Q4_K, Q6_K, Q8_0) with an f16 copy under the cap.
// Decode-sized steps, F16/BF16 (faster on the canonical wgmma kernel), ggml-layout and F32 weights
// stay canonical. Host-only: runs in the cuda preset without a GPU (scripts/test.sh).
#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "backend/cuda/fast_gemm.h"
#include "core/error.h"

namespace memra {
namespace {

using cuda::FastGemm;
using kernels::MatmulOut;
using kernels::WeightLayout;

MatmulOut out(DType dtype, WeightLayout layout, int64_t n_out = 4096) {
  return {dtype, nullptr, n_out, nullptr, n_out, layout};
}

bool takes(const std::vector<MatmulOut>& outs, int64_t n_tokens, int64_t n_in = 4096) {
  return FastGemm::takes(outs.data(), static_cast<int>(outs.size()), n_in, n_tokens,
                         FastGemm::kDefaultMinTokens);
}

TEST(FastGemmPolicy, QuantizedTiledStepsOverTheBound) {
  const int64_t edge = FastGemm::kDefaultMinTokens;
  for (DType d : {DType::q4_k, DType::q6_k, DType::q8_0}) {
    EXPECT_TRUE(takes({out(d, WeightLayout::tiled)}, edge + 1)) << dtype_name(d);
    EXPECT_TRUE(takes({out(d, WeightLayout::tiled)}, 4096)) << dtype_name(d);
    EXPECT_FALSE(takes({out(d, WeightLayout::tiled)}, edge)) << dtype_name(d);
    EXPECT_FALSE(takes({out(d, WeightLayout::tiled)}, 512)) << dtype_name(d);  // slower there
    EXPECT_FALSE(takes({out(d, WeightLayout::tiled)}, 1)) << dtype_name(d);
    EXPECT_FALSE(takes({out(d, WeightLayout::ggml)}, 2048)) << dtype_name(d);
  }
}

TEST(FastGemmPolicy, HalfPrecisionAndF32StayCanonical) {
  for (DType d : {DType::f16, DType::bf16})
    EXPECT_FALSE(takes({out(d, WeightLayout::tiled)}, 2048)) << dtype_name(d);
  EXPECT_FALSE(takes({out(DType::f32, WeightLayout::ggml)}, 2048));
  // One output the path does not take keeps the whole shared-x call canonical.
  EXPECT_FALSE(
      takes({out(DType::q4_k, WeightLayout::tiled), out(DType::bf16, WeightLayout::tiled)}, 2048));
  EXPECT_TRUE(
      takes({out(DType::q4_k, WeightLayout::tiled), out(DType::q6_k, WeightLayout::tiled)}, 2048));
}

TEST(FastGemmPolicy, TheCopyIsSizedForTheLargestOutputAndCapped) {
  const std::vector<MatmulOut> qkv = {out(DType::q4_k, WeightLayout::tiled, 4096),
                                      out(DType::q4_k, WeightLayout::tiled, 1024),
                                      out(DType::q6_k, WeightLayout::tiled, 1024)};
  EXPECT_EQ(FastGemm::copy_bytes(qkv.data(), 3, 4096), size_t{4096} * 4096 * 2);
  // An output matrix of 151,936 x 4,096 needs a 1.24 GB copy, over the cap: canonical.
  const int64_t vocab = 151936;
  ASSERT_GT(size_t(vocab) * 4096 * 2, FastGemm::kMaxCopyBytes);
  EXPECT_FALSE(takes({out(DType::q6_k, WeightLayout::tiled, vocab)}, 2048));
}

TEST(FastGemmPolicy, TheBoundComesFromTheEnvironmentAndNeverReachesDecodeSteps) {
  const char* name = "MEMRA_FAST_MIN_TOKENS";
  unsetenv(name);
  EXPECT_EQ(FastGemm::min_tokens_from_env(), FastGemm::kDefaultMinTokens);
  setenv(name, "64", 1);  // what the GPU recipe's fast gate runs at (its steps of 128 tokens)
  EXPECT_EQ(FastGemm::min_tokens_from_env(), 64);
  const std::vector<MatmulOut> q4 = {out(DType::q4_k, WeightLayout::tiled)};
  EXPECT_TRUE(FastGemm::takes(q4.data(), 1, 4096, 65, FastGemm::min_tokens_from_env()));
  EXPECT_FALSE(FastGemm::takes(q4.data(), 1, 4096, 64, FastGemm::min_tokens_from_env()));
  for (const char* bad : {"63", "0", "-1", "fast"}) {  // a decode step's size, or no number
    setenv(name, bad, 1);
    EXPECT_THROW((void)FastGemm::min_tokens_from_env(), Error) << bad;
  }
  unsetenv(name);
}

}  // namespace
}  // namespace memra
