// The architecture registry's invariants (formats/arch/): what the loaders assume when they look
// an architecture up, so a new family's descriptor that breaks one fails here by name.
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "formats/arch/arch.h"
#include "formats/hf_names.h"

namespace memra {
namespace {

TEST(ArchTable, NamesAndClassesAreUniqueAndFound) {
  std::set<std::string_view> names, classes, model_types;
  for (const ArchDescriptor* d : arch_all()) {
    EXPECT_TRUE(names.insert(d->name).second) << d->name;
    EXPECT_EQ(arch_find(d->name), d);
    EXPECT_NE(d->read_hf_config, nullptr) << d->name;
    EXPECT_FALSE(d->hf_classes.empty()) << d->name;
    for (const HfClass& c : d->hf_classes) {
      EXPECT_TRUE(classes.insert(c.hf_architecture).second) << c.hf_architecture;
      EXPECT_TRUE(model_types.insert(c.model_type).second) << c.model_type;
      // A wrapper names its text model, and only a wrapper has towers to skip.
      EXPECT_EQ(c.text_model_type.empty(), c.towers.empty()) << c.hf_architecture;
    }
  }
  EXPECT_EQ(arch_find("mistral"), nullptr);
  EXPECT_EQ(arch_supported_names(),
            "llama, qwen2, qwen3, qwen3moe, gemma3, gemma4, qwen35, qwen35moe");
}

// Within one architecture an HF suffix maps to one GGUF name: the layer tables are searched in
// order, so a duplicate would silently shadow the later entry.
TEST(ArchTable, LayerSuffixesAreUniquePerArchitecture) {
  for (const ArchDescriptor* d : arch_all()) {
    std::set<std::string_view> seen;
    for (HfNameTable table : d->layer_names)
      for (const HfNameMapping& m : table)
        EXPECT_TRUE(seen.insert(m.hf).second) << d->name << " " << m.hf;
  }
}

TEST(ArchTable, EveryArchitectureMapsTheSharedNames) {
  for (const ArchDescriptor* d : arch_all()) {
    const auto g = hf_tensor_name_to_gguf(d->name, "model.layers.2.self_attn.q_proj.weight");
    ASSERT_TRUE(g) << d->name;
    EXPECT_EQ(g->name, "blk.2.attn_q.weight");
    EXPECT_EQ(hf_tensor_name_to_gguf(d->name, "lm_head.weight")->name, "output.weight");
  }
}

// A multi-token-prediction head's names all sit under its prefix (the archive routes a tensor
// to the head by that prefix) and map to the block after the last layer.
TEST(ArchTable, MtpHeadsMapToTheBlockAfterTheLayers) {
  for (const ArchDescriptor* d : arch_all()) {
    if (d->mtp.prefix.empty()) {
      EXPECT_TRUE(d->mtp.names.empty() && d->mtp.layer_prefix.empty()) << d->name;
      EXPECT_FALSE(hf_mtp_tensor_name_to_gguf(d->name, "mtp.fc.weight", 4)) << d->name;
      continue;
    }
    EXPECT_TRUE(d->mtp.layer_prefix.starts_with(d->mtp.prefix)) << d->name;
    for (const HfNameMapping& m : d->mtp.names) {
      EXPECT_TRUE(m.hf.starts_with(d->mtp.prefix)) << d->name << " " << m.hf;
      const auto g = hf_mtp_tensor_name_to_gguf(d->name, m.hf, 4);
      ASSERT_TRUE(g) << d->name << " " << m.hf;
      EXPECT_EQ(g->name, "blk.4." + std::string(m.gguf));
      EXPECT_EQ(g->layer, 4);
    }
    const std::string q = std::string(d->mtp.layer_prefix) + "self_attn.q_proj.weight";
    const auto g = hf_mtp_tensor_name_to_gguf(d->name, q, 4);
    ASSERT_TRUE(g) << d->name;
    EXPECT_EQ(g->name, "blk.4.attn_q.weight");
    EXPECT_EQ(g->layer, 4);
  }
  EXPECT_EQ(hf_mtp_tensor_name_to_gguf("qwen35", "mtp.fc.weight", 24)->name,
            "blk.24.nextn.eh_proj.weight");
  EXPECT_FALSE(hf_mtp_tensor_name_to_gguf("qwen35", "mtp.layers.1.self_attn.q_proj.weight", 24));
}

}  // namespace
}  // namespace memra
