// `memra bench --compare` logic: baselines and receipts parsed or refused by name, figures matched
// to entries by shape (architecture + parameters), file type and figure name, the ratios and the
// table; then the committed baselines file against the committed 8B Q4_K_M receipt.
#include <cstdlib>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "bench_compare.h"
#include "core/error.h"

namespace memra::cli::bench {
namespace {

using nlohmann::json;

json baselines_doc() {
  return json::parse(R"({
    "what": "bench-baselines", "peer": "llama.cpp", "gpu": "NVIDIA H200", "date": "2026-11-29",
    "source": {"commit": "0253fb21f"},
    "shapes": {"qwen3-8b": {"architecture": "qwen3", "parameters": 8190735360},
               "qwen3-0.6b": {"architecture": "qwen3", "parameters": 596049920}},
    "entries": [
      {"model": "qwen3-8b", "file_type": "q4_k_m", "figure": "decode tg128",
       "also_matches": ["decode tg128 @ d512"], "baseline": 200, "target": 400},
      {"model": "qwen3-8b", "file_type": "q4_k_m", "figure": "decode tg128 @ d512",
       "baseline": 190, "target": null},
      {"model": "qwen3-8b", "file_type": "bf16", "figure": "decode tg128",
       "also_matches": ["decode tg128 @ d512"], "baseline": 180, "target": 90},
      {"model": "qwen3-8b", "file_type": "q4_k_m", "figure": "prefill pp512", "baseline": 9000,
       "target": null},
      {"model": "qwen3-0.6b", "file_type": "q4_k_m", "figure": "decode tg128", "baseline": 500,
       "target": 3000},
      {"model": "qwen3-8b", "file_type": "q4_k_m", "figure": "server ttft pp512 c1", "unit": "ms",
       "baseline": null, "target": 30, "better": "lower"}
    ]})");
}

ComparedModel model_8b(const std::string& file_type) {
  return {"my-renamed-file", "qwen3", 8190735360, file_type};
}

// The message of the Error(invalid_argument) that `f` throws, or "" when it throws none.
template <typename F>
std::string refusal(F f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::invalid_argument);
    return e.what();
  }
  return "";
}

TEST(BenchCompare, ParsesBaselines) {
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  EXPECT_EQ(b.peer, "llama.cpp");
  EXPECT_EQ(b.source_commit, "0253fb21f");
  ASSERT_EQ(b.shapes.size(), 2u);
  ASSERT_EQ(b.entries.size(), 6u);
  EXPECT_EQ(b.entries[0].also_matches, std::vector<std::string>{"decode tg128 @ d512"});
  EXPECT_EQ(b.entries[0].unit, "tok/s");
  EXPECT_FALSE(b.entries[1].target.has_value());
  EXPECT_FALSE(b.entries[5].baseline.has_value());
  EXPECT_FALSE(b.entries[5].higher_is_better);
}

TEST(BenchCompare, RefusesBadBaselinesByName) {
  auto refuse = [](auto edit) {
    json j = baselines_doc();
    edit(j);
    return refusal([&] { baselines_parse(j, "b.json"); });
  };
  EXPECT_NE(refuse([](json& j) { j["what"] = "bench"; }).find("b.json: not a baselines file"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) { j.erase("entries"); }).find("b.json has no 'entries'"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["entries"][2].erase("figure");
            }).find("b.json entries[2] has no 'figure'"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["entries"][0]["baseline"] = "216";
            }).find("entries[0].baseline is not a number or null"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["entries"][0]["model"] = "qwen3-14b";
            }).find("entries[0].model 'qwen3-14b' is not one of the file's shapes"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["entries"][0]["better"] = "faster";
            }).find("'faster', not higher or lower"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["entries"].push_back(j["entries"][3]);
            }).find("entries[6] repeats qwen3-8b q4_k_m 'prefill pp512'"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["shapes"]["qwen3-8b"]["parameters"] = -1;
            }).find("shapes.qwen3-8b.parameters is not a positive integer"),
            std::string::npos);
}

TEST(BenchCompare, RefusesMissingOrUnparsableFiles) {
  EXPECT_NE(refusal([] {
              baselines_load("/nonexistent/b.json");
            }).find("--compare /nonexistent/b.json: cannot be read"),
            std::string::npos);
  // A file that is not JSON: this test's own source.
  EXPECT_NE(refusal([] {
              baselines_load("tests/tools/CMakeLists.txt");
            }).find("--compare tests/tools/CMakeLists.txt: not JSON"),
            std::string::npos);
  EXPECT_NE(refusal([] {
              bench_receipt_load("/nonexistent/r.json");
            }).find("--receipts /nonexistent/r.json: cannot be read"),
            std::string::npos);
}

TEST(BenchCompare, MatchesByShapeTypeAndName) {
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  const auto rows = compare_figures(b, model_8b("q4_k_m"),
                                    {{"prefill pp512", "tok/s", 4500},
                                     {"decode tg128", "tok/s", 100},
                                     {"c8 decode tg128", "tok/s", 1000}},
                                    "r.json");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].model, "qwen3-8b");  // the shape, not the file's name
  EXPECT_EQ(rows[0].source, "r.json");
  ASSERT_TRUE(rows[0].entry.has_value());
  EXPECT_DOUBLE_EQ(*compare_ratio(rows[0]), 0.5);
  EXPECT_FALSE(compare_target_ratio(rows[0]).has_value());  // no target
  EXPECT_DOUBLE_EQ(*compare_ratio(rows[1]), 0.5);
  EXPECT_DOUBLE_EQ(*compare_target_ratio(rows[1]), 0.25);
  EXPECT_FALSE(*compare_target_met(rows[1]));
  EXPECT_FALSE(rows[2].entry.has_value());  // no entry: listed with "-"
  EXPECT_FALSE(compare_ratio(rows[2]).has_value());
}

// A figure of `m` that the baselines would match but for how it ran: listed under its own
// `heading`, matched to no entry (so no ratio and no target verdict), its JSON row carrying `key`
// = `value`.
void expect_listed_not_compared(const ComparedModel& m, const std::string& source,
                                const std::string& heading, const char* key,
                                const std::string& value) {
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  const auto rows = compare_figures(b, m, {{"decode tg128", "tok/s", 300}}, source);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_FALSE(rows[0].entry.has_value());
  EXPECT_FALSE(compare_target_met(rows[0]).has_value());
  EXPECT_EQ(rows[0].model, "qwen3-8b");
  const std::string table = compare_table(b, rows);
  EXPECT_NE(table.find(source + " (" + heading + ")"), std::string::npos) << table;
  EXPECT_EQ(compare_json(rows)[0][key], value);
}

// A run with another KV cache type than the baselines' F16 (an FP8 cache's depth run) is listed
// under its own heading and matched to no entry, so its figure never stands for the default's.
TEST(BenchCompare, OtherKvCacheTypesAreListedNotCompared) {
  ComparedModel fp8 = model_8b("q4_k_m");
  fp8.kv_dtype = "F8_E4M3";
  expect_listed_not_compared(fp8, "fp8.json",
                             "KV cache F8_E4M3: listed, not compared; the baselines ran F16",
                             "kv_dtype", "F8_E4M3");
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  ComparedModel f16 = model_8b("q4_k_m");  // asked for the baselines' own type: compared
  f16.kv_dtype = "F16";
  EXPECT_TRUE(compare_figures(b, f16, {{"decode tg128", "tok/s", 300}}, "")[0].entry.has_value());
}

// Figures measured on another device than the baselines' GPU (an H100 against H200 baselines, or
// the CPU) are listed under their own heading and matched to no entry: a ratio across devices, or
// a target verdict set for another GPU, would not be a measurement. A receipt that does not name
// its device (the first ones) is compared as before.
TEST(BenchCompare, OtherDevicesAreListedNotCompared) {
  ComparedModel h100 = model_8b("q4_k_m");
  h100.gpu = "NVIDIA H100 80GB HBM3";
  expect_listed_not_compared(h100, "h100.json",
                             "ran on NVIDIA H100 80GB HBM3: listed, not compared; the baselines "
                             "ran on NVIDIA H200",
                             "gpu", "NVIDIA H100 80GB HBM3");
  ComparedModel cpu = model_8b("q4_k_m");
  cpu.gpu = "cpu";
  expect_listed_not_compared(cpu, "cpu.json",
                             "ran on cpu: listed, not compared; the baselines ran on NVIDIA H200",
                             "gpu", "cpu");
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  ComparedModel h200 = model_8b("q4_k_m");  // the baselines' own GPU: compared
  h200.gpu = "NVIDIA H200";
  const auto same = compare_figures(b, h200, {{"decode tg128", "tok/s", 300}});
  ASSERT_TRUE(same[0].entry.has_value());
  EXPECT_TRUE(same[0].gpu.empty());
  EXPECT_TRUE(compare_figures(b, model_8b("q4_k_m"), {{"decode tg128", "tok/s", 300}})[0]
                  .entry.has_value());  // no device named
}

TEST(BenchCompare, ExactNameWinsOverAlias) {
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  // q4_k_m has an entry named "decode tg128 @ d512" itself; bf16 has only the alias.
  const auto q4 = compare_figures(b, model_8b("q4_k_m"), {{"decode tg128 @ d512", "tok/s", 95}});
  ASSERT_TRUE(q4[0].entry.has_value());
  EXPECT_EQ(q4[0].entry->figure, "decode tg128 @ d512");
  const auto bf16 = compare_figures(b, model_8b("bf16"), {{"decode tg128 @ d512", "tok/s", 99}});
  ASSERT_TRUE(bf16[0].entry.has_value());
  EXPECT_EQ(bf16[0].entry->figure, "decode tg128");
  EXPECT_DOUBLE_EQ(*compare_ratio(bf16[0]), 0.55);
  EXPECT_TRUE(*compare_target_met(bf16[0]));  // 99 >= 90
}

TEST(BenchCompare, NoMatchForOtherShapeOrType) {
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  ComparedModel other = model_8b("q4_k_m");
  other.parameters = 8190735361;  // e.g. a --layers cut of the shape
  const auto a = compare_figures(b, other, {{"decode tg128", "tok/s", 100}});
  EXPECT_EQ(a[0].model, "my-renamed-file");
  EXPECT_FALSE(a[0].entry.has_value());
  const auto q6 = compare_figures(b, model_8b("q6_k"), {{"decode tg128", "tok/s", 100}});
  EXPECT_EQ(q6[0].model, "qwen3-8b");
  EXPECT_FALSE(q6[0].entry.has_value());
  ComparedModel llama = model_8b("q4_k_m");
  llama.architecture = "llama";
  EXPECT_FALSE(compare_figures(b, llama, {{"decode tg128", "tok/s", 1}})[0].entry.has_value());
}

TEST(BenchCompare, LowerIsBetterTarget) {
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  const auto rows = compare_figures(b, model_8b("q4_k_m"), {{"server ttft pp512 c1", "ms", 24}});
  ASSERT_TRUE(rows[0].entry.has_value());
  EXPECT_TRUE(*compare_target_met(rows[0]));
  EXPECT_DOUBLE_EQ(*compare_target_ratio(rows[0]), 0.8);
  // A figure in another unit does not match an entry of the same name.
  EXPECT_FALSE(compare_figures(b, model_8b("q4_k_m"), {{"server ttft pp512 c1", "tok/s", 24}})[0]
                   .entry.has_value());
}

TEST(BenchCompare, UnmeasuredEntriesAndTable) {
  const Baselines b = baselines_parse(baselines_doc(), "b.json");
  auto rows =
      compare_figures(b, model_8b("bf16"), {{"decode tg128 @ d512", "tok/s", 99}}, "r.json");
  const auto rest = compare_unmeasured(b, rows);
  ASSERT_EQ(rest.size(), 5u);  // every entry but bf16 decode tg128 (matched by its alias)
  for (const CompareRow& r : rest) {
    EXPECT_FALSE(r.memra.has_value());
    EXPECT_FALSE(r.file_type == "bf16" && r.figure == "decode tg128");
  }
  rows.insert(rows.end(), rest.begin(), rest.end());
  const std::string table = compare_table(b, rows);
  EXPECT_NE(table.find("compared with llama.cpp (0253fb21f, NVIDIA H200, 2026-11-29): b.json"),
            std::string::npos);
  EXPECT_NE(table.find("| metric (tok/s unless named)"), std::string::npos);
  EXPECT_NE(table.find("memra/llama.cpp"), std::string::npos);
  EXPECT_NE(table.find("\nr.json:\n"), std::string::npos);
  EXPECT_NE(table.find("not measured by these receipts:"), std::string::npos);
  // The measured row: memra 99.0, peer 180.0, ratio 0.550, target >= 90, 1.100 met.
  EXPECT_NE(table.find("| qwen3-8b bf16 decode tg128 @ d512 |"), std::string::npos) << table;
  EXPECT_NE(table.find("99.0 |"), std::string::npos);
  EXPECT_NE(table.find("0.550 |"), std::string::npos);
  EXPECT_NE(table.find(">= 90 |"), std::string::npos);
  EXPECT_NE(table.find("1.100 met |"), std::string::npos);
  EXPECT_NE(table.find("qwen3-8b q4_k_m server ttft pp512 c1 (ms)"), std::string::npos);
  EXPECT_NE(table.find("<= 30 |"), std::string::npos);

  const auto j = compare_json(rows);
  ASSERT_EQ(j.size(), 6u);
  EXPECT_EQ(j[0]["figure"], "decode tg128 @ d512");
  EXPECT_EQ(j[0]["baseline_figure"], "decode tg128");
  EXPECT_DOUBLE_EQ(j[0]["ratio"].get<double>(), 0.55);
  EXPECT_EQ(j[0]["target_met"], true);
  EXPECT_EQ(j[0]["receipt"], "r.json");
  EXPECT_TRUE(j[1]["memra"].is_null());
  EXPECT_TRUE(j[1]["ratio"].is_null());
  EXPECT_FALSE(j[1].contains("receipt"));
}

TEST(BenchCompare, RefusesWhatIsNotABenchReceipt) {
  const json ok = json::parse(R"({"what": "bench",
    "model": {"id": "x", "architecture": "qwen3", "file_type": "q4_k_m", "parameters": 7},
    "figures": [{"name": "decode tg128", "unit": "tok/s", "median": 12.5}]})");
  const BenchReceipt r = bench_receipt_parse(ok, "r.json");
  EXPECT_EQ(r.model.parameters, 7u);
  ASSERT_EQ(r.figures.size(), 1u);
  EXPECT_DOUBLE_EQ(r.figures[0].median, 12.5);
  auto refuse = [&](auto edit) {
    json j = ok;
    edit(j);
    return refusal([&] { bench_receipt_parse(j, "r.json"); });
  };
  EXPECT_NE(refuse([](json& j) {
              j["what"] = "kernel-bench";
            }).find("--receipts r.json: not a bench receipt (\"what\" is \"kernel-bench\""),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) { j.erase("what"); }).find("not a bench receipt (no \"what\")"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["model"].erase("file_type");
            }).find("--receipts r.json model has no 'file_type'"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["figures"][0]["median"] = nullptr;
            }).find("figures[0].median is not a number"),
            std::string::npos);
  // The KV cache type: as asked (options.kv_dtype, null for none) and as run (kv_dtype).
  json asked = ok;
  asked["options"] = {{"kv_dtype", "fp8"}};
  asked["kv_dtype"] = "F8_E4M3";
  EXPECT_EQ(bench_receipt_parse(asked, "r.json").model.kv_dtype, "F8_E4M3");
  asked["options"]["kv_dtype"] = nullptr;
  EXPECT_EQ(bench_receipt_parse(asked, "r.json").model.kv_dtype, "");
  EXPECT_NE(refuse([](json& j) {
              j["options"] = {{"kv_dtype", 8}};
            }).find("options.kv_dtype is not a string"),
            std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["options"] = {{"kv_dtype", "fp8"}};
            }).find("--receipts r.json has no 'kv_dtype'"),
            std::string::npos);
  // The device: gpu.name; a CPU run's null gpu is "cpu"; no gpu at all, unnamed.
  EXPECT_EQ(bench_receipt_parse(ok, "r.json").model.gpu, "");
  json gpu = ok;
  gpu["gpu"] = {{"name", "NVIDIA H100 80GB HBM3"}, {"driver_version", 13000}};
  EXPECT_EQ(bench_receipt_parse(gpu, "r.json").model.gpu, "NVIDIA H100 80GB HBM3");
  json cpu = ok;
  cpu["gpu"] = nullptr;
  cpu["device"] = "cpu";
  EXPECT_EQ(bench_receipt_parse(cpu, "r.json").model.gpu, "cpu");
  EXPECT_NE(
      refuse([](json& j) { j["gpu"] = "H100"; }).find("--receipts r.json gpu is not an object"),
      std::string::npos);
  EXPECT_NE(refuse([](json& j) {
              j["gpu"] = {{"driver_version", 13000}};
            }).find("--receipts r.json gpu has no 'name'"),
            std::string::npos);
}

// The committed baselines (tests run from the source folder) against the committed receipt.
TEST(BenchCompare, CommittedBaselinesMatchCommittedReceipt) {
  const Baselines b = baselines_load("bench/baselines/llama.cpp-h200-2026-11-29.json");
  EXPECT_EQ(b.peer, "llama.cpp");
  const BenchReceipt r = bench_receipt_load("receipts/2026-11-30-bench-qwen3-8b-q4_k_m.json");
  const auto rows = compare_figures(b, r.model, r.figures, r.path);
  ASSERT_EQ(rows.size(), r.figures.size());
  int matched = 0;
  for (const CompareRow& row : rows) {
    EXPECT_EQ(row.model, "qwen3-8b");
    matched += row.entry.has_value();
    if (row.figure != "decode tg128") continue;
    ASSERT_TRUE(row.entry.has_value());
    EXPECT_DOUBLE_EQ(*row.entry->baseline, 215.7);
    EXPECT_DOUBLE_EQ(*row.entry->target, 650);
    EXPECT_DOUBLE_EQ(*compare_ratio(row), *row.memra / 215.7);
  }
  EXPECT_EQ(matched, 8);  // pp512, tg128, c1/c8/c64 prefill and decode
}

}  // namespace
}  // namespace memra::cli::bench
