// One file into the hub cache (hub_download.h).
#include "hub/hub_download.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "core/log.h"
#include "hub/hub_error.h"
#include "hub/hub_hash.h"

namespace memra::hub {

namespace fs = std::filesystem;

namespace {

constexpr int kAttempts = 4;                  // a cut connection is retried 3 times
constexpr uint64_t kSpaceMargin = 16u << 20;  // keep this much free beyond the file

// The partial file of one blob: appended to, hashed as it grows.
class Partial {
 public:
  Partial(fs::path path, BlobHasher& hasher) : path_(std::move(path)), hasher_(hasher) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      hub_fail(errno == ENOSPC ? HubErrorKind::disk_full : HubErrorKind::cache,
               "cannot open {}: {}", path_.string(), std::strerror(errno));
  }
  ~Partial() {
    if (fd_ >= 0) ::close(fd_);
  }
  // Hashes what an earlier run left; returns its size (0 when larger than the blob).
  uint64_t adopt(uint64_t limit) {
    std::vector<char> buf(1 << 20);
    size_ = 0;
    for (;;) {
      const ssize_t n = ::read(fd_, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) hub_fail(HubErrorKind::cache, "cannot read {}", path_.string());
      if (n == 0) break;
      hasher_.update(buf.data(), static_cast<size_t>(n));
      size_ += static_cast<uint64_t>(n);
    }
    if (size_ > limit) restart();
    return size_;
  }
  void restart() {
    if (::ftruncate(fd_, 0) != 0 || ::lseek(fd_, 0, SEEK_SET) != 0)
      hub_fail(HubErrorKind::cache, "cannot truncate {}", path_.string());
    hasher_.reset();
    size_ = 0;
  }
  void append(const char* data, size_t n) {
    hasher_.update(data, n);
    while (n > 0) {
      const ssize_t w = ::write(fd_, data, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0)
        hub_fail(errno == ENOSPC || errno == EDQUOT ? HubErrorKind::disk_full : HubErrorKind::cache,
                 "writing {}: {}{}", path_.string(), std::strerror(errno),
                 errno == ENOSPC || errno == EDQUOT
                     ? " (free space, or set HF_HUB_CACHE to a larger disk)"
                     : "");
      data += w;
      n -= static_cast<size_t>(w);
      size_ += static_cast<uint64_t>(w);
    }
  }
  void finish() {
    if (::fsync(fd_) != 0 || ::close(fd_) != 0)
      hub_fail(HubErrorKind::cache, "cannot flush {}: {}", path_.string(), std::strerror(errno));
    fd_ = -1;
  }
  uint64_t size() const { return size_; }

 private:
  fs::path path_;
  BlobHasher& hasher_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

void check_space(const fs::path& dir, uint64_t need, const std::string& what) {
  const std::optional<uint64_t> free = hub_free_bytes(dir);
  if (free && *free < need + kSpaceMargin)
    hub_fail(HubErrorKind::disk_full,
             "{} needs {:.1f} MiB in {} but only {:.1f} MiB are free; free some space or set "
             "HF_HUB_CACHE to a larger disk",
             what, need / 1048576.0, dir.string(), *free / 1048576.0);
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove(p, ec);
}

// Downloads the blob into its .incomplete file, retrying a cut connection from where it
// stopped; returns the bytes transferred. The file holds meta.size verified bytes on return.
uint64_t download_blob(const HubClient& client, const HubCache& cache, const FileMeta& meta,
                       const std::string& display, const ProgressFn& progress) {
  const fs::path part_path = cache.incomplete(meta.etag);
  BlobHasher hasher(meta.etag, meta.size);
  Partial part(part_path, hasher);
  const uint64_t resumed_from = part.adopt(meta.size);
  if (resumed_from > 0)
    MEMRA_LOG_INFO("resuming {} at {:.1f} of {:.1f} MiB", display, resumed_from / 1048576.0,
                   meta.size / 1048576.0);
  check_space(part_path.parent_path(), meta.size - resumed_from, "downloading " + display);
  uint64_t transferred = 0;
  for (int attempt = 1; part.size() < meta.size; ++attempt) {
    try {
      client.get_blob(
          meta, part.size(),
          [&](bool resumed) {
            if (!resumed) part.restart();
          },
          [&](const char* data, size_t n) {
            if (part.size() + n > meta.size)
              hub_fail(HubErrorKind::bad_response,
                       "{}: the hub sent more than the {} bytes it announced", display, meta.size);
            part.append(data, n);
            transferred += n;
            if (progress) progress(display, part.size(), meta.size);
          });
      if (part.size() != meta.size)
        hub_fail(HubErrorKind::unreachable, "{}: the transfer ended at {} of {} bytes", display,
                 part.size(), meta.size);
    } catch (const HubError& e) {
      if (e.kind() == HubErrorKind::bad_response) remove_quietly(part_path);
      if (e.kind() != HubErrorKind::unreachable || attempt >= kAttempts) throw;
      MEMRA_LOG_WARN("{} (attempt {} of {}); resuming at byte {}", e.what(), attempt, kAttempts,
                     part.size());
      std::this_thread::sleep_for(std::chrono::milliseconds(250 << attempt));
    }
  }
  part.finish();
  const std::string got = hasher.hex_digest();
  if (got != meta.etag && resumed_from > 0) {
    // The bytes an earlier run left may be what is wrong: start over once.
    MEMRA_LOG_WARN("{}: the resumed download does not match its {}; downloading it again", display,
                   hasher.algorithm());
    remove_quietly(part_path);
    return download_blob(client, cache, meta, display, progress);
  }
  if (got != meta.etag) {
    remove_quietly(part_path);
    hub_fail(HubErrorKind::hash_mismatch,
             "{}: the downloaded bytes have {} {} but the hub says {}; the partial file was "
             "removed. Try again; if it persists, the mirror at {} serves corrupt data",
             display, hasher.algorithm(), got, meta.etag, client.settings().endpoint);
  }
  if (progress && meta.size == 0) progress(display, 0, 0);
  return transferred;
}

}  // namespace

uint64_t hub_fetch_file(const HubClient& client, const HubCache& cache, const std::string& commit,
                        const RepoFile& file, const ProgressFn& progress) {
  const FileMeta meta = client.file_meta(commit, file.path);
  const std::string display = client.source().repo() + "/" + file.path;
  if (!file.sha256.empty() && meta.etag.size() == 64 && file.sha256 != meta.etag)
    hub_fail(HubErrorKind::bad_response, "{}: the listing says sha256 {} but the file's ETag is {}",
             display, file.sha256, meta.etag);
  if (file.has_size && file.size != meta.size)
    hub_fail(HubErrorKind::bad_response, "{}: the listing says {} bytes but the file has {}",
             display, file.size, meta.size);
  const fs::path blob = cache.blob(meta.etag);
  std::error_code ec;
  uint64_t transferred = 0;
  if (!fs::exists(blob, ec)) {
    HubLock lock(cache.lock_file(meta.etag), display);
    if (!fs::exists(blob, ec)) {  // another process may have finished it while we waited
      fs::create_directories(blob.parent_path(), ec);
      MEMRA_LOG_INFO("downloading {} ({:.1f} MiB) from {}", display, meta.size / 1048576.0,
                     client.settings().endpoint);
      transferred = download_blob(client, cache, meta, display, progress);
      fs::rename(cache.incomplete(meta.etag), blob, ec);
      if (ec)
        hub_fail(HubErrorKind::cache, "cannot move the download into {}: {}", blob.string(),
                 ec.message());
    }
  }
  cache.link(commit, file.path, meta.etag);
  return transferred;
}

}  // namespace memra::hub
