// Typed request-field reads; see json_fields.h.
#include "server/json_fields.h"

#include <cmath>

#include "server/api_error.h"

namespace memra::server {

std::string type_name(const ojson& v) {
  return v.is_null() ? "null" : v.type_name();
}

const ojson* field(const ojson& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;  // null means "not given"
  return &*it;
}

double number_in(const ojson& body, const char* name, double lo, double hi, double fallback) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad_request(name, "'{}' must be a number, got {}", name, type_name(*v));
  double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad_request(name, "'{}' must be between {} and {}, got {}", name, lo, hi, x);
  return x;
}

int64_t integer_in(const ojson& body, const char* name, int64_t lo, int64_t hi, int64_t fallback) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer())
    bad_request(name, "'{}' must be an integer, got {}", name, type_name(*v));
  if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(hi))
    bad_request(name, "'{}' must be between {} and {}", name, lo, hi);
  int64_t x = v->get<int64_t>();
  if (x < lo || x > hi)
    bad_request(name, "'{}' must be between {} and {}, got {}", name, lo, hi, x);
  return x;
}

bool boolean(const ojson& body, const char* name, bool fallback) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad_request(name, "'{}' must be a boolean, got {}", name, type_name(*v));
  return v->get<bool>();
}

std::string string_field(const ojson& body, const char* name) {
  const ojson* v = field(body, name);
  if (!v) return "";
  if (!v->is_string()) bad_request(name, "'{}' must be a string, got {}", name, type_name(*v));
  return v->get<std::string>();
}

}  // namespace memra::server
