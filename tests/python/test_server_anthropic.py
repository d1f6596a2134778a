"""The Anthropic Messages API (POST /v1/messages, /v1/messages/count_tokens) on the real Gemma 3
270M, driven by the real `anthropic` client: message and usage shapes, the SSE event sequence and
its agreement with the non-streamed reply, stop sequences, forced tool use (tool_choice tool /
any) with schema-valid input, the tool_result round trip, output_config JSON schemas, token
counting, and errors in Anthropic's shape. Served with Qwen 2.5's template (Hermes tool calls)."""
import json

import anthropic
import httpx
import jsonschema
import pytest

from server_harness import API_KEY, real_server_with_template

WEATHER = {"name": "get_weather", "description": "Current weather for a city",
           "input_schema": {"type": "object",
                            "properties": {"city": {"type": "string"},
                                           "unit": {"enum": ["celsius", "fahrenheit"]}},
                            "required": ["city", "unit"], "additionalProperties": False}}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
GREEDY = {"temperature": 0}  # not in the current API; memra keeps the old field for old clients


@pytest.fixture(scope="module")
def server(build_dir, test_data):
    s = real_server_with_template(build_dir, test_data, "Qwen-Qwen2.5-7B-Instruct.jinja")
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def client(server):
    return anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=300)


@pytest.fixture(scope="module")
def model(server):
    models = httpx.get(server.url + "/v1/models", headers={"x-api-key": API_KEY}).json()
    return models["data"][0]["id"]


def test_message_shape_and_usage(client, model):
    r = client.messages.create(model=model, max_tokens=6, system="Be brief.", messages=ASK,
                               extra_body=GREEDY)
    assert r.type == "message" and r.role == "assistant" and r.id.startswith("msg_")
    assert r.model == model and r.stop_reason == "max_tokens" and r.stop_sequence is None
    assert [b.type for b in r.content] == ["text"] and r.content[0].text
    assert r.usage.output_tokens == 6 and r.usage.input_tokens > 10
    counted = client.messages.count_tokens(model=model, system="Be brief.", messages=ASK)
    assert counted.input_tokens == r.usage.input_tokens


def test_stream_events_match_the_message(client, model, server):
    kw = dict(model=model, max_tokens=8, system="Be brief.", messages=ASK, extra_body=GREEDY)
    full = client.messages.create(**kw)
    with client.messages.stream(**kw) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == full.content[0].text and final.content[0].text == text
    assert final.stop_reason == full.stop_reason and final.usage.output_tokens == 8
    # the raw event sequence
    body = {**kw, "stream": True, **GREEDY}
    del body["extra_body"]
    with httpx.stream("POST", server.url + "/v1/messages", json=body, timeout=120,
                      headers={"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}) as r:
        names = [line[len("event: "):] for line in r.iter_lines() if line.startswith("event: ")]
    assert names[:3] == ["message_start", "ping", "content_block_start"]
    assert set(names[3:-3]) == {"content_block_delta"}
    assert names[-3:] == ["content_block_stop", "message_delta", "message_stop"]


@pytest.mark.real_weights
def test_stop_sequence_is_reported(client, model):
    # Under Qwen's template this base model first writes Qwen's end-of-turn marker as text.
    base = client.messages.create(model=model, max_tokens=12, system="Be brief.", messages=ASK,
                                  extra_body=GREEDY).content[0].text
    assert "<|im_end|>" in base
    r = client.messages.create(model=model, max_tokens=12, system="Be brief.", messages=ASK,
                               stop_sequences=["<|im_end|>"], extra_body=GREEDY)
    assert r.stop_reason == "stop_sequence" and r.stop_sequence == "<|im_end|>"
    # exactly the greedy text up to the stop sequence
    assert "".join(b.text for b in r.content) == base[:base.index("<|im_end|>")]


@pytest.mark.real_weights
def test_forced_tool_use_and_round_trip(client, model):
    # Greedy: a sampled call ran its arguments past max_tokens (once in a full local run).
    r = client.messages.create(model=model, max_tokens=64, tools=[WEATHER], messages=ASK,
                               extra_body=GREEDY,
                               tool_choice={"type": "tool", "name": "get_weather"})
    assert r.stop_reason == "tool_use"
    [call] = [b for b in r.content if b.type == "tool_use"]
    assert call.name == "get_weather" and call.id.startswith("toolu_")
    jsonschema.validate(call.input, WEATHER["input_schema"])
    follow = client.messages.create(
        model=model, max_tokens=8, tools=[WEATHER], extra_body=GREEDY,
        messages=ASK + [{"role": "assistant", "content": r.content},
                        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id,
                                                      "content": "sunny, 21 C"}]}])
    # greedy: 8 tokens is the limit, fewer is the end of the turn (a call would be tool_use)
    calls = [b for b in follow.content if b.type == "tool_use"]
    assert follow.stop_reason == ("tool_use" if calls else
                                  "max_tokens" if follow.usage.output_tokens == 8 else "end_turn")
    # the call and its result were rendered, and the shared prefix came from the cache
    assert follow.usage.input_tokens > r.usage.input_tokens + r.usage.output_tokens
    assert follow.usage.cache_read_input_tokens > 0


@pytest.mark.real_weights
def test_streamed_any_tool_choice(client, model):
    # Greedy: a sampled call could run its arguments past max_tokens (it did, once in CI).
    with client.messages.stream(model=model, max_tokens=128, tools=[WEATHER], messages=ASK,
                                extra_body=GREEDY,
                                tool_choice={"type": "any", "disable_parallel_tool_use": True}) as s:
        final = s.get_final_message()
    assert final.stop_reason == "tool_use"
    [call] = [b for b in final.content if b.type == "tool_use"]
    jsonschema.validate(call.input, WEATHER["input_schema"])


@pytest.mark.real_weights
def test_output_config_json_schema(client, model):
    schema = {"type": "object", "additionalProperties": False, "required": ["city", "country"],
              "properties": {"city": {"type": "string"}, "country": {"enum": ["France", "Italy"]}}}
    r = client.messages.create(model=model, max_tokens=64, messages=ASK, extra_body=GREEDY,
                               output_config={"format": {"type": "json_schema", "schema": schema}})
    assert r.stop_reason == "end_turn"
    jsonschema.validate(json.loads(r.content[0].text), schema)


def test_errors_in_anthropic_shape(client, model, server):
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=model, max_tokens=0, messages=ASK)
    assert e.value.body["type"] == "error"
    assert e.value.body["error"]["type"] == "invalid_request_error"
    assert "max_tokens" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=model, max_tokens=5, messages=ASK,
                               thinking={"type": "enabled", "budget_tokens": 1024})
    assert "thinking" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.messages.create(model=model, max_tokens=5, messages=[
            {"role": "user", "content": [{"type": "image", "source": {"type": "url", "url": "x"}}]}])
    assert "image" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.NotFoundError) as e:
        client.messages.create(model="no-such-model", max_tokens=5, messages=ASK)
    assert e.value.body["error"]["type"] == "not_found_error"
    with pytest.raises(anthropic.AuthenticationError) as e:
        anthropic.Anthropic(base_url=server.url, api_key="wrong", max_retries=0).messages.create(
            model=model, max_tokens=5, messages=ASK)
    assert e.value.body["error"]["type"] == "authentication_error"
    r = httpx.post(server.url + "/v1/messages", headers={"x-api-key": API_KEY},
                   json={"model": model, "messages": ASK})
    assert r.status_code == 400 and r.json()["error"]["message"] == "'max_tokens' is required"
