// The hub client's entry point: hf:org/name[:QUANT][@revision] -> a local path in the Hugging
// Face cache, downloading what is missing on first use (docs/MODELS.md "Sources").
//   - A model already complete in the cache is used without touching the network (so a cached
//     model serves with no network at all); `refresh` (memra pull) always asks the hub for the
//     revision's current commit first.
//   - HF_HUB_OFFLINE=1: the cache only; a missing piece is HubError(offline) saying what.
//   - Otherwise: the revision is resolved to a commit, the file list read, the files picked
//     (hub_select.h), each fetched (hub_download.h), and refs/<revision> written last.
#pragma once

#include <string>
#include <vector>

#include "hub/hub_error.h"
#include "hub/hub_progress.h"
#include "hub/hub_source.h"

namespace memra::hub {

struct HubResolveOptions {
  bool refresh = false;  // ask the hub even when the cache has the model (memra pull)
  ProgressFn progress;   // empty: HubProgress (terminal bar or log lines)
};

struct HubResolved {
  std::string path;     // the GGUF (first shard of a split one) or the snapshot folder
  std::string display;  // org/name[:QUANT][@revision]
  std::string commit;
  std::vector<std::string> files;  // the selected files, relative to the snapshot
  bool checkpoint = false;         // an HF folder rather than a GGUF
  uint64_t downloaded_bytes = 0;   // 0 when everything came from the cache
};

HubResolved hub_resolve(const std::string& source, const HubSettings& settings,
                        const HubResolveOptions& options = {});

}  // namespace memra::hub
