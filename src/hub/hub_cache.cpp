// The hub cache layout (hub_cache.h).
#include "hub/hub_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

#include "core/log.h"
#include "hub/hub_error.h"
#include "hub/hub_source.h"

namespace memra::hub {

namespace fs = std::filesystem;

namespace {

// A name unique to this process and call, for temp files renamed into place.
std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return fmt::format(".{}.{}.tmp", ::getpid(), counter.fetch_add(1));
}

void make_dirs(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    hub_fail(ec == std::errc::no_space_on_device ? HubErrorKind::disk_full : HubErrorKind::cache,
             "cannot create {}: {} (check HF_HUB_CACHE / HF_HOME and the folder's permissions)",
             dir.string(), ec.message());
}

}  // namespace

HubCache::HubCache(fs::path root, const std::string& org, const std::string& name)
    : root_(std::move(root)) {
  const std::string folder = "models--" + org + "--" + name;
  repo_dir_ = root_ / folder;
  locks_dir_ = root_ / ".locks" / folder;
}

fs::path HubCache::snapshot(const std::string& commit) const {
  return repo_dir_ / "snapshots" / commit;
}
fs::path HubCache::blob(const std::string& etag) const {
  return repo_dir_ / "blobs" / etag;
}
fs::path HubCache::incomplete(const std::string& etag) const {
  return repo_dir_ / "blobs" / (etag + ".incomplete");
}
fs::path HubCache::lock_file(const std::string& etag) const {
  return locks_dir_ / (etag + ".lock");
}
fs::path HubCache::ref_path(const std::string& revision) const {
  return repo_dir_ / "refs" / revision;
}

std::optional<std::string> HubCache::read_ref(const std::string& revision) const {
  const fs::path path = ref_path(revision);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  std::ifstream in(path);
  std::string commit(64, '\0');
  in.read(commit.data(), static_cast<std::streamsize>(commit.size()));
  commit.resize(static_cast<size_t>(in.gcount()));
  while (!commit.empty() && std::isspace(static_cast<unsigned char>(commit.back())))
    commit.pop_back();
  if (!hub_is_commit(commit))
    hub_fail(HubErrorKind::cache, "{}: expected a 40-hex commit id, got '{}' (delete the file)",
             path.string(), hub_printable(commit, 64));
  return commit;
}

void HubCache::write_ref(const std::string& revision, const std::string& commit) const {
  if (revision == commit) return;
  const fs::path path = ref_path(revision);
  if (read_ref(revision) == commit) return;
  make_dirs(path.parent_path());
  const fs::path tmp = path.string() + unique_suffix();
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << commit;
    if (!out.flush())
      hub_fail(HubErrorKind::cache, "cannot write {}: {}", tmp.string(), std::strerror(errno));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    hub_fail(HubErrorKind::cache, "cannot write {}", path.string());
  }
}

void HubCache::link(const std::string& commit, const std::string& path,
                    const std::string& etag) const {
  const fs::path dst = snapshot(commit) / path;
  make_dirs(dst.parent_path());
  const fs::path target = fs::path(blob(etag)).lexically_relative(dst.parent_path());
  std::error_code ec;
  if (fs::is_symlink(dst, ec) && fs::read_symlink(dst, ec) == target) return;
  const fs::path tmp = dst.string() + unique_suffix();
  fs::create_symlink(target, tmp, ec);
  if (!ec) fs::rename(tmp, dst, ec);
  if (ec) {
    std::error_code ignore;
    fs::remove(tmp, ignore);
    hub_fail(HubErrorKind::cache, "cannot link {} to {}: {}", dst.string(), target.string(),
             ec.message());
  }
}

std::vector<std::string> HubCache::snapshot_files(const std::string& commit,
                                                  std::vector<std::string>* dangling) const {
  std::vector<std::string> out;
  const fs::path snap = snapshot(commit);
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(snap, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it.depth() >= 2) it.disable_recursion_pending();
    std::error_code st;
    if (it->is_directory(st)) continue;
    const std::string rel = it->path().lexically_relative(snap).generic_string();
    if (fs::is_regular_file(it->path(), st))
      out.push_back(rel);
    else if (dangling != nullptr)
      dangling->push_back(rel);
  }
  std::sort(out.begin(), out.end());
  return out;
}

HubLock::HubLock(const fs::path& path, const std::string& what) {
  make_dirs(path.parent_path());
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0)
    hub_fail(HubErrorKind::cache, "cannot open the lock file {}: {}", path.string(),
             std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) == 0) return;
  MEMRA_LOG_INFO("waiting for another process downloading {} (lock {})", what, path.string());
  while (::flock(fd_, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    const int err = errno;
    ::close(fd_);
    hub_fail(HubErrorKind::cache, "cannot lock {}: {}", path.string(), std::strerror(err));
  }
}

HubLock::~HubLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

std::optional<uint64_t> hub_free_bytes(const fs::path& dir) {
  struct statvfs st {};
  if (::statvfs(dir.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

}  // namespace memra::hub
