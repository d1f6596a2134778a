// Python str methods over UTF-8 text, as templates call them directly (message.content.strip())
// or through filters (trim, upper, title). Whitespace is Python's Unicode whitespace; case
// mapping covers ASCII only (other letters are left unchanged).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace memra::jinja {

enum class StripSide { both, left, right };

// str.strip/lstrip/rstrip; `chars` null means Unicode whitespace.
std::string py_strip(const std::string& s, const std::string* chars, StripSide side);
// The byte range [first, second) of `s` that py_strip keeps.
std::pair<size_t, size_t> py_strip_range(const std::string& s, const std::string* chars,
                                         StripSide side);
// str.split(sep, maxsplit) and str.rsplit; `sep` null splits on whitespace runs.
std::vector<std::string> py_split(const std::string& s, const std::string* sep, long maxsplit,
                                  bool from_right);
std::vector<std::string> py_splitlines(const std::string& s, bool keepends);
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       long count);
long py_count(const std::string& s, const std::string& sub);
std::string py_upper(const std::string& s);
std::string py_lower(const std::string& s);
std::string py_title(const std::string& s);
std::string py_capitalize(const std::string& s);
bool py_isspace_cp(unsigned int cp);

}  // namespace memra::jinja
