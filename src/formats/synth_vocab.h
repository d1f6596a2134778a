// Internal to `memra synth`: the synthetic tokenizer written into a synth GGUF, as the
// tokenizer.ggml.* keys memra's tokenizer and llama.cpp's vocab loader read. Always exactly the
// shape's vocab size, so token_embd's rows and the vocabulary agree as both loaders require.
#pragma once

#include <cstdint>
#include <string>

#include "formats/gguf.h"

namespace memra::synth {

enum class VocabKind {
  qwen,    // byte-level BPE, pre "qwen2", ChatML specials at Qwen's ids (151643..)
  llama3,  // byte-level BPE, pre "llama-bpe", Llama 3 specials at 128000..
  gemma,   // SentencePiece BPE ("llama" model) with scores and byte fallback, Gemma's ids
};

// Sets tokenizer.ggml.* (model, pre, tokens, token_type, merges or scores, special ids, add_bos)
// and tokenizer.chat_template for a vocabulary of n_vocab tokens. The vocabulary does not depend
// on the weight seed: every synth file of one shape tokenizes text the same way.
void vocab_write(VocabKind kind, int64_t n_vocab, gguf::Metadata& out);

// Instead, every tokenizer.* key of the GGUF at path (a real model, or a vocab-only file as
// llama.cpp's ggml-vocab-*.gguf): its tokens, merges or scores, special ids and chat template.
// Refused by name unless it holds exactly n_vocab tokens (token_embd's rows).
void vocab_copy(const std::string& path, int64_t n_vocab, gguf::Metadata& out);

}  // namespace memra::synth
