// hf: sources: the cache first, then the hub (hub.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/log.h"
#include "hub/hub.h"
#include "hub/hub_cache.h"
#include "hub/hub_client.h"
#include "hub/hub_download.h"
#include "hub/hub_select.h"

namespace memra::hub {

namespace fs = std::filesystem;

namespace {

constexpr uintmax_t kMaxIndexBytes = 64u << 20;

std::string read_index(const fs::path& path) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec || size > kMaxIndexBytes)
    hub_fail(HubErrorKind::bad_response, "{} is missing or larger than {} bytes", path.string(),
             kMaxIndexBytes);
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The model from the cache alone. Returns nullopt when something is missing; with `strict`
// (offline) that is HubError(offline) saying what is missing and where.
std::optional<HubResolved> from_cache(const HubSource& src, const HubCache& cache, bool strict) {
  const std::string display = src.display();
  const std::string hint = fmt::format(
      "HF_HUB_OFFLINE is set, so memra does not download; unset it, or run `memra pull hf:{}` "
      "where the network is reachable",
      display);
  std::optional<std::string> commit;
  if (hub_is_commit(src.revision))
    commit = src.revision;
  else
    commit = cache.read_ref(src.revision);
  if (!commit) {
    if (!strict) return std::nullopt;
    if (!fs::is_directory(cache.repo_dir()))
      hub_fail(HubErrorKind::offline,
               "model {} is not in the Hugging Face cache: {} does not "
               "exist ({})",
               display, cache.repo_dir().string(), hint);
    hub_fail(HubErrorKind::offline,
             "model {} is not in the Hugging Face cache: refs/{} is "
             "missing in {} ({})",
             display, src.revision, cache.repo_dir().string(), hint);
  }
  const fs::path snap = cache.snapshot(*commit);
  if (!fs::is_directory(snap)) {
    if (!strict) return std::nullopt;
    hub_fail(HubErrorKind::offline,
             "model {}: refs/{} names snapshot {} but {} does not exist "
             "({})",
             display, src.revision, *commit, snap.string(), hint);
  }
  std::vector<std::string> dangling;
  const std::vector<std::string> files = cache.snapshot_files(*commit, &dangling);
  Selection sel;
  try {
    sel = hub_select(files, src.quant, display, snap.string());
  } catch (const HubError& e) {
    if (!strict) return std::nullopt;
    if (e.kind() != HubErrorKind::not_found) throw;
    std::string what = e.what();
    what.erase(0, what.find(": ") + 2);  // the kind's name: this is an offline miss
    if (!dangling.empty())
      what += "; these links in the snapshot point to a missing blob (an interrupted download?): " +
              join(dangling);
    hub_fail(HubErrorKind::offline, "{} ({})", what, hint);
  }
  std::vector<std::string> want = sel.files;
  // A checkpoint someone fetched file by file may lack its tokenizer: complete it from the hub
  // (offline, the loader says what is missing).
  const auto has = [&](const char* f) {
    return std::find(files.begin(), files.end(), f) != files.end();
  };
  if (sel.checkpoint && !strict && !has("tokenizer.json") && !has("tokenizer.model"))
    return std::nullopt;
  if (!sel.index.empty()) {
    for (const std::string& shard : hub_index_shards(read_index(snap / sel.index), sel.index))
      want.push_back(shard);
  }
  for (const std::string& f : want) {
    std::error_code ec;
    if (fs::is_regular_file(snap / f, ec)) continue;
    if (!strict) return std::nullopt;
    hub_fail(HubErrorKind::offline,
             "model {}: {} is missing or points to a missing blob in {} "
             "({})",
             display, f, snap.string(), hint);
  }
  HubResolved out;
  out.display = display;
  out.commit = *commit;
  out.files = want;
  out.checkpoint = sel.checkpoint;
  out.path = sel.checkpoint ? snap.string() : (snap / sel.primary).string();
  return out;
}

HubResolved download(const HubSource& src, const HubCache& cache, const HubSettings& settings,
                     const ProgressFn& progress) {
  const HubClient client(settings, src);
  const RepoInfo info = client.repo_info();
  const std::string where = "the hub at " + settings.endpoint;
  const Selection sel = hub_select(info.paths(), src.quant, src.display(), where);
  HubResolved out;
  out.display = src.display();
  out.commit = info.commit;
  out.checkpoint = sel.checkpoint;
  std::vector<std::string> want = sel.files;
  for (size_t i = 0; i < want.size(); ++i) {
    const RepoFile* file = info.find(want[i]);
    if (file == nullptr)
      hub_fail(HubErrorKind::not_found, "model {}: {} names {}, which {} does not list",
               out.display, sel.index, want[i], where);
    out.downloaded_bytes += hub_fetch_file(client, cache, info.commit, *file, progress);
    if (want[i] == sel.index && !sel.index.empty()) {
      for (const std::string& shard :
           hub_index_shards(read_index(cache.snapshot(info.commit) / sel.index), sel.index))
        want.push_back(shard);
    }
  }
  cache.write_ref(src.revision, info.commit);
  out.files = want;
  const fs::path snap = cache.snapshot(info.commit);
  out.path = sel.checkpoint ? snap.string() : (snap / sel.primary).string();
  return out;
}

}  // namespace

HubResolved hub_resolve(const std::string& source, const HubSettings& settings,
                        const HubResolveOptions& options) {
  const HubSource src = hub_source_parse(source);
  const HubCache cache(settings.cache, src.org, src.name);
  if (settings.offline) return *from_cache(src, cache, /*strict=*/true);
  if (!options.refresh) {
    if (std::optional<HubResolved> cached = from_cache(src, cache, /*strict=*/false))
      return *cached;
  }
  ProgressFn progress = options.progress;
  if (!progress) progress = HubProgress(settings.progress_bars);
  HubResolved out = download(src, cache, settings, progress);
  if (out.downloaded_bytes > 0)
    MEMRA_LOG_INFO("{}: {:.1f} MiB downloaded into {}", out.display,
                   out.downloaded_bytes / 1048576.0, cache.repo_dir().string());
  return out;
}

}  // namespace memra::hub
