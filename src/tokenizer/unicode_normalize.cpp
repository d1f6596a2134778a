// NFC through ICU's C API (UTF-8 -> UTF-16 -> normalize -> UTF-8), see unicode_normalize.h.
#include "tokenizer/unicode_normalize.h"

#include <vector>

#include "core/error.h"

#ifdef MEMRA_HAVE_ICU
#include <unicode/unorm2.h>
#include <unicode/ustring.h>
#endif

namespace memra::text {

bool nfc_available() {
#ifdef MEMRA_HAVE_ICU
  return true;
#else
  return false;
#endif
}

std::string nfc(std::string_view utf8) {
  bool ascii = true;
  for (char c : utf8) ascii = ascii && static_cast<unsigned char>(c) < 0x80;
  if (ascii) return std::string(utf8);
#ifdef MEMRA_HAVE_ICU
  if (utf8.size() > (1u << 30)) fail(ErrorCode::resource_exhausted, "text too long to normalize");
  UErrorCode error = U_ZERO_ERROR;
  const UNormalizer2* normalizer = unorm2_getNFCInstance(&error);
  const auto n = static_cast<int32_t>(utf8.size());
  std::vector<UChar> wide(utf8.size() + 1);
  int32_t wide_len = 0;
  u_strFromUTF8(wide.data(), static_cast<int32_t>(wide.size()), &wide_len, utf8.data(), n, &error);
  // NFC can grow text (a few characters decompose into more code units than they compose).
  std::vector<UChar> normalized(static_cast<size_t>(wide_len) * 3 + 16);
  const int32_t norm_len = unorm2_normalize(normalizer, wide.data(), wide_len, normalized.data(),
                                            static_cast<int32_t>(normalized.size()), &error);
  std::string out(static_cast<size_t>(norm_len) * 3 + 4, '\0');
  int32_t out_len = 0;
  u_strToUTF8(out.data(), static_cast<int32_t>(out.size()), &out_len, normalized.data(), norm_len,
              &error);
  if (U_FAILURE(error))
    fail(ErrorCode::internal, "ICU NFC normalization failed: {}", static_cast<int>(error));
  out.resize(static_cast<size_t>(out_len));
  return out;
#else
  fail(ErrorCode::unsupported, "NFC normalization needs memra built with ICU (libicu-dev)");
#endif
}

}  // namespace memra::text
