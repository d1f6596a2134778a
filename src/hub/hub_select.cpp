// File selection for a model source (hub_select.h).
#include "hub/hub_select.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "hub/hub_error.h"
#include "hub/hub_source.h"

namespace memra::hub {

namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool is_gguf(const std::string& path) {
  const std::string l = lower(path);
  return l.ends_with(".gguf") && std::count(path.begin(), path.end(), '/') <= 1 &&
         l.find("mmproj") == std::string::npos;
}

// `quant` occurs in `path` with no letter or digit right before or after it.
bool has_token(const std::string& path, const std::string& quant) {
  const std::string p = lower(path), q = lower(quant);
  for (size_t at = p.find(q); at != std::string::npos; at = p.find(q, at + 1)) {
    const bool left = at == 0 || !std::isalnum(static_cast<unsigned char>(p[at - 1]));
    const size_t end = at + q.size();
    const bool right = end == p.size() || !std::isalnum(static_cast<unsigned char>(p[end]));
    if (left && right) return true;
  }
  return false;
}

// The path without its split part: shards of one GGUF share it.
std::string split_group(const std::string& path) {
  const SplitPart part = hub_split_part(path);
  if (part.count == 0) return path;
  return path.substr(0, path.size() - std::string("-00001-of-00003.gguf").size()) + ".gguf";
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

// One GGUF choice (a file, or every shard of one split file): all its files, first shard first.
Selection gguf_choice(const std::vector<std::string>& group, const std::string& display) {
  Selection sel;
  sel.files = group;
  std::sort(sel.files.begin(), sel.files.end());
  sel.primary = sel.files.front();
  const SplitPart first = hub_split_part(sel.primary);
  if (first.count > 0 && (first.index != 1 || static_cast<int>(sel.files.size()) != first.count))
    hub_fail(HubErrorKind::not_found, "model {}: split GGUF {} has {} of its {} parts", display,
             sel.primary, sel.files.size(), first.count);
  return sel;
}

Selection checkpoint(const std::set<std::string>& have, const std::string& display,
                     const std::string& where) {
  Selection sel;
  sel.checkpoint = true;
  for (const char* f : {"config.json", "generation_config.json", "tokenizer.json",
                        "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                        "chat_template.jinja", "vocab.json", "merges.txt", "added_tokens.json"})
    if (have.count(f)) sel.files.push_back(f);
  if (have.count("model.safetensors.index.json")) {
    sel.index = "model.safetensors.index.json";
    sel.files.push_back(sel.index);  // its shards are added once it is read
    return sel;
  }
  if (have.count("model.safetensors")) {
    sel.files.push_back("model.safetensors");
    return sel;
  }
  std::vector<std::string> top;
  for (const std::string& f : have)
    if (f.find('/') == std::string::npos && lower(f).ends_with(".safetensors")) top.push_back(f);
  if (top.size() == 1) {
    sel.files.push_back(top[0]);
    return sel;
  }
  std::vector<std::string> pickles;
  for (const std::string& f : have)
    if (lower(f).ends_with(".bin") || lower(f).ends_with(".pt") || lower(f).ends_with(".pth"))
      pickles.push_back(f);
  hub_fail(HubErrorKind::not_found, "model {} has config.json but {} safetensors weights in {}{}",
           display, top.empty() ? "no" : "several unindexed", where,
           pickles.empty() ? std::string()
                           : " (pickle weights " + join(pickles) +
                                 " are never loaded: they can run code; pick a safetensors or "
                                 "GGUF repository)");
}

}  // namespace

SplitPart hub_split_part(const std::string& path) {
  // ...-NNNNN-of-MMMMM.gguf
  const std::string l = lower(path);
  constexpr size_t kTail = sizeof("-00001-of-00003.gguf") - 1;
  if (l.size() < kTail || !l.ends_with(".gguf")) return {};
  const std::string t = l.substr(l.size() - kTail);
  auto digits = [&](size_t at) {
    int v = 0;
    for (size_t i = at; i < at + 5; ++i) {
      if (!std::isdigit(static_cast<unsigned char>(t[i]))) return -1;
      v = v * 10 + (t[i] - '0');
    }
    return v;
  };
  if (t[0] != '-' || t.compare(6, 4, "-of-") != 0) return {};
  const int index = digits(1), count = digits(10);
  if (index < 1 || count < 1 || index > count) return {};
  return {index, count};
}

std::vector<std::string> hub_quants(const std::vector<std::string>& files) {
  std::set<std::string> out;
  for (const std::string& f : files) {
    if (!is_gguf(f)) continue;
    std::string stem = base_name(split_group(f));
    stem.resize(stem.size() - 5);  // .gguf
    const size_t cut = stem.find_last_of("-.");
    std::string label = upper(cut == std::string::npos ? stem : stem.substr(cut + 1));
    const bool has_digit = std::any_of(label.begin(), label.end(),
                                       [](char c) { return std::isdigit((unsigned char)c); });
    out.insert(has_digit ? label : base_name(f));
  }
  return {out.begin(), out.end()};
}

Selection hub_select(const std::vector<std::string>& files, const std::string& quant,
                     const std::string& display, const std::string& where) {
  const std::set<std::string> have(files.begin(), files.end());
  std::map<std::string, std::vector<std::string>> groups;  // split group -> files
  std::vector<std::string> ggufs;
  for (const std::string& f : have) {
    if (!is_gguf(f)) continue;
    ggufs.push_back(f);
    if (quant.empty() || has_token(f, quant)) groups[split_group(f)].push_back(f);
  }
  const std::string quants = join(hub_quants(files));
  if (quant.empty()) {
    const bool weights = std::any_of(have.begin(), have.end(), [](const std::string& f) {
      return lower(f).ends_with(".safetensors") || f == "model.safetensors.index.json";
    });
    if (have.count("config.json") && (weights || ggufs.empty()))
      return checkpoint(have, display, where);
    if (groups.size() == 1) return gguf_choice(groups.begin()->second, display);
    if (groups.empty())
      hub_fail(HubErrorKind::not_found,
               "model {} has neither GGUF files nor config.json with safetensors weights in {}",
               display, where);
    hub_fail(HubErrorKind::bad_source,
             "model {} has several GGUF files; pick a quant with hf:{}:QUANT (available: {})",
             display, display, quants);
  }
  if (groups.size() == 1) return gguf_choice(groups.begin()->second, display);
  std::vector<std::string> matches;
  for (const auto& [group, members] : groups) matches.push_back(base_name(group));
  if (groups.empty())
    hub_fail(HubErrorKind::not_found,
             "model {}: no GGUF file matches quant '{}' in {} (available quants: {}; GGUF files: "
             "{})",
             display, quant, where, quants, join(ggufs));
  hub_fail(HubErrorKind::bad_source,
           "model {}: several GGUF files match quant '{}' in {} ({}); name the quant exactly "
           "(available quants: {})",
           display, quant, where, join(matches), quants);
}

std::vector<std::string> hub_index_shards(const std::string& index_json, const std::string& what) {
  const nlohmann::json j = nlohmann::json::parse(index_json, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("weight_map") ||
      !j["weight_map"].is_object())
    hub_fail(HubErrorKind::bad_response, "{} is not a safetensors index (no weight_map object)",
             what);
  std::set<std::string> shards;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    const std::string name = file.is_string() ? file.get<std::string>() : std::string();
    if (name.find('/') != std::string::npos || !hub_valid_file_path(name) ||
        !lower(name).ends_with(".safetensors"))
      hub_fail(HubErrorKind::bad_response,
               "{}: weight_map['{}'] = '{}' is not a plain .safetensors file name", what,
               hub_printable(tensor), hub_printable(file.dump()));
    shards.insert(name);
    if (shards.size() > 10000) hub_fail(HubErrorKind::bad_response, "{}: too many shards", what);
  }
  if (shards.empty()) hub_fail(HubErrorKind::bad_response, "{}: weight_map is empty", what);
  return {shards.begin(), shards.end()};
}

}  // namespace memra::hub
