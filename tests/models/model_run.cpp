// Forward-only test harness: loads a model archive (GGUF file or HF folder), runs a prompt
// through Model::forward in prefill chunks over a paged KV cache, then decodes greedily, and
// prints JSON (logits, per-position argmax, greedy tokens, timings). Used by the model gates
// (tests/python/test_models_*.py) and for the CPU forward figures in docs/PERFORMANCE.md:
//   model_run --model FILE --tokens-file ids.json --chunk 64 --greedy 32 [--threads 2]
// Other flags: --reference (reference ops), --all-logits, --argmax (per prompt position),
// --trace (every named intermediate, to diff against a reference layer by layer), --routes-out /
// --routes-in (record an MoE model's routing, or run with a recorded one: the GPU gate pins the
// CUDA run to the CPU's routing), --forced-greedy FILE (teacher-forced decode: each decode step
// feeds the next token of this JSON list instead of its own argmax, so the decode path's logits
// follow another run's greedy trajectory; "greedy" still reports each step's own argmax),
// --perturb TENSOR (gate teeth), --block-size N (KV block size, default 16), --device D (cpu by
// default; cuda for the GPU model gates), --kv-dtype F32|F16|BF16|F8_E4M3 (fp8 is F8_E4M3; the
// CPU keeps F32 only), --logits-out FILE (with
// --all-logits: the rows as raw f32 instead of JSON, for real-sized vocabularies).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/env.h"
#include "core/error.h"
#include "core/half.h"
#include "engine/backend_select.h"
#include "formats/model_archive.h"
#include "models/model.h"

namespace memra {
namespace {

struct Options {
  std::string model;
  std::vector<int32_t> tokens;
  int chunk = 64;
  int greedy = 0;
  int threads = 0;
  int block_size = 16;
  bool reference = false;
  bool all_logits = false;     // logits of every prompt position and decode step
  bool argmax = false;         // argmax of every prompt position (teacher forcing)
  std::string perturb;         // teeth: tensor whose first element gets +1 (f32/f16/bf16 only)
  bool trace = false;          // per named intermediate: name, layer, shape, sum |x|, first values
  std::string device = "cpu";  // cpu | cuda | cuda:N | auto
  std::string kv_dtype;        // KV cache dtype name; empty = the backend's default
  std::string logits_out;      // --all-logits rows as raw little-endian f32 to this file
  std::string routes_out;      // every MoE layer's routing (logits, ids, weights) as JSON here
  std::string routes_in;       // ... read back: the run uses these instead of its own
  std::vector<int32_t> forced_greedy;  // --forced-greedy: decode feeds these, not its argmax
  bool forced = false;
};

std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  const nlohmann::json j = nlohmann::json::parse(text);
  const nlohmann::json& list = j.is_object() ? j.at("tokens") : j;
  for (const auto& v : list) ids.push_back(v.get<int32_t>());
  return ids;
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) fail(ErrorCode::invalid_argument, "{} needs a value", a);
      return argv[++i];
    };
    if (a == "--model")
      o.model = next();
    else if (a == "--tokens")
      o.tokens = parse_ids(next());
    else if (a == "--tokens-file") {
      std::ifstream in(next());
      o.tokens = parse_ids(std::string(std::istreambuf_iterator<char>(in), {}));
    } else if (a == "--chunk")
      o.chunk = std::stoi(next());
    else if (a == "--greedy")
      o.greedy = std::stoi(next());
    else if (a == "--threads")
      o.threads = std::stoi(next());
    else if (a == "--block-size")
      o.block_size = std::stoi(next());
    else if (a == "--reference")
      o.reference = true;
    else if (a == "--all-logits")
      o.all_logits = true;
    else if (a == "--argmax")
      o.argmax = true;
    else if (a == "--perturb")
      o.perturb = next();
    else if (a == "--trace")
      o.trace = true;
    else if (a == "--device")
      o.device = next();
    else if (a == "--kv-dtype")
      o.kv_dtype = next();
    else if (a == "--logits-out")
      o.logits_out = next();
    else if (a == "--routes-out")
      o.routes_out = next();
    else if (a == "--routes-in")
      o.routes_in = next();
    else if (a == "--forced-greedy") {
      std::ifstream in(next());
      o.forced_greedy = parse_ids(std::string(std::istreambuf_iterator<char>(in), {}));
      o.forced = true;
    } else
      fail(ErrorCode::invalid_argument, "unknown option {}", a);
  }
  if (o.model.empty() || o.tokens.empty())
    fail(ErrorCode::invalid_argument, "usage: model_run --model PATH --tokens JSON-LIST ...");
  if (o.chunk <= 0) fail(ErrorCode::invalid_argument, "--chunk must be positive");
  if (o.forced && static_cast<int>(o.forced_greedy.size()) < o.greedy - 1)
    fail(ErrorCode::invalid_argument, "--forced-greedy holds {} tokens, --greedy {} feeds {}",
         o.forced_greedy.size(), o.greedy, o.greedy - 1);
  return o;
}

// Teeth: replaces one tensor by a copy whose element 0 is increased by 1.
void perturb_tensor(ModelArchive& archive, const std::string& name) {
  for (TensorView& t : archive.tensors) {
    if (t.name != name) continue;
    auto copy = std::make_shared<std::vector<uint8_t>>(
        static_cast<const uint8_t*>(t.data), static_cast<const uint8_t*>(t.data) + t.n_bytes);
    uint8_t* p = copy->data();
    if (t.dtype == DType::f32) {
      float v;
      std::memcpy(&v, p, 4);
      v += 1.0f;
      std::memcpy(p, &v, 4);
    } else if (t.dtype == DType::bf16 || t.dtype == DType::f16) {
      uint16_t h;
      std::memcpy(&h, p, 2);
      h = t.dtype == DType::bf16 ? f32_to_bf16(bf16_to_f32(h) + 1.0f)
                                 : f32_to_f16(f16_to_f32(h) + 1.0f);
      std::memcpy(p, &h, 2);
    } else {
      fail(ErrorCode::unsupported, "--perturb supports f32/f16/bf16 tensors, {} is {}", name,
           dtype_name(t.dtype));
    }
    t.data = p;
    archive.keep_alive.push_back(copy);
    return;
  }
  fail(ErrorCode::not_found, "--perturb: no tensor {}", name);
}

int32_t argmax(const float* row, int64_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);
}

// Runs one sequence's tokens [begin, end) as a single forward step; returns logits of the
// requested rows (all rows, or the last) in `logits`.
void step(Model& model, KvCache& kv, const std::vector<int32_t>& seq_tokens, int32_t begin,
          int32_t end, bool all_rows, std::vector<float>& logits) {
  Batch batch;
  BatchSeq seq;
  seq.first_token = 0;
  seq.n_tokens = end - begin;
  seq.n_past = begin;
  seq.state_slot = kv.n_state_slots() > 0 ? 0 : -1;  // hybrid models: the one sequence's state
  const int32_t bs = kv.block_size();
  for (int32_t b = 0; b * bs < end; ++b) seq.block_table.push_back(b);
  for (int32_t p = begin; p < end; ++p) {
    batch.tokens.push_back(seq_tokens[p]);
    batch.positions.push_back(p);
    if (all_rows || p == end - 1) batch.logit_tokens.push_back(p - begin);
  }
  batch.seqs.push_back(seq);
  logits.assign(batch.logit_tokens.size() * static_cast<size_t>(model.info().n_vocab), 0.0f);
  model.forward(batch, kv, logits);
}

int run(const Options& o) {
  using clock = std::chrono::steady_clock;
  auto archive = std::make_shared<ModelArchive>(archive_open(o.model));
  if (!o.perturb.empty()) perturb_tensor(*archive, o.perturb);
  const auto t_load = clock::now();
  nlohmann::json trace = nlohmann::json::array();
  ModelLoadOptions load_options;
  // MEMRA_DETERMINISTIC=0: the fast, non-batch-invariant GPU prefill (the fast-mode model gate).
  load_options.ops =
      backend_select({o.device, o.threads, o.reference, env_switch("MEMRA_DETERMINISTIC", true)});
  if (!o.kv_dtype.empty()) {
    const auto kv = kv_dtype_from_name(o.kv_dtype);
    if (!kv) fail(ErrorCode::invalid_argument, "--kv-dtype {} is not a dtype name", o.kv_dtype);
    load_options.kv_dtype = *kv;
  }
  if (o.trace) {
    load_options.trace = [&trace](const TraceEvent& e) {
      const int64_t n = e.n_rows * e.n_cols;
      double sum_abs = 0;
      for (int64_t i = 0; i < n; ++i) sum_abs += std::fabs(e.data[i]);
      trace.push_back({{"name", e.name},
                       {"layer", e.layer},
                       {"shape", {e.n_rows, e.n_cols}},
                       {"sum_abs", sum_abs},
                       {"head", std::vector<float>(e.data, e.data + std::min<int64_t>(n, 8))}});
    };
  }
  // MoE routing: recorded per call in order (--routes-out), or replayed (--routes-in), each call
  // checked against the recording's layer and token count.
  nlohmann::json routes = nlohmann::json::array();
  size_t routes_next = 0;
  if (!o.routes_in.empty()) {
    std::ifstream in(o.routes_in);
    routes = nlohmann::json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
  }
  if (!o.routes_out.empty() || !o.routes_in.empty()) {
    load_options.moe_routes = [&](int layer, int64_t n, std::span<const float> logits,
                                  std::span<int32_t> ids, std::span<float> weights) {
      if (o.routes_in.empty()) {
        routes.push_back({{"layer", layer},
                          {"n", n},
                          {"logits", std::vector<float>(logits.begin(), logits.end())},
                          {"ids", std::vector<int32_t>(ids.begin(), ids.end())},
                          {"weights", std::vector<float>(weights.begin(), weights.end())}});
        return;
      }
      if (routes_next >= routes.size())
        fail(ErrorCode::invalid_argument, "--routes-in: {} routing calls recorded, more made",
             routes.size());
      const nlohmann::json& r = routes[routes_next++];
      const auto rid = r.at("ids").get<std::vector<int32_t>>();
      const auto rw = r.at("weights").get<std::vector<float>>();
      if (r.at("layer").get<int>() != layer || r.at("n").get<int64_t>() != n ||
          rid.size() != ids.size() || rw.size() != weights.size())
        fail(ErrorCode::invalid_argument,
             "--routes-in: call {} recorded layer {} with {} tokens, this run has layer {} with {}",
             routes_next - 1, r.at("layer").get<int>(), r.at("n").get<int64_t>(), layer, n);
      std::copy(rid.begin(), rid.end(), ids.begin());
      std::copy(rw.begin(), rw.end(), weights.begin());
    };
  }
  auto model = model_load(archive, load_options);
  const int64_t n_vocab = model->info().n_vocab;
  const int32_t total = static_cast<int32_t>(o.tokens.size()) + o.greedy;
  const int32_t n_blocks = (total + o.block_size - 1) / o.block_size;
  auto kv = model->kv_cache_create(n_blocks, o.block_size);
  std::vector<int32_t> seq = o.tokens;
  nlohmann::json out;
  out["architecture"] = model->info().architecture;
  out["device"] = model->info().device;
  out["n_vocab"] = n_vocab;
  nlohmann::json all_logits = nlohmann::json::array(), argmaxes = nlohmann::json::array();
  std::vector<float> logits;
  std::ofstream raw;
  if (!o.logits_out.empty()) raw.open(o.logits_out, std::ios::binary | std::ios::trunc);
  int64_t n_rows = 0;
  const auto keep_row = [&](const float* row) {
    ++n_rows;
    if (raw.is_open())
      raw.write(reinterpret_cast<const char*>(row), static_cast<std::streamsize>(n_vocab * 4));
    else
      all_logits.push_back(std::vector<float>(row, row + n_vocab));
  };
  const auto t_prefill = clock::now();
  const std::clock_t c_prefill = std::clock();
  const int32_t n_prompt = static_cast<int32_t>(o.tokens.size());
  for (int32_t begin = 0; begin < n_prompt; begin += o.chunk) {
    const int32_t end = std::min(n_prompt, begin + o.chunk);
    const bool rows = o.all_logits || o.argmax;
    step(*model, *kv, seq, begin, end, rows, logits);
    for (int64_t r = 0; rows && r < end - begin; ++r) {
      const float* row = logits.data() + r * n_vocab;
      if (o.argmax) argmaxes.push_back(argmax(row, n_vocab));
      if (o.all_logits) keep_row(row);
    }
  }
  const auto t_decode = clock::now();
  const std::clock_t c_decode = std::clock();
  const float* last = logits.data() + logits.size() - n_vocab;
  std::vector<int32_t> generated;
  for (int g = 0; g < o.greedy; ++g) {
    const int32_t next = argmax(last, n_vocab);
    generated.push_back(next);
    if (g + 1 == o.greedy) break;
    seq.push_back(o.forced ? o.forced_greedy[g] : next);
    step(*model, *kv, seq, static_cast<int32_t>(seq.size()) - 1, static_cast<int32_t>(seq.size()),
         false, logits);
    last = logits.data();
    if (o.all_logits) keep_row(last);
  }
  const auto t_end = clock::now();
  const std::clock_t c_end = std::clock();
  // Process CPU seconds (all threads): on a shared machine wall time includes waiting for cores.
  const auto cpu = [](std::clock_t a, std::clock_t b) {
    return static_cast<double>(b - a) / CLOCKS_PER_SEC;
  };
  out["prefill_cpu_s"] = cpu(c_prefill, c_decode);
  out["decode_cpu_s"] = cpu(c_decode, c_end);
  const auto secs = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  out["greedy"] = generated;
  if (o.argmax) out["argmax"] = argmaxes;
  if (o.all_logits && raw.is_open()) {
    raw.close();
    if (!raw) fail(ErrorCode::io, "cannot write {}", o.logits_out);
    out["logits_file"] = {{"path", o.logits_out}, {"rows", n_rows}, {"cols", n_vocab}};
  } else if (o.all_logits) {
    out["logits"] = all_logits;
  }
  if (o.trace) out["trace"] = trace;
  if (!o.routes_out.empty()) {
    std::ofstream f(o.routes_out);
    f << routes.dump();
    if (!f) fail(ErrorCode::io, "cannot write {}", o.routes_out);
  }
  if (!o.routes_in.empty()) out["routes_replayed"] = routes_next;
  out["load_s"] = secs(t_load, t_prefill);
  out["prefill_tokens"] = n_prompt;
  out["prefill_tok_s"] = n_prompt / secs(t_prefill, t_decode);
  const int n_decode_steps = std::max(0, o.greedy - 1);
  out["decode_tokens"] = n_decode_steps;
  if (n_decode_steps > 0) out["decode_tok_s"] = n_decode_steps / secs(t_decode, t_end);
  std::cout << out.dump() << "\n";
  return 0;
}

}  // namespace
}  // namespace memra

int main(int argc, char** argv) {
  try {
    return memra::run(memra::parse_args(argc, argv));
  } catch (const memra::Error& e) {
    std::fprintf(stderr, "model_run: %s: %s\n", memra::error_code_name(e.code()), e.what());
    return memra::error_exit_code(e.code());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "model_run: %s\n", e.what());
    return 1;
  }
}
