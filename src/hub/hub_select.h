// Which files of a repository make the model a source names, from the repository's file list
// (the hub's listing online, the snapshot's files offline), so both paths pick the same files:
//   - :QUANT: the .gguf (top level or one folder deep; mmproj files excluded) whose path carries
//     QUANT as a whole token (case-insensitive, delimited by non-alphanumerics: F16 does not match
//     BF16); the shards of one split GGUF (-00001-of-00003) count as one choice.
//   - no quant: a checkpoint when config.json and safetensors weights exist (config, generation
//     config, tokenizer files, the index and its shards), else the only GGUF.
#pragma once

#include <string>
#include <vector>

namespace memra::hub {

struct Selection {
  bool checkpoint = false;         // an HF folder (open the snapshot folder), else a GGUF
  std::vector<std::string> files;  // to have in the snapshot, in download order
  std::string primary;             // the GGUF to open (its first shard); empty for a checkpoint
  std::string index;               // model.safetensors.index.json when the weights are sharded
};

// `where` names the listing in errors (the hub, or a cache folder). HubError(not_found) when
// nothing matches (listing the quants that exist), (bad_source) when the choice is ambiguous.
Selection hub_select(const std::vector<std::string>& files, const std::string& quant,
                     const std::string& display, const std::string& where);

// The quant labels of the GGUF files (Q4_K_M, BF16...), sorted, for error messages.
std::vector<std::string> hub_quants(const std::vector<std::string>& files);

// The shard file names of a model.safetensors.index.json (weight_map values, deduplicated,
// sorted). Each must be a plain file name ending in .safetensors: HubError(bad_response) names
// the first that is not, or malformed JSON.
std::vector<std::string> hub_index_shards(const std::string& index_json, const std::string& what);

// The split-GGUF part of a name: "m-Q4_K_M-00002-of-00003.gguf" -> {2, 3}; {0, 0} otherwise.
struct SplitPart {
  int index = 0, count = 0;
};
SplitPart hub_split_part(const std::string& path);

}  // namespace memra::hub
