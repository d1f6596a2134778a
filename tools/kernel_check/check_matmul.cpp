// matmul for every weight dtype matmul_supports() accepts, against a double reference on the
// CPU-dequantized weights (quant::dequantize_row). Weights are random floats quantized with
// quant::quantize_row, or random valid blocks for types without a quantizer. Tolerance, as
// max |gpu - ref| / max |ref| over the output (per token row for the wide-range x cases): 1e-3
// for non-f32 weights (f16 activations on tensor cores), 1e-5 for F32 weights and for F16 / BF16
// weights whose n_in is no multiple of 16 (the exact FFMA path). Also: a token row alone == the
// same row in a 300-token call, bit for bit; with ldy > n_out the padding columns stay untouched.
#include <cmath>
#include <cstring>
#include <memory>
#include <string>

#include "backend/cuda/side_stream.h"
#include "check.h"
#include "core/half.h"
#include "formats/quant.h"
#include "kernels/kernels.h"

namespace memra::kernel_check {

namespace {

// F32 weights, and F16 / BF16 weights whose n_in is no multiple of 16, run an exact f32 FFMA path
// (kernels.h); every other case multiplies exact weights (integer quants, f16 values) by x
// rounded to f16 after a per-row power-of-two scaling, so the error is x's f16 rounding (2^-12
// relative per element): bf16 activations (2^-9) would exceed 1e-3.
bool exact_k_path(DType dtype, int64_t n_in) {
  return dtype == DType::f32 || ((dtype == DType::f16 || dtype == DType::bf16) && n_in % 16 != 0);
}
double matmul_tol(DType dtype, int64_t n_in) {
  return exact_k_path(dtype, n_in) ? 1e-5 : 1e-3;
}

// Offsets of the f16 scale fields in one block of the types without a quantizer, which a
// random block must hold as small finite values (random bytes elsewhere are valid quants).
std::vector<int> scale_offsets(DType dtype) {
  switch (dtype) {
    case DType::q2_k:
      return {80, 82};
    case DType::q3_k:
      return {108};
    case DType::iq4_nl:
      return {0};
    case DType::iq4_xs:
      return {0};
    default:
      return {};
  }
}

// Byte of each block (element, for plain types) whose bit 6 is the top exponent bit of its
// scale (or value): flipping it in every block of row 0 wrecks output column 0 (--teeth).
int scale_high_byte(DType dtype) {
  switch (dtype) {
    case DType::f32:
      return 3;
    case DType::q2_k:
      return 81;
    case DType::q3_k:
      return 109;
    case DType::q6_k:
      return 209;
    default:
      return 1;  // f16/bf16 values and every other type's leading f16 d
  }
}

}  // namespace

std::vector<uint8_t> gpu_weights(Context& ctx, DType dtype, const std::vector<uint8_t>& w,
                                 int64_t n_out) {
  std::vector<uint8_t> gpu_w = w;
  if (ctx.teeth()) {
    const int64_t type_size = dtype_traits(dtype).type_size;
    const uint64_t row_bytes = w.size() / n_out;
    for (uint64_t off = 0; off < row_bytes; off += type_size)
      gpu_w[off + scale_high_byte(dtype)] ^= 0x40;
  }
  return gpu_w;
}

std::vector<uint8_t> random_weights(Context& ctx, DType dtype, int64_t n_in, int64_t n_out) {
  const uint64_t row_bytes = dtype_row_bytes(dtype, n_in, "matmul weight");
  std::vector<uint8_t> w(n_out * row_bytes);
  if (quant::can_quantize(dtype)) {
    // The values are drawn in row order (the seed's sequence), then quantized on every core: the
    // K-quant searches take 30-80 ns an element, and the model-shape cases quantize ~370 million
    // (seconds a run on one core).
    const std::vector<float> values = ctx.uniform(static_cast<size_t>(n_out * n_in));
    parallel_for(n_out, [&](int64_t r) {
      quant::quantize_row(dtype, values.data() + r * n_in, w.data() + r * row_bytes, n_in);
    });
    return w;
  }
  for (uint8_t& b : w) b = static_cast<uint8_t>(ctx.rng()());
  const int64_t type_size = dtype_traits(dtype).type_size;
  for (size_t off = 0; off < w.size(); off += type_size) {
    for (int field : scale_offsets(dtype)) {
      const uint16_t h = f32_to_f16(ctx.uniform(1, 1e-3f, 2e-2f)[0]);
      std::memcpy(w.data() + off + field, &h, 2);
    }
  }
  return w;
}

std::vector<float> wide_range_x(Context& ctx, int64_t n_tokens, int64_t n_in) {
  std::vector<float> x = ctx.uniform(n_tokens * n_in);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const float s = t == 0 ? 3e5f : std::ldexp(1.0f, static_cast<int>(t * 7 % 41) - 20);
    for (int64_t i = 0; i < n_in; ++i) x[t * n_in + i] *= s;
  }
  return x;
}

namespace {

// The tiled layout (kernels.h) of the same weights gives the ggml layout's outputs bit for bit
// (y: the ggml run's output, padding columns included). Teeth: one quant bit of the tiled copy
// flipped.
void check_tiled(Context& ctx, DType dtype, const Dev<uint8_t>& dw, int64_t n_in, int64_t n_out,
                 const Dev<float>& dx, int64_t n_tokens, int64_t ldy, const std::vector<float>& y,
                 const std::string& shape) {
  Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(dtype, n_in, n_out));
  kernels::matmul_tile(dtype, dw.get(), n_in, n_out, tiled.get(), ctx.stream());
  if (ctx.teeth()) {
    std::vector<uint8_t> bytes = tiled.download(ctx);
    // The low bit of each of the first record's first 512 bytes: quants (or F16 values) of
    // several rows. Not row 0 alone: the main teeth already break row 0's scales, and an
    // infinite row compares equal whatever else changes in it.
    for (size_t i = 0; i < 512 && i < bytes.size(); ++i) bytes[i] ^= 0x01;
    tiled.upload(ctx, bytes);
  }
  Dev<float> dy(n_tokens * ldy);
  Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(n_tokens, n_in));
  dy.poison(ctx);
  kernels::matmul(dtype, tiled.get(), n_in, n_out, dx.get(), n_tokens, dy.get(), ldy, scratch.get(),
                  ctx.stream(), kernels::WeightLayout::tiled);
  ctx.sync();
  const std::vector<float> got = dy.download(ctx);
  // NaN padding compares equal bit for bit; an unwritten element differs from the ggml output.
  ctx.add({"matmul tiled", shape + " vs ggml layout", std::string(dtype_name(dtype)), "bits",
           bit_mismatches(got, y), 0.0, ctx.teeth() ? "quant bits of the tiled copy flipped" : ""});
}

void check_one(Context& ctx, DType dtype, int64_t n_in, int64_t n_out, int64_t n_tokens,
               int64_t ldy, bool wide_range = false) {
  const std::vector<uint8_t> w = random_weights(ctx, dtype, n_in, n_out);
  const uint64_t row_bytes = w.size() / n_out;
  const std::vector<uint8_t> gpu_w = gpu_weights(ctx, dtype, w, n_out);
  const std::vector<float> x =
      wide_range ? wide_range_x(ctx, n_tokens, n_in) : ctx.uniform(n_tokens * n_in);
  Dev<uint8_t> dw(ctx, gpu_w);
  Dev<float> dx(ctx, x), dy(n_tokens * ldy);
  Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(n_tokens, n_in));
  dy.poison(ctx);
  kernels::matmul(dtype, dw.get(), n_in, n_out, dx.get(), n_tokens, dy.get(), ldy, scratch.get(),
                  ctx.stream());
  ctx.sync();
  const std::vector<float> y = dy.download(ctx);
  std::vector<float> row(n_in);
  std::vector<double> ref(n_tokens * n_out);
  std::vector<float> got(n_tokens * n_out);
  double untouched_bad = 0;
  for (int64_t o = 0; o < n_out; ++o) {
    quant::dequantize_row(dtype, w.data() + o * row_bytes, row.data(), n_in);
    for (int64_t t = 0; t < n_tokens; ++t) {
      double acc = 0;
      const float* xt = x.data() + t * n_in;
      for (int64_t i = 0; i < n_in; ++i) acc += double{row[i]} * xt[i];
      ref[t * n_out + o] = acc;
      got[t * n_out + o] = y[t * ldy + o];
    }
  }
  for (int64_t t = 0; t < n_tokens; ++t)
    for (int64_t c = n_out; c < ldy; ++c) untouched_bad += !std::isnan(y[t * ldy + c]);
  // Wide-range rows are judged each against its own largest output.
  double err = 0;
  if (untouched_bad > 0) {
    err = INFINITY;
  } else if (!wide_range) {
    err = rel_max_error(got, ref);
  } else {
    err = row_rel_max_error(got, ref, n_out);
  }
  std::string shape = shape_str({n_tokens, n_in, n_out});
  if (ldy != n_out) shape += " ldy " + std::to_string(ldy);
  if (wide_range) shape += " x rows 2^-20..3e5";
  ctx.add({"matmul", shape, std::string(dtype_name(dtype)), "rel-max", err, matmul_tol(dtype, n_in),
           ctx.teeth() ? "scale exponent flipped in row 0 on the GPU" : ""});
  if (kernels::matmul_tiled_supports(dtype, n_in))
    check_tiled(ctx, dtype, dw, n_in, n_out, dx, n_tokens, ldy, y, shape);
}

// Row r of a call == the row alone (the one-token kernels), bit for bit: in 300 tokens (the
// prefill kernels), 40 (the batched decode kernels) and 13 (their two-token-tile form; its row r is
// 9); tiled weights also in 24 (on sm_90a the cluster kernel where K >= 4,096). The engine's
// determinism tests run fixtures too small for the tiled layout, so its kernels are held to the row
// alone here.
void check_invariance(Context& ctx, DType dtype, int64_t n_in, int64_t n_out,
                      kernels::WeightLayout layout = kernels::WeightLayout::ggml) {
  const bool tiled = layout == kernels::WeightLayout::tiled;
  const int64_t n_max = 300;
  const std::vector<uint8_t> w = random_weights(ctx, dtype, n_in, n_out);
  const std::vector<float> x = ctx.uniform(n_max * n_in);
  Dev<uint8_t> dw(ctx, w), dwt(tiled ? kernels::matmul_tiled_bytes(dtype, n_in, n_out) : 0);
  if (tiled) kernels::matmul_tile(dtype, dw.get(), n_in, n_out, dwt.get(), ctx.stream());
  const void* weights = tiled ? dwt.get() : dw.get();
  Dev<float> dx(ctx, x), dy(n_max * n_out), dy1(n_out);
  Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(n_max, n_in));
  // Row r of x alone (teeth: 1% off in one element).
  auto alone = [&](int64_t r) {
    std::vector<float> x1(x.begin() + r * n_in, x.begin() + (r + 1) * n_in);
    if (ctx.teeth()) x1[0] *= 1.01f;
    Dev<float> dx1(ctx, x1);
    dy1.poison(ctx);
    kernels::matmul(dtype, weights, n_in, n_out, dx1.get(), 1, dy1.get(), n_out, scratch.get(),
                    ctx.stream(), layout);
    ctx.sync();
    return dy1.download(ctx);
  };
  const std::vector<float> alone17 = alone(17), alone9 = alone(9);
  std::vector<int64_t> counts = {n_max, 40, 13};
  if (tiled) counts.push_back(24);
  for (int64_t n_tokens : counts) {
    const int64_t r = n_tokens > 17 ? 17 : 9;
    const std::vector<float>& lone = r == 17 ? alone17 : alone9;
    dy.poison(ctx);
    kernels::matmul(dtype, weights, n_in, n_out, dx.get(), n_tokens, dy.get(), n_out, scratch.get(),
                    ctx.stream(), layout);
    ctx.sync();
    const std::vector<float> all = dy.download(ctx);
    const std::vector<float> row(all.begin() + r * n_out, all.begin() + (r + 1) * n_out);
    ctx.add(
        {"matmul invariance",
         std::string(tiled ? "tiled " : "") + "row alone vs " + shape_str({n_tokens, n_in, n_out}),
         std::string(dtype_name(dtype)), "bits", bit_mismatches(row, lone), 0.0,
         ctx.teeth() ? "the lone row's x 1% off in one element" : ""});
  }
}

// Tiled vs ggml layout at the Qwen3-0.6B / 8B matrix shapes (bits only: the ggml kernels are
// checked against the reference above), for decode, batched decode and prefill token counts (8:
// one token tile, whose K-quant blocks take the ahead form on the 8B's down projection under
// MEMRA_TILED_AHEAD=2, and from 16 chunks a row under =all; the pair form on the widest shapes).
// BF16 too: at 256 tokens its 1,024 x 40,004 matrix is 626 tiles of the wgmma kernel, which its
// persistent grid walks several a block on an H200 (partial last row block included), against the
// ggml layout's mma.sync kernel.
void check_tiled_model_shapes(Context& ctx) {
  struct Shape {
    int64_t n_in, n_out;
  };
  // 1,024 x 40,004 and 65,552 at 8 tokens: 2,501 and 4,097 row tiles, over the pair form's
  // default thresholds (Q6_K and Q8_0 from 1,024 tiles, Q4_K from 4,096; an odd count leaves the
  // last block one tile). 256 x 520 and 1,280 x 1,000: one chunk and five, partial 64- and
  // 128-row blocks, for the split forms at 40 and 64 tokens (by default; MEMRA_FOLD64_SPLIT=0 and
  // MEMRA_SCALED_DECODE=0 turn off Q4_K's pipelined one and Q6_K's and Q8_0's scaled one: two
  // warpgroups take the chunks in turn, so an odd count ends on the first, and one chunk leaves
  // the second none).
  const Shape shapes[] = {{1024, 2048}, {1024, 3072},  {3072, 1024}, {1024, 40004}, {1024, 65552},
                          {4096, 6144}, {12288, 4096}, {256, 520},   {1280, 1000}};
  for (DType dtype : {DType::q4_k, DType::q6_k, DType::q8_0, DType::bf16}) {
    for (const Shape& s : shapes) {
      const std::vector<uint8_t> w = random_weights(ctx, dtype, s.n_in, s.n_out);
      Dev<uint8_t> dw(ctx, w);
      for (int64_t n_tokens : {int64_t{1}, int64_t{8}, int64_t{16}, int64_t{20}, int64_t{40},
                               int64_t{64}, int64_t{256}}) {
        const std::vector<float> x = ctx.uniform(n_tokens * s.n_in);
        Dev<float> dx(ctx, x), dy(n_tokens * s.n_out);
        Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(n_tokens, s.n_in));
        dy.poison(ctx);
        kernels::matmul(dtype, dw.get(), s.n_in, s.n_out, dx.get(), n_tokens, dy.get(), s.n_out,
                        scratch.get(), ctx.stream());
        ctx.sync();
        check_tiled(ctx, dtype, dw, s.n_in, s.n_out, dx, n_tokens, s.n_out, dy.download(ctx),
                    shape_str({n_tokens, s.n_in, s.n_out}));
      }
    }
  }
}

// One matmul_shared_x call over several outputs == one matmul() per output, bit for bit, for each
// token count; x read x_offset floats past a 16-byte boundary. Teeth: one element of output
// teeth_out one ulp off.
struct SharedXCase {
  std::string name;  // the row's shape prefix
  int64_t n_in;
  std::vector<DType> types;
  std::vector<int64_t> outs_n;
  std::vector<kernels::WeightLayout> layouts;
  std::vector<int64_t> tokens;
  int64_t x_offset;
  int teeth_out;
  bool side = false;  // launches after the first on a second stream (kernels::SideStream)
};

void check_shared_x_case(Context& ctx, const SharedXCase& c) {
  const int n_outs = static_cast<int>(c.types.size());
  const std::unique_ptr<cuda::SideStreamOwner> side =
      c.side ? std::make_unique<cuda::SideStreamOwner>() : nullptr;
  for (int64_t n_tokens : c.tokens) {
    const std::vector<float> x = ctx.uniform(n_tokens * c.n_in + c.x_offset);
    Dev<float> dx(ctx, x);
    const float* xp = dx.get() + c.x_offset;
    Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(n_tokens, c.n_in));
    std::vector<Dev<uint8_t>> ws;
    std::vector<Dev<float>> shared, single;
    std::vector<kernels::MatmulOut> outs;
    for (int i = 0; i < n_outs; ++i) {
      ws.emplace_back(ctx, random_weights(ctx, c.types[i], c.n_in, c.outs_n[i]));
      if (c.layouts[i] == kernels::WeightLayout::tiled) {
        Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(c.types[i], c.n_in, c.outs_n[i]));
        kernels::matmul_tile(c.types[i], ws.back().get(), c.n_in, c.outs_n[i], tiled.get(),
                             ctx.stream());
        ctx.sync();
        ws.back() = std::move(tiled);
      }
      shared.emplace_back(n_tokens * c.outs_n[i]);
      single.emplace_back(n_tokens * c.outs_n[i]);
      shared.back().poison(ctx);
      single.back().poison(ctx);
    }
    for (int i = 0; i < n_outs; ++i)
      outs.push_back(
          {c.types[i], ws[i].get(), c.outs_n[i], shared[i].get(), c.outs_n[i], c.layouts[i]});
    kernels::matmul_shared_x(outs.data(), n_outs, c.n_in, xp, n_tokens, scratch.get(), ctx.stream(),
                             false, side ? side->get() : nullptr);
    for (int i = 0; i < n_outs; ++i)
      kernels::matmul(c.types[i], ws[i].get(), c.n_in, c.outs_n[i], xp, n_tokens, single[i].get(),
                      c.outs_n[i], scratch.get(), ctx.stream(), c.layouts[i]);
    ctx.sync();
    double bad = 0;
    for (int i = 0; i < n_outs; ++i) {
      std::vector<float> a = shared[i].download(ctx);
      if (ctx.teeth() && i == c.teeth_out) a[0] = std::nextafter(a[0], INFINITY);
      bad += bit_mismatches(a, single[i].download(ctx));
    }
    ctx.add({"matmul shared x", c.name + " " + shape_str({n_tokens, c.n_in}), "mixed", "bits", bad,
             0.0, ctx.teeth() ? "one output element one ulp off" : ""});
  }
}

// matmul_shared_x over outputs of different dtypes and layouts (one x conversion; on sm_90a the
// prefill batch needs x in both orders: the tiled BF16 output runs on the wgmma kernel), for a
// decode-sized and a prefill-sized batch.
void check_shared_x(Context& ctx) {
  using kernels::WeightLayout;
  check_shared_x_case(ctx, {"Q4_K+Q6_K+F32+BF16+BF16 tiled",
                            512,
                            {DType::q4_k, DType::q6_k, DType::f32, DType::bf16, DType::bf16},
                            {96, 40, 24, 64, 136},
                            {WeightLayout::ggml, WeightLayout::ggml, WeightLayout::ggml,
                             WeightLayout::ggml, WeightLayout::tiled},
                            {3, 77},
                            0,
                            0});
  // Tiled Q4_K outputs that take wgmma at 40 and 64 tokens (48 row blocks and more each): one
  // launch of the pipelined kernel per four of them (a partial last row block in two), beside a
  // Q6_K one on its own kernel.
  const WeightLayout t = WeightLayout::tiled;
  check_shared_x_case(
      ctx, {"5 x Q4_K+Q6_K tiled wgmma",
            1024,
            {DType::q4_k, DType::q4_k, DType::q6_k, DType::q4_k, DType::q4_k, DType::q4_k},
            {6144, 6200, 6144, 6144, 6160, 6144},
            {t, t, t, t, t, t},
            {40, 64},
            0,
            4});
  // Narrow Q4_K outputs at 40 and 64 tokens (16 row blocks of 128 together): by default the split
  // form's one launch, its 64-row blocks counted per output, over five chunks (partial last blocks
  // in all three), beside a Q6_K one (the scaled kernel's split form; each off under
  // MEMRA_FOLD64_SPLIT=0 / MEMRA_SCALED_DECODE=0); and handed a second stream, which the Q6_K
  // launch takes by default (MEMRA_DECODE_SIDE_STREAM, matmul.cu).
  for (const bool side : {false, true}) {
    check_shared_x_case(
        ctx, {std::string("3 x Q4_K+Q6_K tiled narrow wgmma") + (side ? ", side stream" : ""),
              1280,
              {DType::q4_k, DType::q6_k, DType::q4_k, DType::q4_k},
              {1000, 264, 264, 520},
              {t, t, t, t},
              {40, 64},
              0,
              2,
              side});
  }
  // A q/k/v-like call at 20 and 32 tokens over K = 4,096 (the cluster decode kernel's outputs,
  // one launch each, partial last row blocks), on one stream and handed a second one, which the
  // launches after the first take by default (MEMRA_DECODE_SIDE_SMALL, matmul.cu).
  for (const bool side : {false, true}) {
    check_shared_x_case(
        ctx, {std::string("2 x Q4_K+Q6_K tiled 17-32 tokens") + (side ? ", side stream" : ""),
              4096,
              {DType::q4_k, DType::q4_k, DType::q6_k},
              {1000, 264, 264},
              {t, t, t},
              {20, 32},
              0,
              2,
              side});
  }
  // Narrow Q6_K and Q8_0 outputs at 40 and 64 tokens: unless MEMRA_SCALED_DECODE=0 one launch of
  // the scaled kernel's split form per dtype (two outputs each), over five chunks.
  check_shared_x_case(ctx, {"2 x Q6_K+2 x Q8_0 tiled narrow wgmma",
                            1280,
                            {DType::q6_k, DType::q8_0, DType::q6_k, DType::q8_0},
                            {264, 1000, 520, 136},
                            {t, t, t, t},
                            {40, 64},
                            0,
                            2});
  // Prefill steps (77 and 300 tokens): tiled outputs of one dtype on the BF16 wgmma kernel, the
  // warp-specialized Q4_K one and the scaled Q6_K / Q8_0 one share launches (four at most: five
  // Q4_K ones take two), partial last row and token blocks included; on one stream, and with the
  // launches after the first on a second one (kernels::SideStream), as the CUDA backend's prefill
  // steps run them.
  for (const bool side : {false, true}) {
    check_shared_x_case(
        ctx, {std::string("5 x Q4_K+2 x Q6_K+2 x Q8_0+2 x BF16 tiled prefill") +
                  (side ? ", side stream" : ""),
              1024,
              {DType::q4_k, DType::q6_k, DType::q4_k, DType::q8_0, DType::bf16, DType::q4_k,
               DType::q6_k, DType::q4_k, DType::q8_0, DType::bf16, DType::q4_k},
              {1000, 264, 200, 520, 136, 72, 136, 256, 128, 392, 384},
              {t, t, t, t, t, t, t, t, t, t, t},
              {77, 300},
              0,
              5,
              side});
  }
}

// Several tiled outputs of one x in one matmul_shared_x call (1, 5, 8, 12 tokens: the one-token
// kernel for K-quants, the tiled decode kernel's one-launch groups of one and of two token tiles,
// a partial last tile) == each weight alone in the ggml layout (the ggml decode kernels), bit for
// bit: K-quants, and F16/BF16 (the q/k/v and gate/up groups of a BF16 model). n_in: 1,024 (4
// chunks a row), or 4,352 (17: two or three a warp, the grouped launches' ahead form under
// MEMRA_TILED_AHEAD=all).
void check_tiled_shared_x(Context& ctx, const std::vector<DType>& types,
                          const std::vector<int64_t>& outs_n, int64_t n_in = 1024) {
  const int kOuts = static_cast<int>(types.size());
  std::string name;
  for (DType t : types) {
    if (!name.empty()) name += '+';
    name += dtype_name(t);
  }
  for (int64_t n_tokens : {int64_t{1}, int64_t{5}, int64_t{8}, int64_t{12}}) {
    const std::vector<float> x = ctx.uniform(n_tokens * n_in);
    Dev<float> dx(ctx, x);
    Dev<uint8_t> scratch(kernels::matmul_scratch_bytes(n_tokens, n_in));
    std::vector<Dev<uint8_t>> ggml, tiled;
    std::vector<Dev<float>> got, want;
    std::vector<kernels::MatmulOut> outs;
    for (int i = 0; i < kOuts; ++i) {
      ggml.emplace_back(ctx, random_weights(ctx, types[i], n_in, outs_n[i]));
      tiled.emplace_back(kernels::matmul_tiled_bytes(types[i], n_in, outs_n[i]));
      kernels::matmul_tile(types[i], ggml.back().get(), n_in, outs_n[i], tiled.back().get(),
                           ctx.stream());
      if (ctx.teeth() && i == 2) {  // bits of the third output's first record
        std::vector<uint8_t> bytes = tiled.back().download(ctx);
        for (size_t b = 0; b < 512; ++b) bytes[b] ^= 0x01;
        tiled.back().upload(ctx, bytes);
      }
      got.emplace_back(n_tokens * outs_n[i]);
      want.emplace_back(n_tokens * outs_n[i]);
      got.back().poison(ctx);
      want.back().poison(ctx);
    }
    for (int i = 0; i < kOuts; ++i)
      outs.push_back({types[i], tiled[i].get(), outs_n[i], got[i].get(), outs_n[i],
                      kernels::WeightLayout::tiled});
    kernels::matmul_shared_x(outs.data(), kOuts, n_in, dx.get(), n_tokens, scratch.get(),
                             ctx.stream());
    for (int i = 0; i < kOuts; ++i)
      kernels::matmul(types[i], ggml[i].get(), n_in, outs_n[i], dx.get(), n_tokens, want[i].get(),
                      outs_n[i], scratch.get(), ctx.stream());
    ctx.sync();
    double bad = 0;
    for (int i = 0; i < kOuts; ++i)
      bad += bit_mismatches(got[i].download(ctx), want[i].download(ctx));
    ctx.add({"matmul tiled shared x", name + " tiled " + shape_str({n_tokens, n_in}), "mixed",
             "bits", bad, 0.0, ctx.teeth() ? "bits flipped in one tiled record" : ""});
  }
}

// rms_norm_for_matmul (a decode step's norm that also prepares the next products' input) == the
// norm kernel then matmul_shared_x preparing y itself: y and every output bit for bit, for
// add_rms_norm and rms_norm, tiled and ggml-layout outputs. Dim 1024 and 5120 take the norm's
// register form of 4 and of 8 chunks a thread (kernels/elementwise/norm_row.cuh), 12288 and
// 21504 its loop form; the products' own preparation takes x_to_f16's register form of 1, 1, 2
// and 3 groups a thread (kernels/matmul/prepare_x.cuh), the norm's the loop form of row_to_f16.
void check_norm_for_matmul(Context& ctx, int64_t dim) {
  constexpr int kOuts = 3;
  const DType types[kOuts] = {DType::q4_k, DType::q6_k, DType::bf16};
  const int64_t outs_n[kOuts] = {160, 48, 64};
  const kernels::WeightLayout layouts[kOuts] = {
      kernels::WeightLayout::tiled, kernels::WeightLayout::ggml, kernels::WeightLayout::tiled};
  std::vector<Dev<uint8_t>> ws;
  for (int i = 0; i < kOuts; ++i) {
    ws.emplace_back(ctx, random_weights(ctx, types[i], dim, outs_n[i]));
    if (layouts[i] == kernels::WeightLayout::tiled) {
      Dev<uint8_t> tiled(kernels::matmul_tiled_bytes(types[i], dim, outs_n[i]));
      kernels::matmul_tile(types[i], ws.back().get(), dim, outs_n[i], tiled.get(), ctx.stream());
      ctx.sync();
      ws.back() = std::move(tiled);
    }
  }
  const std::vector<float> w = ctx.uniform(dim, 0.5f, 1.5f);
  Dev<float> dw(ctx, w);
  for (int64_t rows : {int64_t{1}, int64_t{5}, kernels::kPreparedRows}) {
    for (bool residual : {true, false}) {
      const std::vector<float> x = ctx.uniform(rows * dim), d = ctx.uniform(rows * dim);
      Dev<float> x1(ctx, x), x2(ctx, x), dd(ctx, d), y1(rows * dim), y2(rows * dim);
      Dev<uint8_t> s1(kernels::matmul_scratch_bytes(rows, dim)),
          s2(kernels::matmul_scratch_bytes(rows, dim));
      std::vector<Dev<float>> o1, o2;
      std::vector<kernels::MatmulOut> m1, m2;
      for (int i = 0; i < kOuts; ++i) {
        o1.emplace_back(rows * outs_n[i]);
        o2.emplace_back(rows * outs_n[i]);
        o1.back().poison(ctx);
        o2.back().poison(ctx);
        m1.push_back({types[i], ws[i].get(), outs_n[i], o1[i].get(), outs_n[i], layouts[i]});
        m2.push_back({types[i], ws[i].get(), outs_n[i], o2[i].get(), outs_n[i], layouts[i]});
      }
      const float eps = 1e-6f, fused_eps = ctx.teeth() ? 1e-3f : eps;
      if (residual)
        kernels::add_rms_norm(x1.get(), dd.get(), dw.get(), rows, dim, eps, y1.get(), ctx.stream());
      else
        kernels::rms_norm(x1.get(), dw.get(), rows, dim, eps, y1.get(), ctx.stream());
      kernels::matmul_shared_x(m1.data(), kOuts, dim, y1.get(), rows, s1.get(), ctx.stream());
      kernels::rms_norm_for_matmul(x2.get(), residual ? dd.get() : nullptr, dw.get(), rows, dim,
                                   fused_eps, y2.get(), s2.get(), ctx.stream());
      kernels::matmul_shared_x(m2.data(), kOuts, dim, y2.get(), rows, s2.get(), ctx.stream(), true);
      ctx.sync();
      double bad = bit_mismatches(y2.download(ctx), y1.download(ctx)) +
                   bit_mismatches(x2.download(ctx), x1.download(ctx));
      for (int i = 0; i < kOuts; ++i)
        bad += bit_mismatches(o2[i].download(ctx), o1[i].download(ctx));
      ctx.add({"matmul norm-prepared x",
               std::string(residual ? "add_rms_norm " : "rms_norm ") + shape_str({rows, dim}) +
                   " Q4_K tiled+Q6_K+BF16 tiled",
               "mixed", "bits", bad, 0.0, ctx.teeth() ? "eps 1e-3 in the fused norm" : ""});
    }
  }
}

// Several exact-path outputs (n_in 24: F32, F16, BF16, BF16) sharing x in one matmul_shared_x
// call, with x at an address that is no multiple of 16 (the exact path reads x and w element by
// element and needs no alignment).
void check_exact_k_shared_x(Context& ctx) {
  const auto ggml = kernels::WeightLayout::ggml;
  check_shared_x_case(ctx, {"exact K F32+F16+BF16+BF16",
                            24,
                            {DType::f32, DType::f16, DType::bf16, DType::bf16},
                            {7, 33, 1, 96},
                            {ggml, ggml, ggml, ggml},
                            {1, 70},
                            1,
                            1});
}

// The exact path for n_in no multiple of 16 (the gemma4 fixture's 8-wide per-layer input, the
// qwen3_5_moe fixture's 24-wide shared expert): against the double reference at F32's tolerance
// for 1 to 300 tokens (one kernel serves every token count), odd n_out, ldy > n_out, wide-range x
// rows; a row alone == the same row in a 40- and a 300-token call, bit for bit.
void check_exact_k(Context& ctx) {
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    check_one(ctx, dtype, 1, 7, 1, 7);
    check_one(ctx, dtype, 8, 1, 5, 1);
    check_one(ctx, dtype, 8, 96, 1, 96);
    check_one(ctx, dtype, 24, 96, 9, 96);
    check_one(ctx, dtype, 24, 33, 70, 33 + 3);  // ldy > n_out: padding must stay poisoned
    check_one(ctx, dtype, 40, 13, 300, 13);
    check_one(ctx, dtype, 72, 33, 6, 33, true);
    check_invariance(ctx, dtype, 1, 5);
    check_invariance(ctx, dtype, 8, 96);
    check_invariance(ctx, dtype, 24, 33);
  }
  // Gemma 4 26B-A4B's router (F32, 2816 -> 128): one token's weights in batches of 32 a lane,
  // four tokens' in 8, a partial last batch either way.
  check_invariance(ctx, DType::f32, 2816, 128);
  check_exact_k_shared_x(ctx);
}

}  // namespace

void check_matmul(Context& ctx) {
  if (!ctx.wants("matmul")) return;
  const DType candidates[] = {DType::f32,  DType::f16,  DType::bf16, DType::q8_0,   DType::q4_0,
                              DType::q4_1, DType::q5_0, DType::q5_1, DType::q2_k,   DType::q3_k,
                              DType::q4_k, DType::q5_k, DType::q6_k, DType::iq4_nl, DType::iq4_xs};
  for (DType dtype : candidates) {
    if (!kernels::matmul_supports(dtype)) continue;
    check_one(ctx, dtype, 256, 64, 1, 64);
    check_one(ctx, dtype, 1024, 200, 3, 200);
    check_one(ctx, dtype, 4096 + 256, 130, 8, 130);
    check_one(ctx, dtype, 1024, 96, 37, 96 + 5);  // ldy > n_out: padding must stay poisoned
    check_one(ctx, dtype, 256, 333, 300, 333);
    check_one(ctx, dtype, 512, 96, 6, 96, true);   // decode kernel
    check_one(ctx, dtype, 512, 96, 41, 96, true);  // batched decode kernel
    check_one(ctx, dtype, 768, 80, 24,
              80);  // 17-32 tokens (tiled: the decode kernel's token groups)
    check_one(ctx, dtype, 768, 80, 13, 80);        // 9-16 tokens (tiled: two token tiles a block)
    check_one(ctx, dtype, 512, 96, 70, 96, true);  // prefill kernel
    check_one(ctx, dtype, 1024 + 256, 70, 64, 70);
    check_invariance(ctx, dtype, 1024, 160);
  }
  check_exact_k(ctx);
  check_shared_x(ctx);
  check_tiled_shared_x(
      ctx, {DType::q4_k, DType::q6_k, DType::q4_k, DType::q8_0, DType::q4_k, DType::q6_k},
      {304, 80, 48, 33, 16, 1000});
  // A BF16 layer's q, k, v (two groups of one launch each: BF16 q/k/v, then F16), a partial tile.
  check_tiled_shared_x(ctx, {DType::bf16, DType::bf16, DType::bf16, DType::f16, DType::f16},
                       {256, 64, 64, 40, 136});
  // Long rows: each K-quant pair one grouped launch of 17 chunks a row.
  check_tiled_shared_x(
      ctx, {DType::q4_k, DType::q4_k, DType::q6_k, DType::q6_k, DType::q8_0, DType::q8_0},
      {64, 48, 32, 16, 32, 48}, 4096 + 256);
  for (int64_t dim : {1024, 5120, 12288, 21504}) check_norm_for_matmul(ctx, dim);
  check_matmul_row_max(ctx);
  check_tiled_model_shapes(ctx);
  // K 1,024 for the tiled kernels' token tiles and groups; K 4,096 for the cluster decode kernel,
  // which takes 17-32 tokens only from that K on (matmul_decode_cluster.cu).
  for (DType dtype : {DType::q4_k, DType::q6_k, DType::q8_0, DType::f16, DType::bf16}) {
    check_invariance(ctx, dtype, 1024, 160, kernels::WeightLayout::tiled);
    check_invariance(ctx, dtype, 4096, 48, kernels::WeightLayout::tiled);
  }
}

}  // namespace memra::kernel_check
