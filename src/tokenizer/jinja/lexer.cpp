// Jinja lexer: splits template text from {{ }}, {% %} and {# #} tags and tokenizes tag contents,
// applying jinja2's whitespace rules (trim_blocks, lstrip_blocks, '-' and '+' modifiers).
#include "tokenizer/jinja/lexer.h"

#include <cctype>
#include <cstring>

#include "core/error.h"

namespace memra::jinja {

namespace {

// str.splitlines() + "\n".join: every line break form becomes '\n', and the final one goes.
std::string normalize_newlines(const std::string& src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    char c = src[i];
    if (c == '\r') {
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
      out += '\n';
    } else if (c == '\v' || c == '\f' || c == '\x1c' || c == '\x1d' || c == '\x1e') {
      out += '\n';
    } else if (static_cast<unsigned char>(c) == 0xc2 && i + 1 < src.size() &&
               static_cast<unsigned char>(src[i + 1]) == 0x85) {
      out += '\n';
      ++i;
    } else if (static_cast<unsigned char>(c) == 0xe2 && i + 2 < src.size() &&
               static_cast<unsigned char>(src[i + 1]) == 0x80 &&
               (static_cast<unsigned char>(src[i + 2]) == 0xa8 ||
                static_cast<unsigned char>(src[i + 2]) == 0xa9)) {
      out += '\n';
      i += 2;
    } else {
      out += c;
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < src_.size()) {
      size_t start = find_tag(pos_);
      std::string text = src_.substr(pos_, start - pos_);
      if (start == src_.size()) {
        emit_data(std::move(text));
        break;
      }
      char kind = src_[start + 1];
      char sign = start + 2 < src_.size() ? src_[start + 2] : '\0';
      if (sign == '-') {
        size_t end = text.size();
        while (end > 0 && is_space(text[end - 1])) --end;
        text.resize(end);
      } else if (sign != '+' && kind != '{') {
        size_t l_pos = text.rfind('\n');
        l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
        if (l_pos > 0 || line_starting) {
          bool blank = true;
          for (size_t i = l_pos; i < text.size(); ++i) blank = blank && is_space(text[i]);
          if (blank) text.resize(l_pos);
        }
      }
      emit_data(std::move(text));
      advance_to(start + 2 + ((sign == '-' || sign == '+') ? 1 : 0));
      if (kind == '#') {
        lex_comment();
      } else {
        lex_tag(kind == '{' ? Tok::var_begin : Tok::block_begin);
      }
      line_starting = pos_ > 0 && src_[pos_ - 1] == '\n';
    }
    tokens_.push_back({Tok::eof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    for (size_t i = from; i + 1 < src_.size(); ++i) {
      if (src_[i] == '{' && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#'))
        return i;
    }
    return src_.size();
  }

  void advance_to(size_t to) {
    for (; pos_ < to; ++pos_)
      if (src_[pos_] == '\n') ++line_;
  }

  void emit_data(std::string text) {
    if (text.empty()) return;
    int line = line_;
    advance_to(pos_ + text.size());
    tokens_.push_back({Tok::data, std::move(text), line});
  }

  // After a block or comment end: '-' eats all whitespace, '+' nothing, plain one newline.
  void trim_after(char sign, bool trim_blocks) {
    if (sign == '-') {
      size_t i = pos_;
      while (i < src_.size() && is_space(src_[i])) ++i;
      advance_to(i);
    } else if (sign != '+' && trim_blocks && pos_ < src_.size() && src_[pos_] == '\n') {
      advance_to(pos_ + 1);
    }
  }

  void lex_comment() {
    int start_line = line_;
    size_t end = src_.find("#}", pos_);
    if (end == std::string::npos)
      fail(ErrorCode::invalid_argument, "line {}: unterminated comment", start_line);
    char sign = end > pos_ && (src_[end - 1] == '-' || src_[end - 1] == '+') ? src_[end - 1] : '\0';
    advance_to(end + 2);
    trim_after(sign, true);
  }

  void lex_tag(Tok begin) {
    const bool is_var = begin == Tok::var_begin;
    const char close = is_var ? '}' : '%';
    tokens_.push_back({begin, "", line_});
    int open_brackets = 0;
    while (true) {
      while (pos_ < src_.size() && is_space(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= src_.size())
        fail(ErrorCode::invalid_argument, "line {}: unexpected end of template inside a tag",
             line_);
      char c = src_[pos_];
      char sign = '\0';
      size_t end_at = std::string::npos;
      if ((c == '-' || c == '+') && pos_ + 2 < src_.size() && src_[pos_ + 1] == close &&
          src_[pos_ + 2] == '}') {
        sign = c;
        end_at = pos_ + 3;
      } else if (c == close && pos_ + 1 < src_.size() && src_[pos_ + 1] == '}') {
        end_at = pos_ + 2;
      }
      if (end_at != std::string::npos && open_brackets == 0 && (sign != '+' || !is_var)) {
        tokens_.push_back({is_var ? Tok::var_end : Tok::block_end, "", line_});
        advance_to(end_at);
        trim_after(sign, !is_var);
        return;
      }
      lex_token(open_brackets);
    }
  }

  void lex_token(int& open_brackets) {
    char c = src_[pos_];
    int line = line_;
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t e = pos_;
      while (e < src_.size() &&
             (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_'))
        ++e;
      tokens_.push_back({Tok::name, src_.substr(pos_, e - pos_), line});
      advance_to(e);
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      lex_number();
    } else if (c == '\'' || c == '"') {
      lex_string(c);
    } else {
      static const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                         "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                         "<",  ">",  "=",  ".",  ":",  "|",  ",", ";"};
      for (const char* op : kOps) {
        size_t n = std::strlen(op);
        if (src_.compare(pos_, n, op) == 0) {
          if (op[0] == '(' || op[0] == '[' || op[0] == '{') ++open_brackets;
          if ((op[0] == ')' || op[0] == ']' || op[0] == '}') && open_brackets > 0) --open_brackets;
          tokens_.push_back({Tok::op, op, line});
          advance_to(pos_ + n);
          return;
        }
      }
      fail(ErrorCode::invalid_argument, "line {}: unexpected char '{}'", line, c);
    }
  }

  void lex_number() {
    size_t e = pos_;
    auto digits = [&] {
      while (e < src_.size() && (std::isdigit(static_cast<unsigned char>(src_[e])) ||
                                 (src_[e] == '_' && e + 1 < src_.size() &&
                                  std::isdigit(static_cast<unsigned char>(src_[e + 1])))))
        ++e;
    };
    digits();
    bool is_float = false;
    if (e + 1 < src_.size() && src_[e] == '.' &&
        std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
      is_float = true;
      ++e;
      digits();
    }
    if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {
      size_t k = e + 1;
      if (k < src_.size() && (src_[k] == '+' || src_[k] == '-')) ++k;
      if (k < src_.size() && std::isdigit(static_cast<unsigned char>(src_[k]))) {
        is_float = true;
        e = k;
        digits();
      }
    }
    std::string text;
    for (size_t i = pos_; i < e; ++i)
      if (src_[i] != '_') text += src_[i];
    tokens_.push_back({is_float ? Tok::floating : Tok::integer, text, line_});
    advance_to(e);
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }

  // Python unicode-escape decoding of the literal's body.
  size_t lex_escape(size_t i, std::string& out) {
    char e = src_[i];
    auto hex = [&](size_t n) -> uint32_t {
      if (i + n >= src_.size())
        fail(ErrorCode::invalid_argument, "line {}: truncated escape", line_);
      uint32_t v = 0;
      for (size_t k = 1; k <= n; ++k) {
        char h = src_[i + k];
        if (!std::isxdigit(static_cast<unsigned char>(h)))
          fail(ErrorCode::invalid_argument, "line {}: bad escape in string", line_);
        v = v * 16 + static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(h))
                                               ? h - '0'
                                               : (std::tolower(h) - 'a' + 10));
      }
      if (v > 0x10ffff) fail(ErrorCode::invalid_argument, "line {}: bad escape in string", line_);
      return v;
    };
    switch (e) {
      case 'n':
        out += '\n';
        return i + 1;
      case 't':
        out += '\t';
        return i + 1;
      case 'r':
        out += '\r';
        return i + 1;
      case '\\':
        out += '\\';
        return i + 1;
      case '\'':
        out += '\'';
        return i + 1;
      case '"':
        out += '"';
        return i + 1;
      case 'a':
        out += '\a';
        return i + 1;
      case 'b':
        out += '\b';
        return i + 1;
      case 'f':
        out += '\f';
        return i + 1;
      case 'v':
        out += '\v';
        return i + 1;
      case '\n':
        return i + 1;
      case 'x':
        append_utf8(out, hex(2));
        return i + 3;
      case 'u':
        append_utf8(out, hex(4));
        return i + 5;
      case 'U':
        append_utf8(out, hex(8));
        return i + 9;
      default:
        if (e >= '0' && e <= '7') {
          uint32_t v = 0;
          size_t k = i;
          for (; k < i + 3 && k < src_.size() && src_[k] >= '0' && src_[k] <= '7'; ++k)
            v = v * 8 + static_cast<uint32_t>(src_[k] - '0');
          append_utf8(out, v);
          return k;
        }
        out += '\\';
        return i;
    }
  }

  void lex_string(char quote) {
    int line = line_;
    std::string out;
    size_t i = pos_ + 1;
    while (true) {
      if (i >= src_.size()) fail(ErrorCode::invalid_argument, "line {}: unterminated string", line);
      char c = src_[i];
      if (c == quote) break;
      if (c == '\\' && i + 1 < src_.size()) {
        i = lex_escape(i + 1, out);
        continue;
      }
      out += c;
      ++i;
    }
    tokens_.push_back({Tok::string, std::move(out), line});
    advance_to(i + 1);
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> lex(const std::string& source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace memra::jinja
