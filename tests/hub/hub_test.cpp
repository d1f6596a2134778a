// The hub client's pure parts on hostile and ordinary input: hf: source parsing, the checks on
// names from the hub, file selection (quants, split GGUF, checkpoints), safetensors indexes,
// redirects, settings from the environment, blob hashes and the cache layout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "hub/hub_cache.h"
#include "hub/hub_error.h"
#include "hub/hub_hash.h"
#include "hub/hub_http.h"
#include "hub/hub_select.h"
#include "hub/hub_source.h"

namespace memra::hub {
namespace {

namespace fs = std::filesystem;

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const HubError& e) {
    return e.what();
  }
  return "ok";
}

TEST(HubSource, Parses) {
  HubSource s = hub_source_parse("hf:org/name");
  EXPECT_EQ(s.repo(), "org/name");
  EXPECT_EQ(s.quant, "");
  EXPECT_EQ(s.revision, "main");
  EXPECT_EQ(s.display(), "org/name");
  s = hub_source_parse("hf:org/m-GGUF:Q4_K_M@v1.0");
  EXPECT_EQ(s.quant, "Q4_K_M");
  EXPECT_EQ(s.revision, "v1.0");
  EXPECT_EQ(s.display(), "org/m-GGUF:Q4_K_M@v1.0");
  EXPECT_EQ(hub_source_parse("hf:org/name@refs/pr/1").revision, "refs/pr/1");
  for (const char* bad :
       {"hf:",          "hf:org",      "hf:org/",     "hf:/n",          "hf:../x/y",
        "hf:o/n/x",     "hf:o/n:",     "hf:o/n:../x", "hf:a--b/c",      "hf:o/n@",
        "hf:o/n@../x",  "hf:o/n@/abs", "hf:o/n@a//b", "hf:o/n@-x",      "hf:o/n@.",
        "hf:o/n@a/./b", "hf:o/n@./a",  "hf:o/n@a b",  "hf:o/n:Q4@x\ny", "org/n"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(error_of([&] { hub_source_parse(bad); }).rfind("hub_bad_source: ", 0), 0u);
  }
}

TEST(HubSource, FilePathsFromTheHub) {
  for (const char* ok : {"model.gguf", "Q4_K_M/m-Q4_K_M-00001-of-00002.gguf", ".gitattributes",
                         "a b (1).json", "x+y=z@v,1.txt"})
    EXPECT_TRUE(hub_valid_file_path(ok)) << ok;
  for (const char* bad :
       {"", "/abs.gguf", "../x.gguf", "a/../../x", "a//b", "a/", "./a", "a\\b", "a\nb", "a\tb",
        " lead", "a/ b", "a;rm", "a$b", "a`b", "~/x", "a\"b", "1/2/3/4/5/6/7/8/9.gguf"})
    EXPECT_FALSE(hub_valid_file_path(bad)) << bad;
  EXPECT_FALSE(hub_valid_file_path(std::string(600, 'a')));
  EXPECT_FALSE(hub_valid_file_path(std::string("a\0b", 3)));
  EXPECT_TRUE(hub_valid_etag("0123abcdef"));
  EXPECT_FALSE(hub_valid_etag("../x"));
  EXPECT_FALSE(hub_valid_etag(""));
  EXPECT_FALSE(hub_valid_etag(std::string(200, 'a')));
  EXPECT_EQ(hub_printable("a\x1b[2Jb\n"), "a?[2Jb?");
}

TEST(HubSelect, QuantIsAWholeToken) {
  const std::vector<std::string> files = {"m-F16.gguf",    "m-BF16.gguf",       "m-Q4_K_M.gguf",
                                          "m-Q4_K_S.gguf", "mmproj-m-F16.gguf", "README.md"};
  EXPECT_EQ(hub_select(files, "f16", "o/m", "x").primary, "m-F16.gguf");
  EXPECT_EQ(hub_select(files, "BF16", "o/m", "x").primary, "m-BF16.gguf");
  EXPECT_EQ(hub_select(files, "q4_k_m", "o/m", "x").files,
            std::vector<std::string>{"m-Q4_K_M.gguf"});
  const std::string several = error_of([&] { hub_select(files, "Q4_K", "o/m", "x"); });
  EXPECT_NE(several.find("hub_bad_source: "), std::string::npos) << several;
  EXPECT_NE(several.find("m-Q4_K_M.gguf, m-Q4_K_S.gguf"), std::string::npos) << several;
  const std::string none = error_of([&] { hub_select(files, "Q8_0", "o/m", "x"); });
  EXPECT_NE(none.find("hub_not_found: "), std::string::npos) << none;
  EXPECT_NE(none.find("available quants: BF16, F16, Q4_K_M, Q4_K_S"), std::string::npos) << none;
  EXPECT_NE(error_of([&] { hub_select(files, "", "o/m", "x"); }).find("hf:o/m:QUANT"),
            std::string::npos);
}

TEST(HubSelect, SplitGgufIsOneChoice) {
  std::vector<std::string> files = {"Q4/m-Q4_K_M-00002-of-00003.gguf",
                                    "Q4/m-Q4_K_M-00001-of-00003.gguf",
                                    "Q4/m-Q4_K_M-00003-of-00003.gguf", "m-Q8_0.gguf"};
  const Selection sel = hub_select(files, "Q4_K_M", "o/m", "x");
  EXPECT_EQ(sel.primary, "Q4/m-Q4_K_M-00001-of-00003.gguf");
  EXPECT_EQ(sel.files.size(), 3u);
  EXPECT_EQ(hub_quants(files), (std::vector<std::string>{"Q4_K_M", "Q8_0"}));
  files.erase(files.begin());
  EXPECT_NE(error_of([&] { hub_select(files, "Q4_K_M", "o/m", "x"); }).find("2 of its 3 parts"),
            std::string::npos);
  EXPECT_EQ(hub_split_part("a-00002-of-00003.gguf").index, 2);
  EXPECT_EQ(hub_split_part("a-00002-of-00003.gguf").count, 3);
  EXPECT_EQ(hub_split_part("a-00004-of-00003.gguf").count, 0);
  EXPECT_EQ(hub_split_part("a-0000x-of-00003.gguf").count, 0);
  EXPECT_EQ(hub_split_part("x.gguf").count, 0);
}

TEST(HubSelect, Checkpoints) {
  Selection sel = hub_select({"config.json", "tokenizer.json", "model.safetensors", "m-Q4_0.gguf",
                              "pytorch_model.bin", "README.md"},
                             "", "o/m", "x");
  EXPECT_TRUE(sel.checkpoint);
  EXPECT_EQ(sel.files,
            (std::vector<std::string>{"config.json", "tokenizer.json", "model.safetensors"}));
  // With :QUANT the GGUF of the same repository.
  EXPECT_FALSE(hub_select({"config.json", "model.safetensors", "m-Q4_0.gguf"}, "Q4_0", "o/m", "x")
                   .checkpoint);
  sel = hub_select(
      {"config.json", "model.safetensors.index.json", "model-00001-of-00002.safetensors"}, "",
      "o/m", "x");
  EXPECT_EQ(sel.index, "model.safetensors.index.json");
  const std::string pickle = error_of([] {
    hub_select({"config.json", "pytorch_model.bin"}, "", "o/m", "x");
  });
  EXPECT_NE(pickle.find("pickle weights pytorch_model.bin are never loaded"), std::string::npos)
      << pickle;
}

TEST(HubSelect, IndexShards) {
  EXPECT_EQ(hub_index_shards(R"({"weight_map": {"a": "s2.safetensors", "b": "s1.safetensors",
                                 "c": "s1.safetensors"}})",
                             "i"),
            (std::vector<std::string>{"s1.safetensors", "s2.safetensors"}));
  for (const char* bad :
       {"", "[]", "{}", R"({"weight_map": []})", R"({"weight_map": {}})",
        R"({"weight_map": {"a": "../x.safetensors"}})",
        R"({"weight_map": {"a": "/x.safetensors"}})", R"({"weight_map": {"a": "d/x.safetensors"}})",
        R"({"weight_map": {"a": "x.bin"}})", R"({"weight_map": {"a": 3}})"}) {
    SCOPED_TRACE(bad);
    EXPECT_EQ(error_of([&] { hub_index_shards(bad, "i"); }).rfind("hub_bad_response: ", 0), 0u);
  }
}

TEST(HubHttp, RedirectsAndEscapes) {
  EXPECT_EQ(http_origin("https://Hub.example:8080/a/b?x"), "https://hub.example:8080");
  EXPECT_EQ(http_origin("ftp://x/y"), "");
  EXPECT_EQ(http_join("http://h:1/a/b", "/c/d"), "http://h:1/c/d");
  EXPECT_EQ(http_join("http://h:1/a", "https://cdn/x?sig=1"), "https://cdn/x?sig=1");
  for (const char* bad : {"//evil/x", "file:///etc/passwd", "relative/x", "", "/a b", "/a\r\nX: y"})
    EXPECT_NE(error_of([&] { http_join("http://h/a", bad); }).find("hub_bad_response"),
              std::string::npos)
        << bad;
  EXPECT_EQ(http_escape("Q4/a b+c.gguf", true), "Q4/a%20b%2Bc.gguf");
  EXPECT_EQ(http_escape("refs/pr/1", false), "refs%2Fpr%2F1");
  uint64_t v = 0;
  EXPECT_TRUE(http_parse_size("12345", v));
  EXPECT_EQ(v, 12345u);
  for (const char* bad : {"", "-1", "1e9", " 1", "99999999999999999", "0x10"})
    EXPECT_FALSE(http_parse_size(bad, v)) << bad;
}

TEST(HubSettings, FromTheEnvironment) {
  const fs::path root = fs::temp_directory_path() / "memra_hub_settings";
  fs::remove_all(root);
  fs::create_directories(root / "home" / ".cache" / "huggingface");
  std::ofstream(root / "home" / ".cache" / "huggingface" / "token") << "  hf_fromfile\n";
  std::map<std::string, std::string> env = {{"HOME", (root / "home").string()}};
  auto get = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  HubSettings s = hub_settings_from_env(get);
  EXPECT_EQ(s.cache, root / "home" / ".cache" / "huggingface" / "hub");
  EXPECT_EQ(s.endpoint, "https://huggingface.co");
  EXPECT_EQ(s.token, "hf_fromfile");
  EXPECT_FALSE(s.offline);
  env["HF_HOME"] = (root / "hfhome").string();
  env["HF_ENDPOINT"] = "http://127.0.0.1:9/";
  env["HF_HUB_OFFLINE"] = "yes";
  env["HF_TOKEN"] = "hf_env";
  s = hub_settings_from_env(get);
  EXPECT_EQ(s.cache, root / "hfhome" / "hub");
  EXPECT_EQ(s.endpoint, "http://127.0.0.1:9");
  EXPECT_EQ(s.token, "hf_env");
  EXPECT_EQ(s.token_origin, "HF_TOKEN");
  EXPECT_TRUE(s.offline);
  env["HF_HUB_CACHE"] = "/c";
  EXPECT_EQ(hub_settings_from_env(get).cache, "/c");
  for (auto [var, value] :
       std::vector<std::pair<std::string, std::string>>{{"HF_ENDPOINT", "file:///etc"},
                                                        {"HF_ENDPOINT", "http://a b"},
                                                        {"HF_TOKEN", "hf_a\r\nX-Evil: 1"},
                                                        {"HF_HUB_DOWNLOAD_TIMEOUT", "0"},
                                                        {"HF_HUB_DOWNLOAD_TIMEOUT", "10s"}}) {
    auto saved = env;
    env[var] = value;
    const std::string e = error_of([&] { hub_settings_from_env(get); });
    EXPECT_NE(e.find(var), std::string::npos) << var << "=" << value << ": " << e;
    env = saved;
  }
  fs::remove_all(root);
}

TEST(HubHash, Sha256AndGitSha1) {
  const std::string abc = "abc";
  BlobHasher sha("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", abc.size());
  sha.update(abc.data(), abc.size());
  EXPECT_EQ(sha.hex_digest(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string hello = "hello\n";  // `git hash-object` of this file
  BlobHasher git("ce013625030ba8dba906f756967f9e9ca394464a", hello.size());
  git.update("junk", 4);
  git.reset();
  git.update(hello.data(), hello.size());
  EXPECT_EQ(git.hex_digest(), "ce013625030ba8dba906f756967f9e9ca394464a");
  EXPECT_NE(
      error_of([] { BlobHasher("d41d8cd98f00b204e9800998ecf8427e", 0); }).find("hub_bad_response"),
      std::string::npos);  // an md5 etag cannot be verified
}

TEST(HubCacheLayout, RefsAndLinks) {
  const fs::path root = fs::temp_directory_path() / "memra_hub_cache_layout";
  fs::remove_all(root);
  const HubCache cache(root, "org", "name");
  const std::string commit = "0123456789abcdef0123456789abcdef01234567";
  EXPECT_EQ(cache.read_ref("main"), std::nullopt);
  cache.write_ref("main", commit);
  cache.write_ref(commit, commit);  // a commit needs no ref
  EXPECT_EQ(cache.read_ref("main"), commit);
  EXPECT_FALSE(fs::exists(cache.ref_path(commit)));
  fs::create_directories(root / "models--org--name" / "blobs");
  std::ofstream(cache.blob("abc")) << "x";
  cache.link(commit, "Q4/m.gguf", "abc");
  cache.link(commit, "Q4/m.gguf", "abc");  // again: unchanged
  EXPECT_EQ(fs::read_symlink(cache.snapshot(commit) / "Q4" / "m.gguf"), "../../../blobs/abc");
  std::vector<std::string> dangling;
  cache.link(commit, "gone.json", "nothing");
  EXPECT_EQ(cache.snapshot_files(commit, &dangling), std::vector<std::string>{"Q4/m.gguf"});
  EXPECT_EQ(dangling, std::vector<std::string>{"gone.json"});
  std::ofstream(cache.ref_path("main")) << "not a commit";
  EXPECT_NE(error_of([&] { cache.read_ref("main"); }).find("40-hex"), std::string::npos);
  EXPECT_EQ(cache.lock_file("abc"), root / ".locks" / "models--org--name" / "abc.lock");
  { HubLock lock(cache.lock_file("abc"), "test"); }
  fs::remove_all(root);
}

}  // namespace
}  // namespace memra::hub
