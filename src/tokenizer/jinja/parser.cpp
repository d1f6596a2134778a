// Recursive-descent Jinja parser. Precedence, loosest first (as in jinja2): ternary if/else, or,
// and, not, comparisons/in, + -, ~, * / // %, **, unary - +, then postfix (.attr, [item], call),
// filters (|) and tests (is).
#include "tokenizer/jinja/parser.h"

#include <charconv>

#include "core/error.h"
#include "tokenizer/jinja/lexer.h"

namespace memra::jinja {

namespace {

constexpr int kMaxNesting = 200;  // statement + expression nesting while parsing

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  Body parse_template() {
    Body body = parse_body({});
    if (peek().type != Tok::eof) error("unexpected tag");
    return body;
  }

 private:
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.error("template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };
  struct SoftGuard {
    Parser& p;
    bool saved;
    SoftGuard(Parser& parser, bool soft) : p(parser), saved(parser.soft_) { p.soft_ = soft; }
    ~SoftGuard() { p.soft_ = saved; }
  };

  [[noreturn]] void error(const std::string& msg) const {
    fail(ErrorCode::invalid_argument, "line {}: {}", peek().line, msg);
  }
  const Token& peek(size_t ahead = 0) const {
    return toks_[std::min(pos_ + ahead, toks_.size() - 1)];
  }
  const Token& next() {
    const Token& t = toks_[pos_];
    if (pos_ + 1 < toks_.size()) ++pos_;
    return t;
  }
  bool is_op(const char* op, size_t ahead = 0) const {
    return peek(ahead).type == Tok::op && peek(ahead).text == op;
  }
  bool is_name(const char* name, size_t ahead = 0) const {
    return peek(ahead).type == Tok::name && peek(ahead).text == name;
  }
  bool accept_op(const char* op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool accept_name(const char* name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(const char* op) {
    if (!accept_op(op)) error(std::string("expected '") + op + "', got '" + peek().text + "'");
  }
  std::string expect_name() {
    if (peek().type != Tok::name) error("expected a name, got '" + peek().text + "'");
    return next().text;
  }
  void expect_block_end() {
    if (peek().type != Tok::block_end) error("expected end of tag, got '" + peek().text + "'");
    next();
  }

  ExprPtr make(ExprKind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }
  StmtPtr make_stmt(StmtKind kind, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = line;
    return s;
  }

  // Parses statements until a block tag whose name is in `ends`; leaves that name unconsumed.
  Body parse_body(const std::vector<std::string>& ends) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = peek();
      if (t.type == Tok::eof) {
        if (!ends.empty()) error("unexpected end of template, expected '" + ends[0] + "'");
        return body;
      }
      if (t.type == Tok::data) {
        auto s = make_stmt(StmtKind::data, t.line);
        s->text = next().text;
        body.push_back(std::move(s));
      } else if (t.type == Tok::var_begin) {
        next();
        auto s = make_stmt(StmtKind::print, t.line);
        s->expr = parse_tuple_expr();
        if (peek().type != Tok::var_end) error("expected '}}', got '" + peek().text + "'");
        next();
        body.push_back(std::move(s));
      } else if (t.type == Tok::block_begin) {
        const Token& name = peek(1);
        for (const auto& end : ends)
          if (name.type == Tok::name && name.text == end) {
            next();
            return body;
          }
        next();
        body.push_back(parse_statement());
      } else {
        error("unexpected token");
      }
    }
  }

  // Consumes `{% name %}` that closed a body (the `{%` is already consumed by parse_body).
  void end_tag(const char* name) {
    if (!accept_name(name)) error(std::string("expected '") + name + "'");
    expect_block_end();
  }

  StmtPtr parse_statement() {
    int line = peek().line;
    if (peek().type != Tok::name) error("expected a tag name");
    std::string tag = next().text;
    if (tag == "if") return parse_if(line);
    if (tag == "for") return parse_for(line);
    if (tag == "set") return parse_set(line);
    if (tag == "macro") return parse_macro(line);
    if (tag == "call") return parse_call_block(line);
    if (tag == "filter") return parse_filter_block(line);
    if (tag == "with") return parse_with(line);
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error("'" + tag + "' outside of a loop");
      expect_block_end();
      return make_stmt(tag == "break" ? StmtKind::break_ : StmtKind::continue_, line);
    }
    if (tag == "generation") {
      expect_block_end();
      auto s = make_stmt(StmtKind::scope, line);
      s->body = parse_body({"endgeneration"});
      end_tag("endgeneration");
      return s;
    }
    fail(ErrorCode::invalid_argument, "line {}: unsupported tag '{}'", line, tag);
  }

  StmtPtr parse_if(int line) {
    auto s = make_stmt(StmtKind::if_, line);
    SoftGuard soft(*this, true);
    while (true) {
      ExprPtr cond = parse_tuple_expr();
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (accept_name("elif")) continue;
      if (accept_name("else")) {
        expect_block_end();
        s->else_body = parse_body({"endif"});
        end_tag("endif");
      } else {
        end_tag("endif");
      }
      return s;
    }
  }

  std::vector<std::string> parse_targets() {
    std::vector<std::string> names;
    bool paren = accept_op("(");
    do {
      names.push_back(expect_name());
    } while (accept_op(","));
    if (paren) expect_op(")");
    return names;
  }

  StmtPtr parse_for(int line) {
    auto s = make_stmt(StmtKind::for_, line);
    s->targets = parse_targets();
    if (!accept_name("in")) error("expected 'in'");
    s->expr = parse_tuple_expr(false, true);
    SoftGuard soft(*this, false);
    if (accept_name("if")) s->cond = parse_expr();
    if (accept_name("recursive")) error("recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (accept_name("else")) {
      expect_block_end();
      int saved = loop_depth_;
      loop_depth_ = 0;
      s->else_body = parse_body({"endfor"});
      loop_depth_ = saved;
    }
    end_tag("endfor");
    return s;
  }

  StmtPtr parse_set(int line) {
    auto s = make_stmt(StmtKind::set, line);
    std::string first = expect_name();
    if (accept_op(".")) {
      s->attr_target = true;
      s->targets = {first, expect_name()};
    } else {
      s->targets = {first};
      while (accept_op(",")) s->targets.push_back(expect_name());
    }
    if (accept_op("=")) {
      s->expr = parse_tuple_expr();
      expect_block_end();
      return s;
    }
    if (s->targets.size() != 1 && !s->attr_target) error("a set block takes one name");
    if (is_op("|")) s->filter = parse_filter_chain();
    expect_block_end();
    SoftGuard soft(*this, false);
    s->body = parse_body({"endset"});
    end_tag("endset");
    return s;
  }

  std::vector<Param> parse_params() {
    std::vector<Param> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      Param p;
      p.name = expect_name();
      if (accept_op("=")) p.default_value = parse_expr();
      params.push_back(std::move(p));
    }
    expect_op(")");
    return params;
  }

  StmtPtr parse_macro(int line) {
    auto s = make_stmt(StmtKind::macro, line);
    s->name = expect_name();
    s->params = parse_params();
    expect_block_end();
    SoftGuard soft(*this, false);
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"});
    loop_depth_ = saved;
    end_tag("endmacro");
    return s;
  }

  StmtPtr parse_call_block(int line) {
    auto s = make_stmt(StmtKind::call_block, line);
    if (is_op("(")) s->params = parse_params();
    s->expr = parse_expr();
    if (s->expr->kind != ExprKind::call) error("expected a macro call after 'call'");
    expect_block_end();
    SoftGuard soft(*this, false);
    s->body = parse_body({"endcall"});
    end_tag("endcall");
    return s;
  }

  StmtPtr parse_filter_block(int line) {
    auto s = make_stmt(StmtKind::filter_block, line);
    s->filter = parse_filter_chain(true);
    expect_block_end();
    SoftGuard soft(*this, false);
    s->body = parse_body({"endfilter"});
    end_tag("endfilter");
    return s;
  }

  StmtPtr parse_with(int line) {
    auto s = make_stmt(StmtKind::with, line);
    while (peek().type != Tok::block_end) {
      if (!s->params.empty()) expect_op(",");
      Param p;
      p.name = expect_name();
      expect_op("=");
      p.default_value = parse_expr();
      s->params.push_back(std::move(p));
    }
    expect_block_end();
    SoftGuard soft(*this, false);
    s->body = parse_body({"endwith"});
    end_tag("endwith");
    return s;
  }

  // A chain of filters applied to a null input (filter blocks, set blocks): `|a|b(1)` or `a|b`.
  ExprPtr parse_filter_chain(bool first_without_bar = false) {
    ExprPtr node;
    bool first = true;
    while ((first && first_without_bar) || accept_op("|")) {
      first = false;
      node = parse_filter(std::move(node));
    }
    return node;
  }

  // Expression or implicit tuple (`a, b`), as {{ }} and `set x =` allow.
  ExprPtr parse_tuple_expr(bool simplified = false, bool for_iter = false) {
    int line = peek().line;
    std::vector<ExprPtr> items;
    bool trailing_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!accept_op(",")) break;
        trailing_comma = true;
        if (peek().type == Tok::block_end || peek().type == Tok::var_end || is_op(")") ||
            (for_iter && (is_name("if") || is_name("recursive"))))
          break;
      }
      items.push_back(simplified ? parse_primary() : (for_iter ? parse_or() : parse_expr()));
      trailing_comma = false;
    }
    if (items.size() == 1 && !trailing_comma) return std::move(items[0]);
    auto t = make(ExprKind::tuple, line);
    t->args = std::move(items);
    return t;
  }

  ExprPtr parse_expr() {
    DepthGuard guard(*this);
    ExprPtr node = parse_or();
    while (is_name("if")) {
      int line = next().line;
      auto c = make(ExprKind::cond, line);
      SoftGuard soft(*this, true);
      c->b = std::move(node);
      c->a = parse_or();
      if (accept_name("else")) c->c = parse_expr();
      node = std::move(c);
    }
    return node;
  }

  ExprPtr binary(const std::string& op, ExprPtr a, ExprPtr b, int line) {
    auto e = make(ExprKind::binary, line);
    e->name = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  ExprPtr parse_or() {
    ExprPtr node = parse_and();
    while (is_name("or")) {
      int line = next().line;
      node = binary("or", std::move(node), parse_and(), line);
    }
    return node;
  }
  ExprPtr parse_and() {
    ExprPtr node = parse_not();
    while (is_name("and")) {
      int line = next().line;
      node = binary("and", std::move(node), parse_not(), line);
    }
    return node;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      int line = next().line;
      auto e = make(ExprKind::unary, line);
      e->name = "not";
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    int line = peek().line;
    ExprPtr first = parse_math1();
    auto cmp = make(ExprKind::compare, line);
    while (true) {
      std::string op;
      if (peek().type == Tok::op &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = next().text;
      } else if (accept_name("in")) {
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        next();
        next();
        op = "notin";
      } else {
        break;
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    if (cmp->ops.empty()) return first;
    cmp->a = std::move(first);
    return cmp;
  }

  ExprPtr parse_math1() {
    ExprPtr node = parse_concat();
    while (is_op("+") || is_op("-")) {
      const Token& t = next();
      node = binary(t.text, std::move(node), parse_concat(), t.line);
    }
    return node;
  }
  ExprPtr parse_concat() {
    int line = peek().line;
    ExprPtr node = parse_math2();
    if (!is_op("~")) return node;
    auto c = make(ExprKind::concat, line);
    c->args.push_back(std::move(node));
    while (accept_op("~")) c->args.push_back(parse_math2());
    return c;
  }
  ExprPtr parse_math2() {
    ExprPtr node = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      node = binary(t.text, std::move(node), parse_pow(), t.line);
    }
    return node;
  }
  ExprPtr parse_pow() {
    ExprPtr node = parse_unary();
    while (is_op("**")) {
      int line = next().line;
      node = binary("**", std::move(node), parse_unary(), line);
    }
    return node;
  }
  ExprPtr parse_unary(bool with_filter = true) {
    DepthGuard guard(*this);
    int line = peek().line;
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(ExprKind::unary, line);
      node->name = next().text;
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr literal(Value v, int line) {
    auto e = make(ExprKind::literal, line);
    e->value = std::move(v);
    return e;
  }

  ExprPtr parse_primary() {
    DepthGuard guard(*this);
    const Token& t = peek();
    int line = t.line;
    if (t.type == Tok::name) {
      std::string n = next().text;
      if (n == "true" || n == "True") return literal(Value::from_bool(true), line);
      if (n == "false" || n == "False") return literal(Value::from_bool(false), line);
      if (n == "none" || n == "None") return literal(Value::none(), line);
      auto e = make(ExprKind::name, line);
      e->name = n;
      return e;
    }
    if (t.type == Tok::string) {
      std::string s;
      while (peek().type == Tok::string) s += next().text;
      return literal(Value::from_string(std::move(s)), line);
    }
    if (t.type == Tok::integer) {
      std::string text = next().text;
      int64_t v = 0;
      auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (ec != std::errc() || p != text.data() + text.size())
        error("integer literal out of range");
      return literal(Value::from_int(v), line);
    }
    if (t.type == Tok::floating) return literal(Value::from_float(std::stod(next().text)), line);
    if (accept_op("(")) {
      if (accept_op(")")) return make(ExprKind::tuple, line);
      ExprPtr e = parse_tuple_expr();
      expect_op(")");
      return e;
    }
    if (accept_op("[")) {
      auto e = make(ExprKind::list, line);
      while (!is_op("]")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("]")) break;
        e->args.push_back(parse_expr());
      }
      expect_op("]");
      return e;
    }
    if (accept_op("{")) {
      auto e = make(ExprKind::dict, line);
      while (!is_op("}")) {
        if (!e->args.empty()) expect_op(",");
        if (is_op("}")) break;
        e->args.push_back(parse_expr());
        expect_op(":");
        e->args.push_back(parse_expr());
      }
      expect_op("}");
      return e;
    }
    error("unexpected '" + t.text + "'");
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      int line = peek().line;
      if (is_op(".") || is_op("[")) {
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        auto call = make(ExprKind::call, line);
        call->a = std::move(node);
        parse_call_args(*call);
        node = std::move(call);
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const Token& t = next();
    if (t.text == ".") {
      const Token& attr = next();
      if (attr.type == Tok::name) {
        auto e = make(ExprKind::attr, t.line);
        e->a = std::move(node);
        e->name = attr.text;
        return e;
      }
      if (attr.type != Tok::integer) error("expected an attribute name");
      auto e = make(ExprKind::item, t.line);
      e->a = std::move(node);
      e->b = literal(Value::from_int(std::stoll(attr.text)), t.line);
      return e;
    }
    // '[': an index or a slice (tuples of indexes are not supported by lists or dicts here).
    ExprPtr parts[3];
    bool is_slice = false;
    int part = 0;
    while (!is_op("]")) {
      if (accept_op(":")) {
        is_slice = true;
        if (++part > 2) error("invalid slice");
        continue;
      }
      if (parts[part]) error("expected ']'");
      parts[part] = parse_expr();
    }
    expect_op("]");
    if (!is_slice) {
      if (!parts[0]) error("expected a subscript");
      auto e = make(ExprKind::item, t.line);
      e->a = std::move(node);
      e->b = std::move(parts[0]);
      return e;
    }
    auto e = make(ExprKind::slice, t.line);
    e->a = std::move(node);
    e->args.push_back(std::move(parts[0]));
    e->args.push_back(std::move(parts[1]));
    e->args.push_back(std::move(parts[2]));
    return e;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
      if (peek().type == Tok::name && is_op("=", 1)) {
        std::string key = next().text;
        next();
        call.kwargs.emplace_back(key, parse_expr());
      } else {
        if (!call.kwargs.empty()) error("positional argument after keyword argument");
        call.args.push_back(parse_expr());
      }
    }
    expect_op(")");
  }

  ExprPtr parse_filter(ExprPtr input) {
    int line = peek().line;
    auto f = make(ExprKind::filter, line);
    f->a = std::move(input);
    f->name = expect_name();
    while (accept_op(".")) f->name.append(".").append(expect_name());
    f->known = filter_exists(f->name);
    if (!f->known && !soft_) error("no filter named '" + f->name + "'");
    if (is_op("(")) parse_call_args(*f);
    return f;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (accept_op("|")) {
        node = parse_filter(std::move(node));
      } else if (is_name("is")) {
        int line = next().line;
        auto t = make(ExprKind::test, line);
        t->negated = accept_name("not");
        t->name = expect_name();
        while (accept_op(".")) t->name.append(".").append(expect_name());
        t->known = test_exists(t->name);
        if (!t->known && !soft_) error("no test named '" + t->name + "'");
        t->a = std::move(node);
        const Token& n = peek();
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((n.type == Tok::name && n.text != "else" && n.text != "or" && n.text != "and") ||
                   n.type == Tok::string || n.type == Tok::integer || n.type == Tok::floating ||
                   is_op("(") || is_op("[") || is_op("{") || is_op("-")) {
          if (n.type == Tok::name && n.text == "is") error("unexpected 'is'");
          ExprPtr arg = parse_primary();
          t->args.push_back(parse_postfix(std::move(arg)));
        }
        node = std::move(t);
      } else if (is_op("(")) {
        node = parse_postfix(std::move(node));
      } else {
        return node;
      }
    }
  }

  std::vector<Token> toks_;
  size_t pos_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  bool soft_ = false;
};

}  // namespace

Body parse(const std::string& source) {
  return Parser(lex(source)).parse_template();
}

}  // namespace memra::jinja
