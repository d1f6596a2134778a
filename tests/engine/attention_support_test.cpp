// Which head sizes and KV cache types the CUDA attention kernels take (kernels::
// attention_supports_head_dim, what the backend's attention_head_dim_supported reports so that a
// model is refused at load rather than at its first step): 16..256 with any cache type the CUDA
// backend keeps, 512 with F16, BF16 or F8_E4M3 only. Host-only: runs in the cuda preset without a
// GPU.
#include <gtest/gtest.h>

#include "kernels/kernels.h"

namespace memra {
namespace {

using kernels::attention_supports_head_dim;

TEST(AttentionSupport, HeadDimsUpTo256TakeEveryCacheType) {
  for (int d : {16, 32, 64, 128, 256})
    for (DType c : {DType::f32, DType::f16, DType::bf16, DType::f8_e4m3})
      EXPECT_TRUE(attention_supports_head_dim(d, c)) << d << " " << dtype_name(c);
}

TEST(AttentionSupport, HeadDim512TakesSixteenAndEightBitCachesOnly) {
  EXPECT_TRUE(attention_supports_head_dim(512, DType::f16));
  EXPECT_TRUE(attention_supports_head_dim(512, DType::bf16));
  EXPECT_TRUE(attention_supports_head_dim(512, DType::f8_e4m3));
  EXPECT_FALSE(attention_supports_head_dim(512, DType::f32));
}

TEST(AttentionSupport, OtherSizesAndCacheTypesAreRefused) {
  for (int d : {0, 8, 24, 48, 80, 96, 100, 192, 384, 1024})
    for (DType c : {DType::f32, DType::f16, DType::bf16, DType::f8_e4m3})
      EXPECT_FALSE(attention_supports_head_dim(d, c)) << d << " " << dtype_name(c);
  EXPECT_FALSE(attention_supports_head_dim(128, DType::q8_0));
  EXPECT_FALSE(attention_supports_head_dim(128, DType::u8));  // one byte, but no float type
}

}  // namespace
}  // namespace memra
