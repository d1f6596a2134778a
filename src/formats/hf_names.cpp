// Name lookups over the architecture descriptors' tables (formats/arch/). Global tensors map one
// to one; per-layer tensors are "model.layers.N.<suffix>" -> "blk.N.<gguf suffix>"; a
// multi-token-prediction head's are block n_layer's.
#include "formats/hf_names.h"

#include <charconv>

#include "formats/arch/arch.h"

namespace memra {
namespace {

using Mapping = HfNameMapping;

// A plain decimal number without leading zeros (at most 5 digits), or -1.
int parse_index(std::string_view digits) {
  if (digits.empty() || digits.size() > 5 || (digits.size() > 1 && digits[0] == '0')) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  int value = 0;
  const auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  return ec == std::errc() && end == digits.data() + digits.size() ? value : -1;
}

std::optional<std::string_view> look_up(HfNameTable table, std::string_view hf) {
  for (const Mapping& m : table) {
    if (m.hf == hf) return m.gguf;
  }
  return std::nullopt;
}

std::optional<std::string_view> look_up(std::span<const HfNameTable> tables, std::string_view hf) {
  for (HfNameTable table : tables)
    if (auto g = look_up(table, hf)) return g;
  return std::nullopt;
}

// "mlp.experts.E.<suffix>" -> the stacked tensor's suffix, with E in *expert.
std::optional<std::string_view> expert_suffix(HfNameTable slices, std::string_view suffix,
                                              int* expert) {
  constexpr std::string_view kExperts = "mlp.experts.";
  if (!suffix.starts_with(kExperts)) return std::nullopt;
  const std::string_view rest = suffix.substr(kExperts.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  *expert = parse_index(rest.substr(0, dot));
  if (*expert < 0) return std::nullopt;
  return look_up(slices, rest.substr(dot + 1));
}

}  // namespace

std::optional<GgufTensorName> hf_tensor_name_to_gguf(std::string_view arch,
                                                     std::string_view hf_name) {
  const ArchDescriptor* d = arch_find(arch);
  if (d == nullptr) return std::nullopt;
  if (auto g = look_up(kHfGlobalNames, hf_name)) return GgufTensorName{std::string(*g), -1};
  if (auto g = look_up(d->global_names, hf_name)) return GgufTensorName{std::string(*g), -1};

  constexpr std::string_view kPrefix = "model.layers.";
  if (!hf_name.starts_with(kPrefix)) return std::nullopt;
  const std::string_view rest = hf_name.substr(kPrefix.size());
  const size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  const int layer = parse_index(rest.substr(0, dot));
  if (layer < 0) return std::nullopt;
  int expert = -1;
  auto suffix = look_up(d->layer_names, rest.substr(dot + 1));
  if (!suffix && !d->expert_slice_names.empty())
    suffix = expert_suffix(d->expert_slice_names, rest.substr(dot + 1), &expert);
  if (!suffix) return std::nullopt;
  return GgufTensorName{"blk." + std::to_string(layer) + "." + std::string(*suffix), layer, expert};
}

std::optional<GgufTensorName> hf_mtp_tensor_name_to_gguf(std::string_view arch,
                                                         std::string_view hf_name,
                                                         int64_t n_layer) {
  const ArchDescriptor* d = arch_find(arch);
  if (d == nullptr || d->mtp.prefix.empty()) return std::nullopt;
  const int layer = static_cast<int>(n_layer);
  if (auto g = look_up(d->mtp.names, hf_name))
    return GgufTensorName{"blk." + std::to_string(layer) + "." + std::string(*g), layer};
  if (!hf_name.starts_with(d->mtp.layer_prefix)) return std::nullopt;
  const std::string as_layer = "model.layers." + std::to_string(layer) + "." +
                               std::string(hf_name.substr(d->mtp.layer_prefix.size()));
  return hf_tensor_name_to_gguf(arch, as_layer);
}

std::optional<std::string> hf_wrapper_text_name(std::string_view hf_name) {
  static constexpr Mapping kPrefixes[] = {
      {"model.language_model.", "model."},
      {"language_model.model.", "model."},
      {"language_model.lm_head.", "lm_head."},
      {"lm_head.", "lm_head."},
  };
  for (const Mapping& m : kPrefixes) {
    if (hf_name.starts_with(m.hf))
      return std::string(m.gguf) + std::string(hf_name.substr(m.hf.size()));
  }
  // A multi-token-prediction head sits beside the wrapper's text model, under its own name.
  for (const ArchDescriptor* d : arch_all())
    if (!d->mtp.prefix.empty() && hf_name.starts_with(d->mtp.prefix)) return std::string(hf_name);
  return std::nullopt;
}

std::optional<std::string_view> hf_wrapper_tower(std::string_view hf_architecture,
                                                 std::string_view hf_name) {
  for (const ArchDescriptor* d : arch_all())
    for (const HfClass& c : d->hf_classes)
      if (c.hf_architecture == hf_architecture)
        for (const HfTower& t : c.towers)
          if (hf_name.starts_with(t.prefix)) return t.part;
  return std::nullopt;
}

bool hf_tensor_is_buffer(std::string_view hf_name) {
  return hf_name.ends_with("rotary_emb.inv_freq");
}

}  // namespace memra
