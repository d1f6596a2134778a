// One repository's folder in the Hugging Face hub cache, laid out as huggingface_hub does so
// either tool finds what the other wrote:
//   <cache>/models--org--name/refs/<revision>          the commit (40 hex, no newline)
//   <cache>/models--org--name/blobs/<etag>             file contents, named by sha256 or git sha1
//   <cache>/models--org--name/blobs/<etag>.incomplete  a partial download (resumed)
//   <cache>/models--org--name/snapshots/<commit>/<path> relative symlink to ../../blobs/<etag>
//   <cache>/.locks/models--org--name/<etag>.lock       flock(2) lock held while downloading
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace memra::hub {

class HubCache {
 public:
  HubCache(std::filesystem::path root, const std::string& org, const std::string& name);

  const std::filesystem::path& repo_dir() const { return repo_dir_; }
  std::filesystem::path snapshot(const std::string& commit) const;
  std::filesystem::path blob(const std::string& etag) const;
  std::filesystem::path incomplete(const std::string& etag) const;
  std::filesystem::path lock_file(const std::string& etag) const;
  std::filesystem::path ref_path(const std::string& revision) const;

  // The commit refs/<revision> names; nullopt when there is no such file. A file that is not a
  // 40-hex commit is HubError(cache) naming it.
  std::optional<std::string> read_ref(const std::string& revision) const;
  // Writes refs/<revision> atomically (temp file + rename); nothing when revision is the commit.
  void write_ref(const std::string& revision, const std::string& commit) const;

  // Points snapshots/<commit>/<path> at blobs/<etag> with a relative symlink, replacing an old
  // link atomically.
  void link(const std::string& commit, const std::string& path, const std::string& etag) const;

  // Files under snapshots/<commit>/ (relative '/'-separated paths, up to 2 folders deep) whose
  // link resolves to an existing file; `dangling` gets the ones that do not.
  std::vector<std::string> snapshot_files(const std::string& commit,
                                          std::vector<std::string>* dangling = nullptr) const;

 private:
  std::filesystem::path root_, repo_dir_, locks_dir_;
};

// An exclusive flock(2) on a lock file (what huggingface_hub's filelock takes on Unix); blocks
// until it is free, logging once when another process holds it. Released on destruction.
class HubLock {
 public:
  explicit HubLock(const std::filesystem::path& path, const std::string& what);
  ~HubLock();
  HubLock(const HubLock&) = delete;
  HubLock& operator=(const HubLock&) = delete;

 private:
  int fd_ = -1;
};

// Free bytes for an unprivileged writer in the file system holding `dir`; nullopt if unknown.
std::optional<uint64_t> hub_free_bytes(const std::filesystem::path& dir);

}  // namespace memra::hub
