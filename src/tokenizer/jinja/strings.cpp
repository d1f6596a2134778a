// Python str method semantics on UTF-8 strings: strip with Unicode whitespace or a char set,
// split/rsplit with maxsplit, splitlines, replace with count, and ASCII case mapping.
#include "tokenizer/jinja/strings.h"

#include <algorithm>

#include "tokenizer/jinja/value.h"

namespace memra::jinja {

bool py_isspace_cp(unsigned int cp) {
  return (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

namespace {

unsigned int cp_of(const std::string& ch) {
  auto b = static_cast<unsigned char>(ch[0]);
  if (ch.size() == 1) return b;
  unsigned int cp = ch.size() == 2 ? (b & 0x1fu) : ch.size() == 3 ? (b & 0x0fu) : (b & 0x07u);
  for (size_t i = 1; i < ch.size(); ++i)
    cp = (cp << 6) | (static_cast<unsigned char>(ch[i]) & 0x3fu);
  return cp;
}

bool is_line_break(unsigned int cp) {
  return cp == '\n' || cp == '\r' || cp == 0x0b || cp == 0x0c || cp == 0x1c || cp == 0x1d ||
         cp == 0x1e || cp == 0x85 || cp == 0x2028 || cp == 0x2029;
}

}  // namespace

std::pair<size_t, size_t> py_strip_range(const std::string& s, const std::string* chars,
                                         StripSide side) {
  std::vector<std::string> cs = utf8_chars(s);
  std::vector<std::string> set;
  if (chars) set = utf8_chars(*chars);
  auto strip_it = [&](const std::string& c) {
    if (!chars) return py_isspace_cp(cp_of(c));
    return std::find(set.begin(), set.end(), c) != set.end();
  };
  size_t b = 0, e = cs.size();
  size_t begin = 0, end = s.size();  // byte offsets of cs[b] and of the end of cs[e - 1]
  if (side != StripSide::right)
    while (b < e && strip_it(cs[b])) begin += cs[b++].size();
  if (side != StripSide::left)
    while (e > b && strip_it(cs[e - 1])) end -= cs[--e].size();
  return {begin, end};
}

std::string py_strip(const std::string& s, const std::string* chars, StripSide side) {
  const auto [begin, end] = py_strip_range(s, chars, side);
  return s.substr(begin, end - begin);
}

std::vector<std::string> py_split(const std::string& s, const std::string* sep, long maxsplit,
                                  bool from_right) {
  std::vector<std::string> out;
  if (sep) {
    const std::string& d = *sep;
    if (!from_right) {
      size_t start = 0;
      while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
        size_t at = s.find(d, start);
        if (at == std::string::npos) break;
        out.push_back(s.substr(start, at - start));
        start = at + d.size();
      }
      out.push_back(s.substr(start));
      return out;
    }
    size_t end = s.size();
    while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
      if (end < d.size()) break;
      size_t at = s.rfind(d, end - d.size());
      if (at == std::string::npos) break;
      out.push_back(s.substr(at + d.size(), end - at - d.size()));
      end = at;
    }
    out.push_back(s.substr(0, end));
    std::reverse(out.begin(), out.end());
    return out;
  }
  std::vector<std::string> cs = utf8_chars(s);
  if (from_right) std::reverse(cs.begin(), cs.end());
  size_t i = 0;
  while (i < cs.size()) {
    while (i < cs.size() && py_isspace_cp(cp_of(cs[i]))) ++i;
    if (i == cs.size()) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
      std::string rest;  // Python keeps the remainder's trailing whitespace
      for (size_t k = i; k < cs.size(); ++k) rest += cs[k];
      out.push_back(rest);
      break;
    }
    std::string word;
    while (i < cs.size() && !py_isspace_cp(cp_of(cs[i]))) word += cs[i++];
    out.push_back(word);
  }
  if (from_right) {
    for (auto& w : out) {
      std::vector<std::string> wc = utf8_chars(w);
      std::reverse(wc.begin(), wc.end());
      w.clear();
      for (auto& c : wc) w += c;
    }
    std::reverse(out.begin(), out.end());
  }
  return out;
}

std::vector<std::string> py_splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  std::vector<std::string> cs = utf8_chars(s);
  std::string line;
  for (size_t i = 0; i < cs.size(); ++i) {
    unsigned int cp = cp_of(cs[i]);
    if (!is_line_break(cp)) {
      line += cs[i];
      continue;
    }
    std::string end = cs[i];
    if (cp == '\r' && i + 1 < cs.size() && cs[i + 1] == "\n") {
      end += "\n";
      ++i;
    }
    out.push_back(keepends ? line + end : line);
    line.clear();
  }
  if (!line.empty()) out.push_back(line);
  return out;
}

std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       long count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `repl` before every character and at the end.
    std::vector<std::string> cs = utf8_chars(s);
    long n = 0;
    for (const auto& c : cs) {
      if (count < 0 || n < count) {
        out += repl;
        ++n;
      }
      out += c;
    }
    if (count < 0 || n < count) out += repl;
    return out;
  }
  size_t start = 0;
  long n = 0;
  while (count < 0 || n < count) {
    size_t at = s.find(old, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += repl;
    start = at + old.size();
    ++n;
  }
  out.append(s, start, std::string::npos);
  return out;
}

long py_count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<long>(utf8_length(s)) + 1;
  long n = 0;
  for (size_t at = s.find(sub); at != std::string::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

std::string py_upper(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  return out;
}

std::string py_lower(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

std::string py_title(const std::string& s) {
  std::string out = s;
  bool prev_cased = false;
  for (char& c : out) {
    bool upper = c >= 'A' && c <= 'Z', lower = c >= 'a' && c <= 'z';
    if (upper || lower) {
      if (prev_cased && upper) c = static_cast<char>(c - 'A' + 'a');
      if (!prev_cased && lower) c = static_cast<char>(c - 'a' + 'A');
      prev_cased = true;
    } else {
      // Non-ASCII bytes belong to letters often enough; treat them as cased so words continue.
      prev_cased = (static_cast<unsigned char>(c) & 0x80) != 0;
    }
  }
  return out;
}

std::string py_capitalize(const std::string& s) {
  std::string out = py_lower(s);
  if (!out.empty() && out[0] >= 'a' && out[0] <= 'z')
    out[0] = static_cast<char>(out[0] - 'a' + 'A');
  return out;
}

}  // namespace memra::jinja
