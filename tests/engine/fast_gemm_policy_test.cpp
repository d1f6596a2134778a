// Which matrix products `--deterministic off` sends to cuBLASLt (backend/cuda/fast_gemm.h): only
// steps over FastGemm::kMinTokens tokens whose outputs are all quantized tiled matrices (Q4_K,
// Q6_K, Q8_0) with an f16 copy under the cap. Decode-sized steps, F16/BF16 (faster on the
// canonical wgmma kernel), ggml-layout and F32 weights stay canonical. Host-only: runs in the
// cuda preset without a GPU (scripts/test.sh).
#include <gtest/gtest.h>

#include <vector>

#include "backend/cuda/fast_gemm.h"

namespace memra {
namespace {

using cuda::FastGemm;
using kernels::MatmulOut;
using kernels::WeightLayout;

MatmulOut out(DType dtype, WeightLayout layout, int64_t n_out = 4096) {
  return {dtype, nullptr, n_out, nullptr, n_out, layout};
}

bool takes(const std::vector<MatmulOut>& outs, int64_t n_tokens, int64_t n_in = 4096) {
  return FastGemm::takes(outs.data(), static_cast<int>(outs.size()), n_in, n_tokens);
}

TEST(FastGemmPolicy, QuantizedTiledStepsOverTheDecodeRange) {
  const int64_t edge = FastGemm::kMinTokens;
  for (DType d : {DType::q4_k, DType::q6_k, DType::q8_0}) {
    EXPECT_TRUE(takes({out(d, WeightLayout::tiled)}, edge + 1)) << dtype_name(d);
    EXPECT_TRUE(takes({out(d, WeightLayout::tiled)}, 2048)) << dtype_name(d);
    EXPECT_FALSE(takes({out(d, WeightLayout::tiled)}, edge)) << dtype_name(d);
    EXPECT_FALSE(takes({out(d, WeightLayout::tiled)}, 1)) << dtype_name(d);
    EXPECT_FALSE(takes({out(d, WeightLayout::ggml)}, 512)) << dtype_name(d);
  }
}

TEST(FastGemmPolicy, HalfPrecisionAndF32StayCanonical) {
  for (DType d : {DType::f16, DType::bf16})
    EXPECT_FALSE(takes({out(d, WeightLayout::tiled)}, 512)) << dtype_name(d);
  EXPECT_FALSE(takes({out(DType::f32, WeightLayout::ggml)}, 512));
  // One output the path does not take keeps the whole shared-x call canonical.
  EXPECT_FALSE(
      takes({out(DType::q4_k, WeightLayout::tiled), out(DType::bf16, WeightLayout::tiled)}, 512));
  EXPECT_TRUE(
      takes({out(DType::q4_k, WeightLayout::tiled), out(DType::q6_k, WeightLayout::tiled)}, 512));
}

TEST(FastGemmPolicy, TheCopyIsSizedForTheLargestOutputAndCapped) {
  const std::vector<MatmulOut> qkv = {out(DType::q4_k, WeightLayout::tiled, 4096),
                                      out(DType::q4_k, WeightLayout::tiled, 1024),
                                      out(DType::q6_k, WeightLayout::tiled, 1024)};
  EXPECT_EQ(FastGemm::copy_bytes(qkv.data(), 3, 4096), size_t{4096} * 4096 * 2);
  // An output matrix of 151,936 x 4,096 needs a 1.24 GB copy, over the cap: canonical.
  const int64_t vocab = 151936;
  ASSERT_GT(size_t(vocab) * 4096 * 2, FastGemm::kMaxCopyBytes);
  EXPECT_FALSE(takes({out(DType::q6_k, WeightLayout::tiled, vocab)}, 512));
}

}  // namespace
}  // namespace memra
