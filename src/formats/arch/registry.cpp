// The list of supported architectures: a new family's descriptor is added here, once.
#include <string>

#include "formats/arch/arch.h"

namespace memra {
namespace {

constexpr const ArchDescriptor* kAll[] = {
    &kArchLlama,  &kArchQwen2,  &kArchQwen3,  &kArchQwen3Moe,
    &kArchGemma3, &kArchGemma4, &kArchQwen35, &kArchQwen35Moe,
};

}  // namespace

std::span<const ArchDescriptor* const> arch_all() {
  return kAll;
}

const ArchDescriptor* arch_find(std::string_view name) {
  for (const ArchDescriptor* d : kAll)
    if (d->name == name) return d;
  return nullptr;
}

const std::string& arch_supported_names() {
  static const std::string names = [] {
    std::string out;
    for (const ArchDescriptor* d : kAll) out += (out.empty() ? "" : ", ") + std::string(d->name);
    return out;
  }();
  return names;
}

}  // namespace memra
