// sha256 / git blob sha1 of downloaded blobs (hub_hash.h).
#include "hub/hub_hash.h"

#include <openssl/evp.h>

#include "hub/hub_error.h"
#include "hub/hub_source.h"

namespace memra::hub {

struct BlobHasher::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

BlobHasher::BlobHasher(const std::string& etag, uint64_t size)
    : ctx_(std::make_unique<Ctx>()), sha256_(etag.size() == 64), size_(size) {
  const bool hex = etag.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hex || (etag.size() != 64 && etag.size() != 40))
    hub_fail(HubErrorKind::bad_response,
             "the hub's ETag '{}' is neither a sha256 (LFS) nor a git sha1, so the download "
             "could not be verified (is HF_ENDPOINT a Hugging Face Hub?)",
             hub_printable(etag));
  if (ctx_->md == nullptr) hub_fail(HubErrorKind::cache, "OpenSSL could not allocate a digest");
  reset();
}

BlobHasher::~BlobHasher() = default;

void BlobHasher::reset() {
  EVP_DigestInit_ex(ctx_->md, sha256_ ? EVP_sha256() : EVP_sha1(), nullptr);
  if (!sha256_) {
    const std::string prefix = "blob " + std::to_string(size_);
    EVP_DigestUpdate(ctx_->md, prefix.data(), prefix.size() + 1);  // with its '\0'
  }
}

void BlobHasher::update(const void* data, size_t size) {
  EVP_DigestUpdate(ctx_->md, data, size);
}

std::string BlobHasher::hex_digest() {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_->md, digest, &n);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < n; ++i) out += {kHex[digest[i] >> 4], kHex[digest[i] & 15]};
  return out;
}

}  // namespace memra::hub
