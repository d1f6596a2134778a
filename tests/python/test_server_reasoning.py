"""Thinking output on the real Gemma 3 270M served with Qwen3.5's template, which opens a
<think> span in the generation prompt (so whatever the model writes first is its thinking):
chat_template_kwargs reach the template, reasoning_content (chat, streamed and not), the thinking
budget forcing </think> so an answer follows, Anthropic thinking blocks and Responses reasoning
items through the real clients. The exact split on scripted replies is tested in C++
(tests/server/reasoning_test.cpp), since this base model never writes the tags itself."""
import anthropic
import httpx
import pytest

from server_harness import API_KEY, openai_client, real_server_with_template

ASK = [{"role": "user", "content": "What is the capital of France?"}]
GREEDY = {"temperature": 0}  # not in the current Anthropic API; memra keeps it for old clients


@pytest.fixture(scope="module")
def server(build_dir, test_data):
    s = real_server_with_template(build_dir, test_data, "Qwen3.5-4B.jinja")
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server)


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def rendered(server, **extra):
    auth = {"authorization": f"Bearer {API_KEY}"}
    ids = httpx.post(server.url + "/tokenize", json={"messages": ASK, **extra}, headers=auth).json()
    return httpx.post(server.url + "/detokenize", json={"tokens": ids["tokens"]},
                      headers=auth).json()["prompt"]


def test_template_kwargs_reach_the_template(server):
    assert rendered(server).endswith("<think>\n")
    assert rendered(server, chat_template_kwargs={"enable_thinking": False}).endswith(
        "<think>\n\n</think>\n\n")
    r = httpx.post(server.url + "/tokenize", headers={"authorization": f"Bearer {API_KEY}"},
                   json={"messages": ASK, "chat_template_kwargs": {"add_generation_prompt": False}})
    assert r.status_code == 400 and r.json()["error"]["param"] == "chat_template_kwargs.add_generation_prompt"


@pytest.mark.real_weights
def test_reasoning_content_streamed_and_not(client, model):
    kw = dict(model=model, messages=ASK, temperature=0, max_tokens=8)
    full = client.chat.completions.create(**kw)
    message = full.choices[0].message
    # Inside the span the template opened: every token so far is thinking.
    assert message.model_extra["reasoning_content"] and not message.content
    reasoning, content = "", ""
    for chunk in client.chat.completions.create(**kw, stream=True):
        delta = chunk.choices[0].delta
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        content += delta.content or ""
    assert reasoning == message.model_extra["reasoning_content"] and content == ""
    off = client.chat.completions.create(**kw, extra_body={
        "chat_template_kwargs": {"enable_thinking": False}})
    assert off.choices[0].message.content and "reasoning_content" not in off.choices[0].message.model_extra


@pytest.mark.real_weights
def test_thinking_budget_forces_an_answer(client, model):
    r = client.chat.completions.create(model=model, messages=ASK, temperature=0, max_tokens=24,
                                       extra_body={"max_thinking_tokens": 4})
    message = r.choices[0].message
    assert message.model_extra["reasoning_content"] and message.content, message
    assert r.usage.completion_tokens <= 24


@pytest.mark.real_weights
def test_anthropic_thinking_blocks(server, model):
    client = anthropic.Anthropic(base_url=server.url, api_key=API_KEY, max_retries=0, timeout=300)
    m = client.messages.create(model=model, max_tokens=8, messages=ASK, extra_body=GREEDY)
    assert m.content[0].type == "thinking" and m.content[0].thinking
    with client.messages.stream(model=model, max_tokens=8, messages=ASK, extra_body=GREEDY) as stream:
        final = stream.get_final_message()
    assert final.content[0].type == "thinking" and final.content[0].thinking == m.content[0].thinking
    off = client.messages.create(model=model, max_tokens=8, messages=ASK, extra_body=GREEDY,
                                 thinking={"type": "disabled"})
    assert [b.type for b in off.content] == ["text"]


@pytest.mark.real_weights
def test_responses_reasoning_items(client, model):
    r = client.responses.create(model=model, input="What is the capital of France?",
                                temperature=0, max_output_tokens=8, store=False)
    assert r.output[0].type == "reasoning" and r.output[0].content[0].text
    assert r.usage.output_tokens_details.reasoning_tokens > 0
    with client.responses.stream(model=model, input="What is the capital of France?",
                                 temperature=0, max_output_tokens=8, store=False) as stream:
        deltas = [e.delta for e in stream if e.type == "response.reasoning_text.delta"]
    assert "".join(deltas) == r.output[0].content[0].text
