// Fetches one file of a repository into the hub cache: its blob (resumed from a partial
// <etag>.incomplete, hashed while it streams, verified, renamed into blobs/) under the blob's
// lock, then the snapshot link. A cut connection is retried from where it stopped.
#pragma once

#include <string>

#include "hub/hub_cache.h"
#include "hub/hub_client.h"
#include "hub/hub_progress.h"

namespace memra::hub {

// Makes snapshots/<commit>/<file.path> point at a verified blob. Returns the bytes downloaded
// (0 when the blob was already there). Errors: HubError hash_mismatch (the partial is removed),
// disk_full, unreachable (the partial is kept for the next try), and the hub's statuses.
uint64_t hub_fetch_file(const HubClient& client, const HubCache& cache, const std::string& commit,
                        const RepoFile& file, const ProgressFn& progress);

}  // namespace memra::hub
