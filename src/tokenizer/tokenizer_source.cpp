// Tokenizer::from_source: one place that turns a user-named model source into its tokenizer, for
// the tools that need a tokenizer without loading the model.
#include <filesystem>

#include "formats/gguf.h"
#include "formats/model_source.h"
#include "tokenizer/tokenizer.h"

namespace memra {

std::unique_ptr<Tokenizer> Tokenizer::from_source(const std::string& source) {
  const std::string path = model_source_resolve(source).path;
  if (std::filesystem::is_directory(path)) return from_hf_folder(path);
  return from_gguf(gguf::File::open(path).metadata());
}

}  // namespace memra
