// StreamDecoder (see tokenizer.h): emits text as soon as it is whole UTF-8.
#include "core/error.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode_text.h"

namespace memra {

StreamDecoder::StreamDecoder(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(tokenizer), skip_special_(skip_special) {}

std::string StreamDecoder::push(int32_t id) {
  if (skip_special_ && tokenizer_.is_special(id)) return {};
  if (first_) {
    const int32_t one[] = {id};
    pending_ += tokenizer_.decode(one, skip_special_);
    first_ = false;
  } else {
    pending_ += tokenizer_.token_bytes(id);
  }
  // Hold back only a tail that can still become a valid character; repair everything before it.
  const size_t tail = text::utf8_incomplete_tail(pending_);
  std::string out =
      text::utf8_sanitize(std::string_view(pending_).substr(0, pending_.size() - tail));
  pending_.erase(0, pending_.size() - tail);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = text::utf8_sanitize(pending_);
  pending_.clear();
  return out;
}

}  // namespace memra
