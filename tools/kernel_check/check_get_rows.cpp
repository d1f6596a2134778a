// get_rows for every dtype it supports, bit-exact against memra's CPU dequantizer
// (quant::dequantize_row) times the scale. Tables are random floats quantized with
// quant::quantize_row. --teeth flips one byte of a gathered row in the GPU's copy only.
#include "check.h"
#include "core/dtype.h"
#include "formats/quant.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

void check_one(Context& ctx, DType dtype, int64_t n_vocab, int64_t n_cols, int64_t n_ids,
               float scale) {
  const uint64_t row_bytes = dtype_row_bytes(dtype, n_cols, "get_rows table");
  std::vector<uint8_t> table(n_vocab * row_bytes);
  for (int64_t r = 0; r < n_vocab; ++r) {
    const std::vector<float> values = ctx.uniform(n_cols);
    quant::quantize_row(dtype, values.data(), table.data() + r * row_bytes, n_cols);
  }
  std::vector<int32_t> ids(n_ids);
  for (int32_t& id : ids) id = ctx.randint(0, static_cast<int32_t>(n_vocab - 1));
  std::vector<uint8_t> gpu_table = table;
  if (ctx.teeth()) {
    // The last byte of the row's first block: a quant byte (legacy, Q4_K, Q5_K), the scale's
    // high byte (Q6_K) or a value's sign/exponent byte (F32/F16/BF16).
    gpu_table[ids[0] * row_bytes + dtype_traits(dtype).type_size - 1] ^= 0x5a;
  }
  Dev<uint8_t> dtable(ctx, gpu_table);
  Dev<int32_t> dids(ctx, ids);
  Dev<float> dout(n_ids * n_cols);
  dout.poison(ctx);
  kernels::get_rows(dtype, dtable.get(), n_cols, dids.get(), n_ids, scale, dout.get(),
                    ctx.stream());
  ctx.sync();
  std::vector<float> ref(n_ids * n_cols);
  for (int64_t r = 0; r < n_ids; ++r) {
    float* out = ref.data() + r * n_cols;
    quant::dequantize_row(dtype, table.data() + ids[r] * row_bytes, out, n_cols);
    for (int64_t c = 0; c < n_cols; ++c) out[c] *= scale;
  }
  ctx.add({"get_rows", shape_str({n_ids, n_cols}) + " of " + std::to_string(n_vocab),
           std::string(dtype_name(dtype)), "bits", bit_mismatches(dout.download(ctx), ref), 0.0,
           ctx.teeth() ? "one table byte flipped on the GPU" : ""});
}

}  // namespace

void check_get_rows(Context& ctx) {
  if (!ctx.wants("get_rows")) return;
  const DType types[] = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0,
                         DType::q4_0, DType::q4_1, DType::q5_0, DType::q5_1,
                         DType::q4_k, DType::q5_k, DType::q6_k};
  for (DType dtype : types) {
    const int64_t block = dtype_traits(dtype).block_size;
    check_one(ctx, dtype, 50, 256, 1, 1.0f);
    check_one(ctx, dtype, 301, block == 256 ? 2816 : 1056, 37, 45.254833f);  // sqrt(2048)
  }
}

}  // namespace memra::kernel_check
