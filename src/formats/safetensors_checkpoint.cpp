// Checkpoint folders: a single safetensors file or shards listed by model.safetensors.index.json.
// The index is untrusted too: shard names must stay inside the folder, each shard must hold
// exactly the tensors the index assigns to it, and no tensor may appear twice.
#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "formats/hf_json.h"
#include "formats/safetensors.h"

namespace memra::safetensors {
namespace fs = std::filesystem;
namespace {

constexpr int kMaxIndexDepth = 4;

void check_shard_name(const std::string& shard, const std::string& index_path) {
  const bool escapes =
      shard.empty() || shard == "." || shard == ".." || shard.find('/') != std::string::npos ||
      shard.find('\\') != std::string::npos || shard.find('\0') != std::string::npos;
  if (escapes)
    fail(ErrorCode::malformed_file,
         "{}: weight_map shard '{}' must be a file name inside the checkpoint folder (no '/', "
         "'\\', '..' or absolute paths)",
         index_path, shard);
  if (is_pickle_name(shard)) refuse_pickle((fs::path(index_path).parent_path() / shard).string());
  if (!shard.ends_with(".safetensors"))
    fail(ErrorCode::malformed_file, "{}: weight_map shard '{}' is not a .safetensors file",
         index_path, shard);
}

Checkpoint single(const std::string& path) {
  Checkpoint c;
  c.shards.push_back(File::open(path));
  for (size_t i = 0; i < c.shards[0].entries().size(); ++i)
    c.tensors.emplace_back(c.shards[0].entries()[i].name, Checkpoint::Ref{0, i});
  return c;
}

}  // namespace

Checkpoint open_index(const std::string& index_path) {
  const nlohmann::json index = json_read_file(index_path, kMaxIndexBytes, kMaxIndexDepth);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
    fail(ErrorCode::malformed_file, "{}: weight_map must be an object of tensor -> shard file",
         index_path);
  std::map<std::string, std::set<std::string>> by_shard;  // shard file -> tensor names
  for (const auto& [tensor, shard] : index["weight_map"].items()) {
    if (!shard.is_string())
      fail(ErrorCode::malformed_file, "{}: weight_map['{}'] must be a string, got {}", index_path,
           tensor, json_type_name(shard));
    check_shard_name(shard.get<std::string>(), index_path);
    by_shard[shard.get<std::string>()].insert(tensor);
  }
  if (by_shard.empty()) fail(ErrorCode::malformed_file, "{}: weight_map is empty", index_path);

  const fs::path folder = fs::path(index_path).parent_path();
  Checkpoint c;
  for (const auto& [shard, names] : by_shard) {
    const fs::path shard_path = folder / shard;
    if (!fs::exists(shard_path))
      fail(ErrorCode::not_found, "{}: shard '{}' listed in weight_map does not exist at {}",
           index_path, shard, shard_path.string());
    const size_t shard_index = c.shards.size();
    c.shards.push_back(File::open(shard_path.string()));
    const File& file = c.shards.back();
    std::unordered_set<std::string_view> held;  // hashed: shards may list many tensors
    for (const Entry& e : file.entries()) held.insert(e.name);
    for (const std::string& name : names) {
      if (!held.contains(name))
        fail(ErrorCode::malformed_file, "{}: weight_map puts tensor '{}' in '{}', which lacks it",
             index_path, name, shard);
    }
    for (size_t i = 0; i < file.entries().size(); ++i) {
      const std::string& name = file.entries()[i].name;
      if (names.count(name) == 0)
        fail(ErrorCode::malformed_file,
             "{}: shard '{}' holds tensor '{}' that weight_map does not assign to it", index_path,
             shard, name);
      c.tensors.emplace_back(name, Checkpoint::Ref{shard_index, i});
    }
  }
  return c;
}

Checkpoint open_folder(const std::string& folder) {
  const fs::path dir(folder);
  if (!fs::is_directory(dir))
    fail(ErrorCode::not_found, "checkpoint folder '{}' does not exist", folder);
  if (fs::exists(dir / "model.safetensors.index.json"))
    return open_index((dir / "model.safetensors.index.json").string());
  if (fs::exists(dir / "model.safetensors")) return single((dir / "model.safetensors").string());

  std::vector<std::string> safetensors_files;
  std::vector<std::string> pickles;
  for (const auto& item : fs::directory_iterator(dir)) {
    const std::string name = item.path().filename().string();
    if (name.ends_with(".safetensors")) safetensors_files.push_back(name);
    if (is_pickle_name(name)) pickles.push_back(item.path().string());
  }
  std::sort(safetensors_files.begin(), safetensors_files.end());
  if (safetensors_files.size() == 1) return single((dir / safetensors_files[0]).string());
  if (safetensors_files.size() > 1)
    fail(ErrorCode::malformed_file,
         "'{}' holds {} .safetensors files ({}, ...) but no model.safetensors.index.json to say "
         "which tensors each holds",
         folder, safetensors_files.size(), safetensors_files[0]);
  if (!pickles.empty()) {
    std::sort(pickles.begin(), pickles.end());
    refuse_pickle(pickles[0]);
  }
  fail(ErrorCode::not_found,
       "'{}' has no model.safetensors, model.safetensors.index.json or other .safetensors file",
       folder);
}

}  // namespace memra::safetensors
