// archive_open: decides the container (GGUF file, HF folder, refused pickle) and, for GGUF,
// exposes the file's metadata and tensor views as they are.
#include "formats/model_archive.h"

#include <filesystem>

#include "core/error.h"
#include "formats/safetensors.h"

namespace memra {

const TensorView* ModelArchive::find_tensor(std::string_view name) const {
  for (const TensorView& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

ModelArchive archive_open_gguf(const std::string& path) {
  gguf::File opened = gguf::File::open(path);
  ModelArchive archive;
  archive.kind = ArchiveKind::gguf;
  archive.path = path;
  archive.metadata = opened.release_metadata();  // one copy, not two, for the process's life
  auto file = std::make_shared<const gguf::File>(std::move(opened));
  archive.tensors.reserve(file->tensors().size());
  for (const gguf::TensorInfo& info : file->tensors()) archive.tensors.push_back(file->view(info));
  archive.keep_alive.push_back(std::move(file));
  return archive;
}

ModelArchive archive_open(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (ec || !fs::exists(status)) fail(ErrorCode::not_found, "model path '{}' does not exist", path);
  if (fs::is_directory(status)) return archive_open_hf_folder(path);
  const std::string file_name = fs::path(path).filename().string();
  if (safetensors::is_pickle_name(file_name)) safetensors::refuse_pickle(path);
  if (file_name.ends_with(".safetensors"))
    fail(ErrorCode::invalid_argument,
         "'{}' is one safetensors file; open the folder that holds it with config.json", path);
  return archive_open_gguf(path);
}

}  // namespace memra
