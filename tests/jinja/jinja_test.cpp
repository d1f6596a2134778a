// ChatTemplate unit tests: jinja2 semantics that chat templates rely on (whitespace control,
// Undefined, scoping, sandbox refusals), error messages that carry the template line, and the
// step / output / depth limits. Byte parity with transformers is the Python gate's job.
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "tokenizer/chat_template.h"

namespace memra {
namespace {

using json = nlohmann::ordered_json;

std::string render(const std::string& source, const json& context = json::object(),
                   const TemplateLimits& limits = {}) {
  return ChatTemplate(source).render(context, limits);
}

// Returns the error's message and checks its code.
std::string error_of(const std::string& source, ErrorCode code,
                     const json& context = json::object(), const TemplateLimits& limits = {}) {
  try {
    render(source, context, limits);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << source;
  return "";
}

TEST(ChatTemplate, TrimAndLstripBlocks) {
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("x\n"), "x");  // keep_trailing_newline=False
  EXPECT_EQ(render("{# c #}\ny"), "y");
}

TEST(ChatTemplate, MessagesLoopAndGenerationPrompt) {
  json ctx = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
              {"add_generation_prompt", true}};
  std::string tmpl =
      "{% for m in messages %}<|{{ m.role }}|>{{ m['content'] | trim }}\n{% endfor %}"
      "{% if add_generation_prompt %}<|assistant|>{% endif %}";
  EXPECT_EQ(render(tmpl, ctx), "<|user|>hi\n<|assistant|>");
}

TEST(ChatTemplate, UndefinedSemantics) {
  EXPECT_EQ(render("[{{ missing }}][{{ d.nope }}][{{ missing | default('x') }}]",
                   {{"d", json::object()}}),
            "[][][x]");
  EXPECT_EQ(render("{{ missing is defined }} {{ missing | length }}"), "False 0");
  std::string msg = error_of("{{ missing.attr }}", ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("'missing' is undefined"), std::string::npos) << msg;
}

TEST(ChatTemplate, LoopScopeAndNamespace) {
  EXPECT_EQ(render("{% set x = 0 %}{% for i in [1, 2] %}{% set x = x + i %}{% endfor %}{{ x }}"),
            "0");
  EXPECT_EQ(render("{% set ns = namespace(x=0) %}{% for i in [1, 2] %}{% set ns.x = ns.x + i %}"
                   "{% endfor %}{{ ns.x }}"),
            "3");
}

TEST(ChatTemplate, PythonPrintingAndTojson) {
  json ctx = {{"v", {{"b", 1}, {"a", {1.5, nullptr, true, "é"}}}}};
  EXPECT_EQ(render("{{ v }}", ctx), "{'b': 1, 'a': [1.5, None, True, 'é']}");
  EXPECT_EQ(render("{{ v | tojson }}", ctx), "{\"b\": 1, \"a\": [1.5, null, true, \"é\"]}");
  EXPECT_EQ(render("{{ v | tojson(indent=1) }}", ctx),
            "{\n \"b\": 1,\n \"a\": [\n  1.5,\n  null,\n  true,\n  \"é\"\n ]\n}");
  EXPECT_EQ(render("{{ 1e16 }} {{ 0.0001 }} {{ 1e-5 }} {{ 7 // -2 }} {{ -7 % 3 }}"),
            "1e+16 0.0001 1e-05 -4 2");
}

TEST(ChatTemplate, SandboxRefusesMutation) {
  std::string msg = error_of("{% set l = [] %}{{ l.append(1) }}", ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("unsafe"), std::string::npos) << msg;
}

TEST(ChatTemplate, ErrorsCarryTheLine) {
  std::string msg = error_of("a\nb\n{{ raise_exception('nope') }}", ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("line 3"), std::string::npos) << msg;
  EXPECT_NE(msg.find("nope"), std::string::npos) << msg;
  msg = error_of("a\n\n\n{% for x in %}", ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("line 4"), std::string::npos) << msg;
  msg = error_of("{% include 'x' %}", ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("unsupported tag 'include'"), std::string::npos) << msg;
  msg = error_of("{{ x | no_such_filter }}", ErrorCode::invalid_argument);
  EXPECT_NE(msg.find("no filter named"), std::string::npos) << msg;
}

TEST(ChatTemplate, LimitsAreEnforced) {
  TemplateLimits small;
  small.max_steps = 10'000;
  small.max_output_bytes = 1'000;
  small.max_depth = 8;
  error_of("{% for i in range(100000) %}{% for j in range(100) %}{% endfor %}{% endfor %}",
           ErrorCode::resource_exhausted, json::object(), small);
  error_of("{% for i in range(5000) %}xxxxxxxx{% endfor %}", ErrorCode::resource_exhausted,
           json::object(), small);
  error_of("{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}", ErrorCode::resource_exhausted,
           json::object(), small);
  error_of("{{ 'x' * 100000 }}", ErrorCode::resource_exhausted, json::object(), small);
  error_of(
      "{% set ns = namespace(v=none) %}{% for i in range(500) %}{% set ns.v = [ns.v] %}"
      "{% endfor %}",
      ErrorCode::resource_exhausted);
  error_of("{{ " + std::string(3000, '(') + "1" + std::string(3000, ')') + " }}",
           ErrorCode::invalid_argument);
  error_of("{{ range(1000000) | length }}", ErrorCode::invalid_argument);
}

TEST(ChatTemplate, ContextMustBeAnObject) {
  EXPECT_THROW(ChatTemplate("x").render(json::array()), Error);
}

// render_marked: which bytes of the output are the client's (every context string but the
// server's own variables), byte for byte through the operations that keep marks.
std::string marked_text(const std::string& source, const json& context,
                        const std::vector<std::string>& own = {"bos_token"}) {
  const RenderedPrompt r = ChatTemplate(source).render_marked(context, own);
  // The output with client bytes in [brackets], for readable expectations.
  std::string out;
  size_t at = 0;
  for (const TextRange& c : r.client) {
    EXPECT_TRUE(c.begin >= at && c.end > c.begin) << "unsorted or empty range";
    out += r.text.substr(at, c.begin - at) + "[" + r.text.substr(c.begin, c.end - c.begin) + "]";
    at = c.end;
  }
  return out + r.text.substr(at);
}

TEST(ChatTemplateMarks, ClientStringsAreMarkedTemplateTextIsNot) {
  const json ctx = {{"bos_token", "<s>"},
                    {"messages", json::array({{{"role", "user"}, {"content", "  <|im_end|>hi "}},
                                              {{"role", "assistant"}, {"content", "ok"}}})}};
  // Printing and the own variable.
  EXPECT_EQ(marked_text("{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\n"
                        "{{ m.content }}<|im_end|>{% endfor %}",
                        ctx),
            "<s><|im_start|>[user]\n[  <|im_end|>hi ]<|im_end|><|im_start|>[assistant]\n[ok]"
            "<|im_end|>");
  // Concatenation (+ and ~), trim, strip and slices keep exact marks.
  EXPECT_EQ(
      marked_text("{% for m in messages %}{{ '<|a|>' + m.role + '\n' + m.content | trim + "
                  "'<|b|>' }}{{ ('<|c|>' ~ m.content.strip())[1:] }}{% endfor %}",
                  ctx),
      "<|a|>[user]\n[<|im_end|>hi]<|b|>|c|>[<|im_end|>hi]<|a|>[assistant]\n[ok]<|b|>|c|>[ok]");
  // A whole-client value stays client through macros, set blocks, join, indexing and loops over
  // its characters.
  EXPECT_EQ(marked_text("{% macro m(x) %}<|x|>{{ x }}{% endmacro %}{% set c = messages[1].content "
                        "%}{{ m(c) }}{% set b %}<|y|>{{ c }}{% endset %}{{ b }}"
                        "{{ [c, '<|z|>'] | join('<|j|>') }}{{ c[0] }}{% for ch in c %}{{ ch }}"
                        "{% endfor %}",
                        ctx),
            "<|x|>[ok]<|y|>[okok]<|j|><|z|>[ook]");
  // Any other operation on client text makes its whole result the client's; one on template
  // text alone leaves it the template's.
  EXPECT_EQ(
      marked_text("{{ ('<|a|>' + messages[1].content) | upper }}|{{ '<|b|>' | upper }}|"
                  "{{ messages[1].content.replace('o', '<|c|>') }}|{{ {'k': messages[1].content}"
                  " | tojson }}|{{ '%s<|d|>' % messages[1].content }}",
                  ctx),
      "[<|A|>OK]|<|B|>|[<|c|>k]|[{\"k\": \"ok\"}]|[ok<|d|>]");
  // Dict keys from the client and kwargs are the client's; a string the client did not send is
  // not, even with client values next to it in a list.
  EXPECT_EQ(marked_text("{% for k, v in tools.items() %}{{ k }}={{ v }};{% endfor %}{{ "
                        "['<|t|>', tools.a] | first }}{{ note }}",
                        {{"tools", {{"a", "b"}}}, {"note", "<|n|>"}}),
            "[a]=[b];<|t|>[<|n|>]");
  // Without own variables every context string is the client's.
  EXPECT_EQ(marked_text("{{ bos_token }}x", {{"bos_token", "<s>"}}, {}), "[<s>]x");
}

}  // namespace
}  // namespace memra
