// hf: source parsing, settings from the environment, and the name checks (hub_source.h).
#include "hub/hub_source.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>

#include "hub/hub_error.h"

namespace memra::hub {

namespace fs = std::filesystem;

namespace {

bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0;
}

bool env_true(const char* v) {
  if (v == nullptr) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s == "1" || s == "ON" || s == "YES" || s == "TRUE";
}

std::string env_str(const EnvFn& env, const char* name) {
  const char* v = env(name);
  return v == nullptr ? std::string() : std::string(v);
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

// A token goes into an HTTP header: printable ASCII without spaces only (no header injection).
void check_token(const std::string& token, const std::string& origin) {
  const bool ok = token.size() <= 1024 && std::all_of(token.begin(), token.end(),
                                                      [](char c) { return c > 0x20 && c < 0x7f; });
  if (!ok)
    hub_fail(HubErrorKind::bad_source,
             "the token from {} is not a Hugging Face token (printable characters only, at most "
             "1024); fix or unset it",
             origin);
}

}  // namespace

std::string HubSource::display() const {
  std::string out = repo();
  if (!quant.empty()) out += ":" + quant;
  if (revision != "main") out += "@" + revision;
  return out;
}

bool hub_valid_repo_part(std::string_view s) {
  if (s.empty() || s.size() > 96 || s == "." || s == ".." || s.find("--") != s.npos) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return is_alnum(c) || c == '-' || c == '_' || c == '.'; });
}

bool hub_valid_revision(std::string_view s) {
  if (s.empty() || s.size() > 200 || s.front() == '/' || s.front() == '-' || s.back() == '/')
    return false;
  if (s.find("..") != s.npos || s.find("//") != s.npos || s == "." || s.starts_with("./") ||
      s.ends_with("/.") || s.find("/./") != s.npos)
    return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return is_alnum(c) || c == '-' || c == '_' || c == '.' || c == '/';
  });
}

bool hub_is_commit(std::string_view s) {
  return s.size() == 40 && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool hub_valid_file_path(std::string_view path) {
  if (path.empty() || path.size() > 512) return false;
  size_t depth = 0;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view seg = path.substr(start, end - start);
    if (seg.empty() || seg == "." || seg == ".." || seg.front() == ' ' || seg.size() > 255)
      return false;
    const bool chars_ok = std::all_of(seg.begin(), seg.end(), [](char c) {
      return is_alnum(c) || std::string_view("._+=@,() -").find(c) != std::string_view::npos;
    });
    if (!chars_ok || ++depth > 8) return false;
    start = end + 1;
  }
  return true;
}

bool hub_valid_etag(std::string_view etag) {
  return !etag.empty() && etag.size() <= 128 && std::all_of(etag.begin(), etag.end(), [](char c) {
    return is_alnum(c) || c == '-' || c == '_';
  });
}

std::string hub_printable(std::string_view text, size_t max) {
  std::string out;
  for (char c : text.substr(0, max)) out += (c >= 0x20 && c < 0x7f) ? c : '?';
  if (text.size() > max) out += "...";
  return out;
}

HubSource hub_source_parse(const std::string& source) {
  if (!source.starts_with("hf:"))
    hub_fail(HubErrorKind::bad_source, "'{}' does not start with hf:", hub_printable(source));
  HubSource out;
  std::string spec = source.substr(3);
  out.revision = "main";
  if (const size_t at = spec.find('@'); at != std::string::npos) {
    out.revision = spec.substr(at + 1);
    spec.resize(at);
    if (!hub_valid_revision(out.revision))
      hub_fail(HubErrorKind::bad_source,
               "'{}': revision '{}' is not a branch, tag or commit ([A-Za-z0-9._/-], no '..')",
               hub_printable(source), hub_printable(out.revision));
  }
  if (const size_t colon = spec.find(':'); colon != std::string::npos) {
    out.quant = spec.substr(colon + 1);
    spec.resize(colon);
    if (out.quant.empty())
      hub_fail(HubErrorKind::bad_source, "'{}': empty quant after ':'", hub_printable(source));
  }
  const size_t slash = spec.find('/');
  out.org = spec.substr(0, slash);
  out.name = slash == std::string::npos ? "" : spec.substr(slash + 1);
  if (!hub_valid_repo_part(out.org) || !hub_valid_repo_part(out.name) ||
      !hub_valid_repo_part(out.quant.empty() ? "q" : out.quant))
    hub_fail(HubErrorKind::bad_source,
             "'{}' is not hf:org/name[:QUANT][@revision] (letters, digits, '-', '_', '.' in each "
             "part)",
             hub_printable(source));
  return out;
}

HubSettings hub_settings_from_env(const EnvFn& env) {
  HubSettings s;
  const std::string home = env_str(env, "HOME");
  const std::string xdg = env_str(env, "XDG_CACHE_HOME");
  fs::path hf_home = env_str(env, "HF_HOME");
  if (hf_home.empty() && !xdg.empty()) hf_home = fs::path(xdg) / "huggingface";
  if (hf_home.empty() && !home.empty()) hf_home = fs::path(home) / ".cache" / "huggingface";
  if (auto v = env_str(env, "HF_HUB_CACHE"); !v.empty()) {
    s.cache = v;
  } else if (auto legacy = env_str(env, "HUGGINGFACE_HUB_CACHE"); !legacy.empty()) {
    s.cache = legacy;
  } else if (!hf_home.empty()) {
    s.cache = hf_home / "hub";
  } else {
    hub_fail(HubErrorKind::cache,
             "HOME is not set; cannot find the Hugging Face cache (set HF_HUB_CACHE or HF_HOME)");
  }

  s.endpoint = trim(env_str(env, "HF_ENDPOINT"));
  if (s.endpoint.empty()) s.endpoint = "https://huggingface.co";
  while (s.endpoint.size() > 1 && s.endpoint.back() == '/') s.endpoint.pop_back();
  const bool scheme_ok = s.endpoint.starts_with("http://") || s.endpoint.starts_with("https://");
  const bool chars_ok = std::all_of(s.endpoint.begin(), s.endpoint.end(),
                                    [](char c) { return c > 0x20 && c < 0x7f; });
  if (!scheme_ok || !chars_ok || s.endpoint.size() > 512 ||
      s.endpoint.find_first_of("?#") != std::string::npos)
    hub_fail(HubErrorKind::bad_source,
             "HF_ENDPOINT='{}' is not an http:// or https:// URL (example: "
             "https://huggingface.co or http://127.0.0.1:8000)",
             hub_printable(s.endpoint));

  s.offline = env_true(env("HF_HUB_OFFLINE")) || env_true(env("TRANSFORMERS_OFFLINE"));
  s.progress_bars = !env_true(env("HF_HUB_DISABLE_PROGRESS_BARS"));
  if (auto t = trim(env_str(env, "HF_HUB_DOWNLOAD_TIMEOUT")); !t.empty()) {
    char* end = nullptr;
    const long v = std::strtol(t.c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 3600)
      hub_fail(HubErrorKind::bad_source, "HF_HUB_DOWNLOAD_TIMEOUT='{}' is not 1..3600 seconds",
               hub_printable(t));
    s.timeout_s = v;
  }

  for (const char* var : {"HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"}) {
    if (auto t = trim(env_str(env, var)); !t.empty()) {
      check_token(t, var);
      s.token = t;
      s.token_origin = var;
      return s;
    }
  }
  fs::path token_path = env_str(env, "HF_TOKEN_PATH");
  if (token_path.empty() && !hf_home.empty()) token_path = hf_home / "token";
  std::error_code ec;
  if (!token_path.empty() && fs::is_regular_file(token_path, ec) &&
      fs::file_size(token_path, ec) <= 4096) {
    std::ifstream in(token_path);
    std::string t;
    std::getline(in, t);
    t = trim(t);
    if (!t.empty()) {
      check_token(t, token_path.string());
      s.token = t;
      s.token_origin = token_path.string();
    }
  }
  return s;
}

HubSettings hub_settings_from_env() {
  return hub_settings_from_env([](const char* name) { return std::getenv(name); });
}

}  // namespace memra::hub
