"""Conversations for the chat-template parity gate: system prompts, multi-turn, tool calls (dict
and JSON-string arguments) and tool results, content-part lists, reasoning_content, unicode and
markup characters. Each is rendered with several switch settings (generation prompt, thinking)."""
import json

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the current weather in a city. Says \"sunny\" <b>often</b> & more.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"],
                             "description": "Temperature unit"},
                    "days": {"type": "integer", "description": "Forecast days", "default": 1},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web.",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string", "description": "Search terms"},
                               "top_k": {"type": "number", "description": "How many results"}},
                "required": ["query"],
            },
        },
    },
]


def _call(name, args, string_args, call_id):
    arguments = json.dumps(args, ensure_ascii=False) if string_args else args
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def _tool_turns(string_args):
    calls = [_call("get_weather", {"city": "Paris", "unit": "celsius"}, string_args, "call1Abcd")]
    return [
        {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "tool_call_id": "call1Abcd", "name": "get_weather",
         "content": json.dumps({"temperature": 21, "condition": "sunny"})},
        {"role": "assistant", "content": "It is 21 °C and sunny in Paris."},
    ]


def _parallel_calls(string_args):
    calls = [
        _call("get_weather", {"city": "Tokyo"}, string_args, "callA1234"),
        _call("search", {"query": "tokyo events", "top_k": 3}, string_args, "callB5678"),
    ]
    return [
        {"role": "system", "content": "You are a helpful agent."},
        {"role": "user", "content": "Weather and events in Tokyo?"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        {"role": "tool", "tool_call_id": "callA1234", "name": "get_weather", "content": "rainy, 14C"},
        {"role": "tool", "tool_call_id": "callB5678", "name": "search", "content": "Sumo tournament"},
    ]


def base_conversations():
    """(kind, messages, uses_tools) triples."""
    sys = {"role": "system", "content": "You are a concise assistant."}
    return [
        ("user", [{"role": "user", "content": "Hello!"}], False),
        ("system_user", [sys, {"role": "user", "content": "Hi, who are you?"}], False),
        ("multi_turn", [sys, {"role": "user", "content": "2+2?"},
                        {"role": "assistant", "content": "4"},
                        {"role": "user", "content": "And 3+3?"}], False),
        ("multi_turn_no_system", [{"role": "user", "content": "Name a color."},
                                  {"role": "assistant", "content": "Blue."},
                                  {"role": "user", "content": "Another?"},
                                  {"role": "assistant", "content": "Green."},
                                  {"role": "user", "content": "Thanks"}], False),
        ("assistant_last", [sys, {"role": "user", "content": "Say hi"},
                            {"role": "assistant", "content": "hi"}], False),
        ("unicode", [{"role": "user", "content": "日本語で答えて 🙂 — «quotes» 'single' \"double\""},
                     {"role": "assistant", "content": "はい！ 👍🏽 café"},
                     {"role": "user", "content": "Ещё раз, por favor. ไทย"}], False),
        ("markup_chars", [{"role": "user", "content": "<tag> & {{ not jinja }} {% raw %} \\n \t tab"}],
         False),
        ("whitespace", [{"role": "system", "content": "  padded system  \n"},
                        {"role": "user", "content": "\n\nlines\n\n"}], False),
        ("content_parts", [{"role": "user", "content": [{"type": "text", "text": "Describe this."},
                                                        {"type": "text", "text": "Be brief."}]}],
         False),
        ("content_parts_multi", [{"role": "system", "content": [{"type": "text", "text": "Sys part."}]},
                                 {"role": "user", "content": [{"type": "text", "text": "Q1"}]},
                                 {"role": "assistant", "content": [{"type": "text", "text": "A1"}]},
                                 {"role": "user", "content": [{"type": "text", "text": "Q2"}]}],
         False),
        ("reasoning_content", [{"role": "user", "content": "Think: 17*3?"},
                               {"role": "assistant", "content": "51",
                                "reasoning_content": "17*3 = 51, double-check: 51."},
                               {"role": "user", "content": "And 18*3?"}], False),
        ("think_in_content", [{"role": "user", "content": "Riddle?"},
                              {"role": "assistant",
                               "content": "<think>\nLet me think.\n</think>\n\nThe answer is 42."},
                              {"role": "user", "content": "Why?"}], False),
        ("empty_system", [{"role": "system", "content": ""},
                          {"role": "user", "content": "ping"}], False),
        ("tools_user", [{"role": "user", "content": "What's the weather in Oslo?"}], True),
        ("tools_system_user", [sys, {"role": "user", "content": "Search for jinja docs"}], True),
        ("tool_call_dict", _tool_turns(False), True),
        ("tool_call_json_string", _tool_turns(True), True),
        ("parallel_tool_calls_dict", _parallel_calls(False), True),
        ("parallel_tool_calls_string", _parallel_calls(True), True),
        ("tool_call_no_tools_list", _tool_turns(False), False),
        ("tool_call_with_reasoning",
         [{"role": "user", "content": "Weather in Rome?"},
          {"role": "assistant", "content": "", "reasoning_content": "Need the tool.",
           "tool_calls": [_call("get_weather", {"city": "Rome"}, False, "callR9012")]},
          {"role": "tool", "tool_call_id": "callR9012", "name": "get_weather", "content": "hot"},
          {"role": "user", "content": "Thanks!"}], True),
    ]


def cases():
    """(case_id, messages, tools, add_generation_prompt, extra kwargs) for every variant."""
    out = []
    for kind, messages, uses_tools in base_conversations():
        tools = TOOLS if uses_tools else None
        variants = [
            ("gen", True, {}),
            ("nogen", False, {}),
            ("gen_think", True, {"enable_thinking": True}),
            ("gen_nothink", True, {"enable_thinking": False}),
        ]
        for suffix, agp, extra in variants:
            out.append((f"{kind}/{suffix}", messages, tools, agp, extra))
    return out
