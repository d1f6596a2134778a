// Built-in chat templates by architecture; see builtin_chat_templates.h.
#include "server/builtin_chat_templates.h"

namespace memra::server {

namespace {

// Gemma's turn format: <start_of_turn>user|model\n...<end_of_turn>\n, a system message folded
// into the first user turn, BOS first. Gemma has no tool role: tool results are shown as user
// turns.
constexpr const char* kGemma = R"JINJA({{- bos_token -}}
{%- if messages[0]['role'] == 'system' -%}
{%- set system_prefix = messages[0]['content'] ~ '\n\n' -%}
{%- set turns = messages[1:] -%}
{%- else -%}
{%- set system_prefix = '' -%}
{%- set turns = messages -%}
{%- endif -%}
{%- for message in turns -%}
{%- set role = 'model' if message['role'] == 'assistant' else 'user' -%}
{%- set prefix = system_prefix if loop.first else '' -%}
{{- '<start_of_turn>' ~ role ~ '\n' ~ prefix ~ ((message['content'] or '') | trim) ~ '<end_of_turn>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<start_of_turn>model\n' -}}
{%- endif -%})JINJA";

}  // namespace

std::string builtin_chat_template(const std::string& architecture) {
  if (architecture == "gemma3" || architecture == "gemma2" || architecture == "gemma")
    return kGemma;
  return "";
}

}  // namespace memra::server
