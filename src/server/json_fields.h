// Typed reads of request-body fields shared by the OpenAI and Anthropic parsers: each refusal is
// a 400 naming the field, with the expected type or range and what was sent. A null value counts
// as "not given", as both APIs treat it.
#pragma once

#include <cstdint>
#include <string>

#include "server/openai_request.h"

namespace memra::server {

std::string type_name(const ojson& v);                    // "null", "string", "number", ...
const ojson* field(const ojson& body, const char* name);  // null when absent or null
double number_in(const ojson& body, const char* name, double lo, double hi, double fallback);
int64_t integer_in(const ojson& body, const char* name, int64_t lo, int64_t hi, int64_t fallback);
bool boolean(const ojson& body, const char* name, bool fallback);
std::string string_field(const ojson& body, const char* name);  // "" when absent

}  // namespace memra::server
