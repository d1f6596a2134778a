// PCRE2-backed isolated splitting (see regex_splitter.h). Oniguruma, which `tokenizers` uses,
// treats `$` as end-of-line, so patterns compile with PCRE2_MULTILINE to match it.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex_splitter.h"

#include <pcre2.h>

#include "core/error.h"

namespace memra {

struct RegexSplitter::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

// One match data block per thread and pattern size: allocation-free steady state.
struct MatchData {
  pcre2_match_data* data = nullptr;
  MatchData() { data = pcre2_match_data_create(8, nullptr); }
  ~MatchData() { pcre2_match_data_free(data); }
};

}  // namespace

RegexSplitter::RegexSplitter(const std::string& pattern)
    : impl_(std::make_unique<Impl>()), pattern_(pattern) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &error, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    fail(ErrorCode::unsupported,
         "pre-tokenizer regex does not compile at offset {}: {} (pattern {})", offset,
         reinterpret_cast<const char*>(message), pattern);
  }
  impl_->jit = pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE) == 0;
}

RegexSplitter::~RegexSplitter() = default;

void RegexSplitter::split(std::string_view text, std::vector<std::string_view>& out) const {
  thread_local MatchData match;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t pos = 0;
  size_t gap_start = 0;
  while (pos < text.size()) {
    int rc;
    if (impl_->jit) {
      rc = pcre2_jit_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.data,
                           nullptr);
      // A pathological input can exhaust the JIT stack; the interpreter uses the heap instead.
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                         match.data, nullptr);
    } else {
      rc = pcre2_match(impl_->code, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, match.data,
                       nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0)
      fail(ErrorCode::resource_exhausted, "pre-tokenizer regex failed (pcre2 error {})", rc);
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(match.data);
    const size_t start = ov[0];
    const size_t end = ov[1];
    if (end == start) {
      // Empty match: step over one character (tokenizers never yields empty pieces).
      pos = start + 1;
      while (pos < text.size() && (static_cast<uint8_t>(text[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (start > gap_start) out.push_back(text.substr(gap_start, start - gap_start));
    out.push_back(text.substr(start, end - start));
    pos = end;
    gap_start = end;
  }
  if (gap_start < text.size()) out.push_back(text.substr(gap_start));
}

}  // namespace memra
