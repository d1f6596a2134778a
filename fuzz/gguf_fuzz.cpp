// libFuzzer target for the GGUF reader: any input must parse or throw memra::Error; on success,
// every metadata getter and every tensor view is exercised so their checks are fuzzed as well.
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "formats/gguf.h"

namespace {

void exercise(const memra::gguf::File& f) {
  const memra::gguf::Metadata& md = f.metadata();
  for (const memra::gguf::KeyValue& kv : md.entries()) {
    // Each getter either returns or throws Error for a type mismatch; both are fine.
    try {
      (void)md.get_string(kv.first);
    } catch (const memra::Error&) {
    }
    try {
      (void)md.get_int(kv.first);
    } catch (const memra::Error&) {
    }
    try {
      (void)md.get_float(kv.first);
    } catch (const memra::Error&) {
    }
    try {
      (void)md.get_bool(kv.first);
    } catch (const memra::Error&) {
    }
    try {
      (void)md.get_string_array(kv.first);
    } catch (const memra::Error&) {
    }
    try {
      (void)md.get_int_array(kv.first);
    } catch (const memra::Error&) {
    }
    try {
      (void)md.get_float_array(kv.first);
    } catch (const memra::Error&) {
    }
  }
  uint8_t sink = 0;
  for (const memra::gguf::TensorInfo& t : f.tensors()) {
    const memra::TensorView v = f.view(t);
    const auto* p = static_cast<const uint8_t*>(v.data);
    if (v.n_bytes > 0) sink ^= p[0] ^ p[v.n_bytes - 1];  // first and last byte must be readable
    if (f.find_tensor(t.name) != &t) __builtin_trap();
  }
  volatile uint8_t keep = sink;
  (void)keep;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Smaller caps than the defaults keep each run fast; the logic under test is the same.
  memra::gguf::ReadLimits limits;
  limits.max_array_items = 1u << 16;
  limits.max_total_items = 1u << 18;
  try {
    const memra::gguf::File f =
        memra::gguf::File::parse(std::span<const uint8_t>(data, size), limits);
    exercise(f);
  } catch (const memra::Error&) {
  }
  return 0;
}
