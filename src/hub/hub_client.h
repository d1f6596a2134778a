// The hub's HTTP endpoints this client uses (the ones huggingface_hub uses for the same job):
//   GET  {endpoint}/api/models/{org}/{name}/revision/{rev}?blobs=true  commit + file list (JSON)
//   HEAD {endpoint}/{org}/{name}/resolve/{commit}/{path}  X-Repo-Commit, X-Linked-Etag / ETag,
//        X-Linked-Size / Content-Length, and a Location when the bytes live elsewhere (LFS/CDN)
//   GET  that location with Range: bytes=N- to resume.
// Relative redirects (a renamed repo) are followed on the hub; the token is sent only to the
// HF_ENDPOINT host. Error statuses become named HubErrors saying what to do.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hub/hub_http.h"
#include "hub/hub_source.h"

namespace memra::hub {

struct RepoFile {
  std::string path;
  uint64_t size = 0;
  bool has_size = false;
  std::string sha256;  // LFS files: the content hash the hub publishes
};

struct RepoInfo {
  std::string commit;
  std::vector<RepoFile> files;
  const RepoFile* find(const std::string& path) const;
  std::vector<std::string> paths() const;
};

struct FileMeta {
  std::string etag;  // normalized (no W/, no quotes): the blob's name
  uint64_t size = 0;
  std::string commit;
  std::string url;  // where to GET the bytes
};

class HubClient {
 public:
  HubClient(HubSettings settings, HubSource source);

  RepoInfo repo_info() const;
  FileMeta file_meta(const std::string& commit, const std::string& path) const;
  // GETs meta.url from byte `offset` (a Range request when > 0), following up to 5 redirects.
  // `begin(resumed)` is told whether the server honoured the range (false: the body starts at
  // byte 0), then `sink` gets the bytes.
  void get_blob(const FileMeta& meta, uint64_t offset, const std::function<void(bool)>& begin,
                const std::function<void(const char*, size_t)>& sink) const;

  const HubSettings& settings() const { return settings_; }
  const HubSource& source() const { return source_; }

 private:
  std::vector<std::string> headers_for(const std::string& url) const;
  // HubError for an error status of a request about `what`.
  [[noreturn]] void fail_status(const HttpResponse& r, const std::string& url,
                                const std::string& what) const;

  HubSettings settings_;
  HubSource source_;
};

}  // namespace memra::hub
