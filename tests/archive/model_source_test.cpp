// Model sources on synthetic Hugging Face cache trees (refs/, snapshots/ symlinking blobs/),
// built in a temp dir, with HF_HUB_OFFLINE=1 (the cache only; downloads are tested against a
// fake hub in tests/python/test_hub_download.py): resolution order of the cache variables,
// :QUANT picking, and the errors for everything missing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "formats/model_source.h"

namespace memra {
namespace {

namespace fs = std::filesystem;
constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

class ModelSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("memra_src_" +
             std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "hub");
    for (const char* v : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME",
                          "MEMRA_DEFAULT_MODEL", "MEMRA_MODEL_DIR"})
      unsetenv(v);
    setenv("HF_HUB_CACHE", (root_ / "hub").c_str(), 1);
    setenv("HF_HUB_OFFLINE", "1", 1);
  }
  void TearDown() override {
    unsetenv("HF_HUB_CACHE");
    unsetenv("HF_HUB_OFFLINE");
    fs::remove_all(root_);
  }
  // models--org--name with refs/main and the given snapshot files (symlinks into blobs/).
  fs::path make_repo(const fs::path& hub, const std::string& org, const std::string& name,
                     const std::vector<std::string>& files) {
    const fs::path repo = hub / ("models--" + org + "--" + name);
    fs::create_directories(repo / "refs");
    fs::create_directories(repo / "blobs");
    std::ofstream(repo / "refs" / "main") << kCommit;
    const fs::path snap = repo / "snapshots" / kCommit;
    int blob = 0;
    for (const std::string& f : files) {
      const fs::path target = repo / "blobs" / ("blob" + std::to_string(blob++));
      std::ofstream(target) << f;
      fs::create_directories((snap / f).parent_path());
      fs::create_symlink(fs::relative(target, (snap / f).parent_path()), snap / f);
    }
    fs::create_directories(snap);
    return snap;
  }
  std::string error_of(const std::string& source) {
    try {
      model_source_resolve(source);
    } catch (const Error& e) {
      return std::string(error_code_name(e.code())) + ": " + e.what();
    }
    return "resolved";
  }
  fs::path root_;
};

TEST_F(ModelSourceTest, LocalPaths) {
  std::ofstream(root_ / "m.gguf") << "x";
  const ResolvedModel r = model_source_resolve((root_ / "m.gguf").string());
  EXPECT_EQ(r.path, (root_ / "m.gguf").string());
  EXPECT_EQ(r.display, "m");
  EXPECT_EQ(model_source_resolve((root_ / "hub").string()).display, "hub");
  const std::string missing = error_of((root_ / "nope.gguf").string());
  EXPECT_NE(missing.find("not_found"), std::string::npos) << missing;
  EXPECT_NE(missing.find("nope.gguf"), std::string::npos);
  EXPECT_NE(error_of("org/model").find("write hf:org/model"), std::string::npos);
}

TEST_F(ModelSourceTest, HfFolderSnapshot) {
  const fs::path snap =
      make_repo(root_ / "hub", "org", "tiny", {"config.json", "model.safetensors"});
  const ResolvedModel r = model_source_resolve("hf:org/tiny");
  EXPECT_EQ(fs::path(r.path), snap);
  EXPECT_EQ(r.display, "org/tiny");
}

TEST_F(ModelSourceTest, QuantPicksTheGguf) {
  const fs::path snap =
      make_repo(root_ / "hub", "org", "m-GGUF",
                {"m-Q4_K_M.gguf", "m-Q8_0.gguf", "BF16/m-bf16.gguf", "README.md"});
  EXPECT_EQ(fs::path(model_source_resolve("hf:org/m-GGUF:q4_k_m").path), snap / "m-Q4_K_M.gguf");
  EXPECT_EQ(model_source_resolve("hf:org/m-GGUF:Q8_0").display, "org/m-GGUF:Q8_0");
  EXPECT_EQ(fs::path(model_source_resolve("hf:org/m-GGUF:bf16").path), snap / "BF16/m-bf16.gguf");
  const std::string none = error_of("hf:org/m-GGUF:Q2_K");
  EXPECT_NE(none.find("not_found"), std::string::npos) << none;
  EXPECT_NE(none.find("m-Q4_K_M.gguf, m-Q8_0.gguf"), std::string::npos) << none;
  // A quant matches as a whole token: "f16" is not in "bf16", "m" is in all three.
  EXPECT_NE(error_of("hf:org/m-GGUF:f16").find("not_found"), std::string::npos);
  const std::string several = error_of("hf:org/m-GGUF:m");
  EXPECT_NE(several.find("several"), std::string::npos) << several;
  const std::string no_quant = error_of("hf:org/m-GGUF");
  EXPECT_NE(no_quant.find("pick a quant with hf:org/m-GGUF:QUANT"), std::string::npos) << no_quant;
}

TEST_F(ModelSourceTest, SingleGgufWithoutQuant) {
  const fs::path snap = make_repo(root_ / "hub", "org", "one", {"one-Q4_0.gguf"});
  EXPECT_EQ(fs::path(model_source_resolve("hf:org/one").path), snap / "one-Q4_0.gguf");
}

TEST_F(ModelSourceTest, MissingPiecesSayWhere) {
  std::string e = error_of("hf:org/absent");
  EXPECT_NE(e.find("not_found"), std::string::npos) << e;
  EXPECT_NE(e.find((root_ / "hub" / "models--org--absent").string()), std::string::npos) << e;
  const fs::path snap = make_repo(root_ / "hub", "org", "broken", {"m-Q4_0.gguf"});
  fs::remove(snap.parent_path().parent_path() / "blobs" / "blob0");
  e = error_of("hf:org/broken:Q4_0");
  EXPECT_NE(e.find("missing blob"), std::string::npos) << e;
  fs::remove_all(snap);
  e = error_of("hf:org/broken:Q4_0");
  EXPECT_NE(e.find("refs/main names snapshot"), std::string::npos) << e;
  fs::remove(snap.parent_path().parent_path() / "refs" / "main");
  e = error_of("hf:org/broken");
  EXPECT_NE(e.find("refs/main is missing"), std::string::npos) << e;
  EXPECT_NE(e.find("HF_HUB_OFFLINE is set"), std::string::npos) << e;
  std::ofstream(snap.parent_path().parent_path() / "refs" / "main") << "not-a-commit";
  e = error_of("hf:org/broken");
  EXPECT_NE(e.find("40-hex commit"), std::string::npos) << e;
}

TEST_F(ModelSourceTest, BadSpecs) {
  for (const char* s : {"hf:", "hf:org", "hf:org/", "hf:/name", "hf:../x/y", "hf:org/na/me",
                        "hf:org/name:", "hf:org/name:../x", "hf:a--b/c"}) {
    SCOPED_TRACE(s);
    const std::string e = error_of(s);
    EXPECT_EQ(e.rfind("invalid_argument", 0), 0u) << e;
  }
}

TEST_F(ModelSourceTest, CacheVariablesInOrder) {
  unsetenv("HF_HUB_CACHE");
  make_repo(root_ / "home" / "hub", "org", "a", {"config.json", "model.safetensors"});
  setenv("HF_HOME", (root_ / "home").c_str(), 1);
  EXPECT_NE(model_source_resolve("hf:org/a").path.find("/home/hub/"), std::string::npos);
  unsetenv("HF_HOME");
  make_repo(root_ / "xdg" / "huggingface" / "hub", "org", "a",
            {"config.json", "model.safetensors"});
  setenv("XDG_CACHE_HOME", (root_ / "xdg").c_str(), 1);
  EXPECT_NE(model_source_resolve("hf:org/a").path.find("/xdg/huggingface/hub/"), std::string::npos);
  setenv("HF_HUB_CACHE", (root_ / "hub").c_str(), 1);  // wins over the others
  EXPECT_NE(error_of("hf:org/a").find("not_found"), std::string::npos);
  unsetenv("XDG_CACHE_HOME");
}

TEST_F(ModelSourceTest, DefaultPath) {
  setenv("MEMRA_MODEL_DIR", "/models", 1);
  EXPECT_EQ(model_source_default_path(), "/models/gemma-3-270m-q4_k_m.gguf");
  setenv("MEMRA_DEFAULT_MODEL", "/x/y.gguf", 1);
  EXPECT_EQ(model_source_default_path(), "/x/y.gguf");
  unsetenv("MEMRA_DEFAULT_MODEL");
  unsetenv("MEMRA_MODEL_DIR");
  EXPECT_NE(model_source_default_path().find(".cache/memra/models/gemma-3-270m-q4_k_m.gguf"),
            std::string::npos);
}

}  // namespace
}  // namespace memra
