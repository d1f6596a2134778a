// The hub's HTTP endpoints and their errors (hub_client.h).
#include "hub/hub_client.h"

#include <nlohmann/json.hpp>

#include "hub/hub_error.h"

namespace memra::hub {

namespace {

constexpr int kMaxRedirects = 5;
constexpr size_t kMaxSiblings = 200000;

std::string header(const HttpResponse& r, const std::string& name) {
  auto it = r.headers.find(name);
  return it == r.headers.end() ? std::string() : it->second;
}

bool is_redirect(long status) {
  return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

// huggingface_hub's normal form: W/"abc" -> abc.
std::string normalize_etag(std::string etag) {
  if (etag.starts_with("W/")) etag.erase(0, 2);
  while (!etag.empty() && etag.front() == '"') etag.erase(0, 1);
  while (!etag.empty() && etag.back() == '"') etag.pop_back();
  return etag;
}

bool is_hex(const std::string& s, size_t n) {
  return s.size() == n && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

RepoFile parse_sibling(const nlohmann::json& s) {
  RepoFile f;
  if (!s.is_object() || !s.contains("rfilename") || !s["rfilename"].is_string()) return f;
  f.path = s["rfilename"].get<std::string>();
  if (s.contains("size") && s["size"].is_number_unsigned()) {
    f.size = s["size"].get<uint64_t>();
    f.has_size = true;
  }
  if (s.contains("lfs") && s["lfs"].is_object()) {
    const nlohmann::json& lfs = s["lfs"];
    if (lfs.contains("sha256") && lfs["sha256"].is_string() &&
        is_hex(lfs["sha256"].get<std::string>(), 64))
      f.sha256 = lfs["sha256"].get<std::string>();
    if (lfs.contains("size") && lfs["size"].is_number_unsigned()) {
      f.size = lfs["size"].get<uint64_t>();
      f.has_size = true;
    }
  }
  return f;
}

}  // namespace

const RepoFile* RepoInfo::find(const std::string& path) const {
  for (const RepoFile& f : files)
    if (f.path == path) return &f;
  return nullptr;
}

std::vector<std::string> RepoInfo::paths() const {
  std::vector<std::string> out;
  for (const RepoFile& f : files) out.push_back(f.path);
  return out;
}

HubClient::HubClient(HubSettings settings, HubSource source)
    : settings_(std::move(settings)), source_(std::move(source)) {}

std::vector<std::string> HubClient::headers_for(const std::string& url) const {
  std::vector<std::string> h = {"Accept-Encoding: identity"};
  // The token goes to the hub only, never to a CDN or another host a redirect names.
  if (!settings_.token.empty() && http_origin(url) == http_origin(settings_.endpoint))
    h.push_back("Authorization: Bearer " + settings_.token);
  return h;
}

void HubClient::fail_status(const HttpResponse& r, const std::string& url,
                            const std::string& what) const {
  const std::string code = hub_printable(header(r, "x-error-code"), 60);
  const std::string message = hub_printable(header(r, "x-error-message"));
  const std::string said = message.empty() ? "" : " (the hub says: " + message + ")";
  const std::string repo = source_.repo();
  const std::string page = settings_.endpoint + "/" + repo;
  const std::string token =
      settings_.token.empty() ? "no token is set" : "the token from " + settings_.token_origin;
  if (code == "GatedRepo" || r.status == 403)
    hub_fail(HubErrorKind::gated,
             "{}: HTTP {}{}: {} is gated or your token lacks access ({}). Accept the model's "
             "license at {} with your account, then set HF_TOKEN to a token of that account "
             "(or run `hf auth login`)",
             what, r.status, said, repo, token, page);
  if (r.status == 401)
    hub_fail(HubErrorKind::unauthorized,
             "{}: HTTP 401{}: {} is private or gated, or does not exist, and {} was not enough "
             "({}). If you can see it at {}, set HF_TOKEN to a token with read access (or run "
             "`hf auth login`)",
             what, said, repo, settings_.token.empty() ? "anonymous access" : "the token", token,
             page);
  if (r.status == 404) {
    if (code == "RevisionNotFound")
      hub_fail(HubErrorKind::not_found, "{}: revision '{}' does not exist in {}{}", what,
               source_.revision, repo, said);
    if (code == "EntryNotFound")
      hub_fail(HubErrorKind::not_found, "{}: no such file in {}{}", what, repo, said);
    hub_fail(HubErrorKind::not_found,
             "{}: {} was not found on {}{} (check the name at {}; a private repository also needs "
             "HF_TOKEN)",
             what, repo, settings_.endpoint, said, page);
  }
  hub_fail(HubErrorKind::http, "{}: HTTP {} from {}{}; try again later", what, r.status,
           hub_printable(url), said);
}

RepoInfo HubClient::repo_info() const {
  const std::string what = "listing " + source_.display();
  std::string url = settings_.endpoint + "/api/models/" + source_.org + "/" + source_.name +
                    "/revision/" + http_escape(source_.revision, false) + "?blobs=true";
  HttpResponse r;
  for (int hop = 0;; ++hop) {
    HttpRequest req;
    req.url = url;
    req.headers = headers_for(url);
    req.timeout_s = settings_.timeout_s;
    r = http_send(req);
    if (!is_redirect(r.status) || header(r, "location").empty()) break;
    const std::string next = http_join(url, header(r, "location"));
    if (hop >= kMaxRedirects || http_origin(next) != http_origin(url))
      hub_fail(HubErrorKind::bad_response, "{}: {} redirects too often or off the hub ({})", what,
               hub_printable(url), hub_printable(next));
    url = next;
  }
  if (r.status != 200) fail_status(r, url, what);
  const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("sha") || !j["sha"].is_string() ||
      !is_hex(j["sha"].get<std::string>(), 40) || !j.contains("siblings") ||
      !j["siblings"].is_array())
    hub_fail(HubErrorKind::bad_response,
             "{}: {} did not answer with a model description (JSON with a 40-hex 'sha' and "
             "'siblings'); is HF_ENDPOINT={} a Hugging Face Hub?",
             what, hub_printable(url), settings_.endpoint);
  if (j["siblings"].size() > kMaxSiblings)
    hub_fail(HubErrorKind::bad_response, "{}: more than {} files listed", what, kMaxSiblings);
  RepoInfo info;
  info.commit = j["sha"].get<std::string>();
  for (const nlohmann::json& s : j["siblings"]) {
    RepoFile f = parse_sibling(s);
    // A name that could leave the snapshot folder (or is just odd) is never used.
    if (hub_valid_file_path(f.path)) info.files.push_back(std::move(f));
  }
  return info;
}

FileMeta HubClient::file_meta(const std::string& commit, const std::string& path) const {
  const std::string what = source_.repo() + "/" + path;
  std::string url = settings_.endpoint + "/" + source_.org + "/" + source_.name + "/resolve/" +
                    commit + "/" + http_escape(path, true);
  HttpResponse r;
  for (int hop = 0;; ++hop) {
    HttpRequest req;
    req.method = "HEAD";
    req.url = url;
    req.headers = headers_for(url);
    req.timeout_s = settings_.timeout_s;
    r = http_send(req);
    if (!is_redirect(r.status) || header(r, "location").empty()) break;
    const std::string next = http_join(url, header(r, "location"));
    if (http_origin(next) != http_origin(url)) break;  // a CDN: this response has the metadata
    if (hop >= kMaxRedirects)
      hub_fail(HubErrorKind::bad_response, "{}: more than {} redirects", what, kMaxRedirects);
    url = next;
  }
  if (r.status >= 400 || r.status < 200) fail_status(r, url, what);
  FileMeta m;
  m.commit = header(r, "x-repo-commit");
  if (!m.commit.empty() && m.commit != commit)
    hub_fail(HubErrorKind::bad_response, "{}: asked for commit {} but the hub answered for {}",
             what, commit, hub_printable(m.commit, 64));
  m.commit = commit;
  std::string etag = header(r, "x-linked-etag");
  if (etag.empty()) etag = header(r, "etag");
  m.etag = normalize_etag(etag);
  if (!hub_valid_etag(m.etag))
    hub_fail(HubErrorKind::bad_response,
             "{}: the hub sent no usable ETag ('{}'), so the file cannot be named or verified",
             what, hub_printable(etag));
  const bool redirect = is_redirect(r.status) && !header(r, "location").empty();
  std::string size = header(r, "x-linked-size");
  if (size.empty() && !redirect) size = header(r, "content-length");
  if (!http_parse_size(size, m.size))
    hub_fail(HubErrorKind::bad_response, "{}: the hub sent no usable size ('{}')", what,
             hub_printable(size));
  m.url = redirect ? http_join(url, header(r, "location")) : url;
  return m;
}

void HubClient::get_blob(const FileMeta& meta, uint64_t offset,
                         const std::function<void(bool)>& begin,
                         const std::function<void(const char*, size_t)>& sink) const {
  const std::string what = source_.repo() + " blob " + meta.etag;
  std::string url = meta.url;
  for (int hop = 0; hop <= kMaxRedirects; ++hop) {
    HttpRequest req;
    req.url = url;
    req.headers = headers_for(url);
    if (offset > 0) req.headers.push_back(fmt::format("Range: bytes={}-", offset));
    req.timeout_s = settings_.timeout_s;
    bool streaming = false;
    req.begin = [&](long status, const std::map<std::string, std::string>& h) {
      if (status != 200 && status != 206) return;
      const bool resumed = status == 206 && offset > 0;
      if (status == 206) {
        auto it = h.find("content-range");
        const std::string want = fmt::format("bytes {}-", offset);
        if (it == h.end() || !it->second.starts_with(want))
          hub_fail(HubErrorKind::bad_response, "{}: asked for bytes from {} but got range '{}'",
                   what, offset, it == h.end() ? "" : hub_printable(it->second));
      }
      streaming = true;
      begin(resumed);
    };
    req.sink = [&](const char* data, size_t size) {
      if (streaming) sink(data, size);
    };
    const HttpResponse r = http_send(req);
    if (r.status == 200 || r.status == 206) return;
    if (is_redirect(r.status) && !header(r, "location").empty()) {
      url = http_join(url, header(r, "location"));
      continue;
    }
    if (r.status == 416 && offset > 0) {  // the partial file is longer than the blob: restart
      get_blob(meta, 0, begin, sink);
      return;
    }
    fail_status(r, url, what);
  }
  hub_fail(HubErrorKind::bad_response, "{}: more than {} redirects", what, kMaxRedirects);
}

}  // namespace memra::hub
