// gguf::Writer round trips: every metadata value type (nested arrays included) and tensor data
// read back identically by our reader; writer-side validation; progress reporting.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <type_traits>

#include "gguf_test_files.h"

namespace memra::gguf::testing {
namespace {

bool same_value(const Value& a, const Value& b) {
  if (a.type != b.type || a.data.index() != b.data.index()) return false;
  if (const auto* x = std::get_if<Array>(&a.data)) {
    const auto& y = std::get<Array>(b.data);
    if (x->element_type != y.element_type || x->items.size() != y.items.size()) return false;
    for (size_t i = 0; i < x->items.size(); ++i) {
      if (!same_value(x->items[i], y.items[i])) return false;
    }
    return true;
  }
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Array>) {
          return false;  // handled above
        } else {
          return x == std::get<T>(b.data);
        }
      },
      a.data);
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::path(::testing::TempDir()) / name).string();
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(GgufWriter, RoundTripsEveryValueTypeAndTensor) {
  const Writer w = sample_writer();
  const std::string path = temp_path("memra_gguf_sample.gguf");
  std::vector<std::pair<size_t, uint64_t>> progress;
  w.write(path, [&](size_t done, size_t total, uint64_t bytes, uint64_t total_bytes) {
    EXPECT_EQ(total, 4u);
    EXPECT_LE(bytes, total_bytes);
    progress.emplace_back(done, bytes);
  });
  ASSERT_EQ(progress.size(), 4u);
  EXPECT_EQ(progress.back().first, 4u);

  const File f = File::open(path);
  EXPECT_EQ(f.version(), 3u);
  const Writer expected = sample_writer();
  const Metadata& want = const_cast<Writer&>(expected).metadata();
  ASSERT_EQ(f.metadata().entries().size(), want.entries().size());
  for (size_t i = 0; i < want.entries().size(); ++i) {
    SCOPED_TRACE(want.entries()[i].first);
    EXPECT_EQ(f.metadata().entries()[i].first, want.entries()[i].first);
    EXPECT_TRUE(same_value(f.metadata().entries()[i].second, want.entries()[i].second));
  }
  ASSERT_EQ(f.tensors().size(), 4u);
  EXPECT_EQ(f.tensors()[3].dtype, DType::q4_k);
  EXPECT_EQ(f.tensors()[3].n_dims, 4);
  EXPECT_EQ(f.tensors()[3].n_bytes, 2u * 144u);
  EXPECT_EQ(f.tensors()[2].n_bytes, 2u * 2u * 34u);
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const TensorView v = f.view(f.tensors()[k]);
    EXPECT_EQ(f.tensors()[k].offset % f.alignment(), 0u);
    const auto* data = static_cast<const uint8_t*>(v.data);
    size_t mismatches = 0;
    for (size_t i = 0; i < v.n_bytes; ++i) mismatches += data[i] != sample_byte(k, i);
    EXPECT_EQ(mismatches, 0u) << v.name;
  }
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

// release_metadata hands the whole metadata over and keeps none (a model archive holds the only
// copy); the tensor table and views stay usable.
TEST(GgufWriter, ReleaseMetadataMovesItOut) {
  const std::string path = temp_path("memra_gguf_release.gguf");
  sample_writer().write(path);
  File f = File::open(path);
  const size_t entries = f.metadata().entries().size();
  ASSERT_GT(entries, 0u);
  const Metadata taken = f.release_metadata();
  EXPECT_EQ(taken.entries().size(), entries);
  EXPECT_TRUE(f.metadata().entries().empty());
  ASSERT_EQ(f.tensors().size(), 4u);
  const TensorView v = f.view(f.tensors()[0]);
  EXPECT_EQ(static_cast<const uint8_t*>(v.data)[0], sample_byte(0, 0));
}

// Every prefix of the writer's sample (all value types, nested arrays) parses or fails cleanly.
TEST(GgufWriter, SampleTruncationSweep) {
  const std::string path = temp_path("memra_gguf_sweep.gguf");
  sample_writer().write(path);
  const std::vector<uint8_t> full = read_all(path);
  ASSERT_GT(full.size(), 600u);
  const File whole = File::parse(full);
  uint64_t data_end = 0;  // where the last tensor's bytes end; only padding may follow
  for (const TensorInfo& t : whole.tensors())
    data_end = std::max(data_end, whole.data_offset() + t.offset + t.n_bytes);
  for (size_t n = 0; n < full.size(); ++n) {
    bool parsed = true;
    try {
      File::parse(std::span<const uint8_t>(full.data(), n));
    } catch (const Error&) {
      parsed = false;
    }
    EXPECT_EQ(parsed, n >= data_end) << "prefix of " << n << " bytes";
  }
}

TEST(GgufWriter, AlignmentKeyWrittenAndChecked) {
  Writer w = sample_writer();
  w.set_alignment(64);
  const std::string path = temp_path("memra_gguf_align64.gguf");
  w.write(path);
  const File f = File::open(path);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.metadata().get_int("general.alignment"), 64);

  Writer bad = sample_writer();
  bad.set_alignment(48);
  EXPECT_THROW(bad.write(temp_path("memra_gguf_bad.gguf")), Error);
  Writer mismatch = sample_writer();
  mismatch.metadata().set("general.alignment", Value::make_u32(128));
  EXPECT_THROW(mismatch.write(temp_path("memra_gguf_bad.gguf")), Error);
  EXPECT_FALSE(std::filesystem::exists(temp_path("memra_gguf_bad.gguf")));
}

TEST(GgufWriter, RefusesInvalidTensorsAndValues) {
  Writer w;
  const std::vector<uint64_t> ne{100};
  EXPECT_THROW(w.add_tensor("x", DType::q4_k, ne, {}), Error);  // partial block
  EXPECT_THROW(w.add_tensor("x", DType::u8, ne, {}), Error);    // not a GGUF type
  EXPECT_THROW(w.add_tensor("", DType::f32, ne, {}), Error);    // empty name
  const std::vector<uint64_t> zero{0};
  EXPECT_THROW(w.add_tensor("x", DType::f32, zero, {}), Error);
  w.add_tensor("x", DType::f32, ne, {});
  EXPECT_THROW(w.add_tensor("x", DType::f32, ne, {}), Error);  // duplicate
  w.metadata().set("bad.u8", {ValueType::u8, uint64_t{256}});  // out of range for UINT8
  EXPECT_THROW(w.write(temp_path("memra_gguf_badval.gguf")), Error);
  Writer mixed;
  mixed.metadata().set("bad.arr", Value::make_array(ValueType::u32, {Value::make_i32(1)}));
  EXPECT_THROW(mixed.write(temp_path("memra_gguf_badval.gguf")), Error);
}

}  // namespace
}  // namespace memra::gguf::testing
