"""The OpenAI Responses API on the real Gemma 3 270M, driven by the real `openai` client:
responses.create / stream / retrieve / delete / input_items.list, instructions and metadata,
function tools forced by tool_choice (the base model never calls tools by itself) with the tool's
output sent back through previous_response_id, text.format json_schema through constrained
decoding, and refusals by name. Served with Qwen 2.5's template, whose Hermes tool-call format
lets a call be forced."""
import json

import jsonschema
import openai
import pytest

from server_harness import openai_client, real_server_with_template

QUESTION = "Question: What is the capital of France?\nAnswer:"
WEATHER = {
    "type": "function",
    "name": "get_weather",
    "description": "Current weather for a city",
    "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["c", "f"]}},
        "required": ["city", "unit"],
        "additionalProperties": False,
    },
}


@pytest.fixture(scope="module")
def server(build_dir, test_data):
    s = real_server_with_template(build_dir, test_data, "Qwen-Qwen2.5-7B-Instruct.jinja")
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def test_create_retrieve_list_delete(client, model):
    r = client.responses.create(model=model, input=QUESTION, instructions="Answer in one word.",
                                temperature=0, max_output_tokens=8, metadata={"suite": "memra"})
    assert r.object == "response" and r.id.startswith("resp_")
    assert r.status in ("completed", "incomplete") and r.output_text
    assert r.instructions == "Answer in one word." and r.metadata == {"suite": "memra"}
    assert r.usage.input_tokens > 5 and 0 < r.usage.output_tokens <= 8
    if r.status == "incomplete":
        assert r.incomplete_details.reason == "max_output_tokens"
    got = client.responses.retrieve(r.id)
    assert got.model_dump() == r.model_dump()
    items = client.responses.input_items.list(r.id)
    assert [i.type for i in items.data] == ["message"]
    assert items.data[0].content[0].text == QUESTION
    client.responses.delete(r.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve(r.id)


def test_stream_matches_create(client, model):
    kw = dict(model=model, input=QUESTION, temperature=0, max_output_tokens=6, store=False)
    full = client.responses.create(**kw)
    types, deltas = [], []
    with client.responses.stream(**kw) as stream:
        for event in stream:
            types.append(event.type)
            if event.type == "response.output_text.delta":
                deltas.append(event.delta)
    # max_output_tokens ends it as OpenAI does: response.incomplete, which get_final_response
    # (waiting for response.completed) does not take; the event carries the response.
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types[-1] == "response.incomplete" and full.status == "incomplete"
    final = event.response
    assert "".join(deltas) == full.output_text == final.output_text
    assert final.usage.output_tokens == full.usage.output_tokens
    with pytest.raises(openai.NotFoundError):  # store=False
        client.responses.retrieve(final.id)


@pytest.mark.real_weights
def test_forced_function_call_then_its_output(client, model):
    first = client.responses.create(model=model, input="What is the weather in Paris?",
                                    tools=[WEATHER], tool_choice="required", temperature=0,
                                    max_output_tokens=60)
    calls = [o for o in first.output if o.type == "function_call"]
    assert calls and all(c.name == "get_weather" for c in calls), first.output
    jsonschema.validate(json.loads(calls[0].arguments), WEATHER["parameters"])
    second = client.responses.create(
        model=model, previous_response_id=first.id, tools=[WEATHER], temperature=0,
        max_output_tokens=12,
        input=[{"type": "function_call_output", "call_id": c.call_id, "output": "Sunny, 21 C"}
               for c in calls])
    assert second.previous_response_id == first.id and second.status in ("completed", "incomplete")
    assert second.output_text
    listed = client.responses.input_items.list(second.id).data
    assert {i.type for i in listed} == {"function_call_output"}


@pytest.mark.real_weights
def test_streamed_function_call(client, model):
    with client.responses.stream(model=model, input="Weather in Rome?", tools=[WEATHER],
                                 tool_choice={"type": "function", "name": "get_weather"},
                                 temperature=0, max_output_tokens=60) as stream:
        types = [event.type for event in stream]
        final = stream.get_final_response()
    assert "response.function_call_arguments.delta" in types
    assert "response.function_call_arguments.done" in types
    call = final.output[-1]
    assert call.type == "function_call" and call.name == "get_weather"
    jsonschema.validate(json.loads(call.arguments), WEATHER["parameters"])


def test_text_format_json_schema(client, model):
    schema = {"type": "object", "properties": {"capital": {"type": "string"},
                                               "population_millions": {"type": "number"}},
              "required": ["capital", "population_millions"], "additionalProperties": False}
    r = client.responses.create(
        model=model, input="Facts about France, as JSON.", temperature=0, max_output_tokens=64,
        text={"format": {"type": "json_schema", "name": "answer", "schema": schema, "strict": True}})
    assert r.status == "completed", r
    jsonschema.validate(json.loads(r.output_text), schema)


def test_refusals_by_name(client, model):
    for kw, param in [(dict(tools=[{"type": "web_search"}]), "tools[0].type"),
                      (dict(text={"format": {"type": "json_schema", "name": "a", "schema": {
                          "type": "string", "maxLength": 3}}}), "text.format.schema"),
                      (dict(background=True), "background"),
                      (dict(include=["file_search_call.results"]), "include")]:
        with pytest.raises(openai.BadRequestError) as e:
            client.responses.create(model=model, input="x", **kw)
        assert e.value.body["param"] == param
        assert e.value.body["code"] in ("unsupported_parameter", "unsupported_schema")
    with pytest.raises(openai.NotFoundError):
        client.responses.retrieve("resp_unknown")
    with pytest.raises(openai.NotFoundError) as e:
        client.responses.create(model=model, input="x", previous_response_id="resp_unknown")
    assert e.value.body["param"] == "previous_response_id"
