"""memra-server with the real Gemma 3 270M on the CPU, driven by the real `openai` client:
chat and completions (streaming and not), usage, stop strings, n, seeds, logprobs, every error
status, 64 concurrent streams, a mid-stream disconnect that frees its sequence."""
import concurrent.futures
import json
import math
import time

import httpx
import openai
import pytest

from server_harness import API_KEY, REAL_ARGS, Server, real_server_binary

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def server(build_dir):
    s = Server(real_server_binary(build_dir), REAL_ARGS + ["--max-body-bytes", "65536"],
               env={"MEMRA_API_KEYS": API_KEY})
    yield s
    assert s.stop() == 0, s.log_text()


@pytest.fixture(scope="module")
def client(server):
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0, timeout=120)


def model_id(client):
    return client.models.list().data[0].id


def test_models_lists_the_default_model(client):
    models = client.models.list().data
    assert len(models) == 1 and "gemma" in models[0].id.lower()


@pytest.mark.real_weights
def test_completion_answers_paris(client):
    # The packaged Gemma 3 270M is the base (pretrained) model: it answers a Q/A prompt, not chat.
    r = client.completions.create(model=model_id(client), temperature=0, max_tokens=4,
                                  prompt="Question: What is the capital of France?\nAnswer:")
    assert "Paris" in r.choices[0].text
    assert r.usage.prompt_tokens > 5 and r.usage.completion_tokens == 4


def test_chat_renders_and_counts(client):
    r = client.chat.completions.create(
        model=model_id(client), temperature=0, max_tokens=12,
        messages=[{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": [{"type": "text", "text": "Capital of France?"}]}])
    assert r.object == "chat.completion" and r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content
    assert 0 < r.usage.completion_tokens <= 12
    # greedy, so one reason is right: all 12 tokens is the limit, fewer is EOS
    assert r.choices[0].finish_reason == ("length" if r.usage.completion_tokens == 12 else "stop")
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_chat_stream_matches_non_stream(client):
    kw = dict(model=model_id(client), temperature=0, max_tokens=8,
              messages=[{"role": "user", "content": "Name a color."}])
    full = client.chat.completions.create(**kw)
    chunks = list(client.chat.completions.create(**kw, stream=True,
                                                 stream_options={"include_usage": True}))
    assert len({c.id for c in chunks}) == 1 and len({c.created for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == full.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == [full.choices[0].finish_reason]
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_completions_stream_and_usage(client):
    full = client.completions.create(model=model_id(client), prompt=PROMPT, max_tokens=6, temperature=0)
    assert full.choices[0].finish_reason == "length" and full.usage.completion_tokens == 6
    streamed = "".join(c.choices[0].text for c in client.completions.create(
        model=model_id(client), prompt=PROMPT, max_tokens=6, temperature=0, stream=True) if c.choices)
    assert streamed == full.choices[0].text


def test_stop_string_is_not_emitted(client):
    base = client.completions.create(model=model_id(client), prompt=PROMPT, max_tokens=10,
                                     temperature=0).choices[0].text
    stop = base.strip().split()[1]  # a word that greedy decoding is known to produce
    r = client.completions.create(model=model_id(client), prompt=PROMPT, max_tokens=10,
                                  temperature=0, stop=[stop, "\u00a7never"])
    assert r.choices[0].finish_reason == "stop"
    # exactly the greedy text up to the first place the stop string appears (across tokens)
    assert r.choices[0].text == base[:base.index(stop)]
    assert base.index(stop) > 0


@pytest.mark.real_weights
def test_n2_and_seed_reproducibility(client):
    kw = dict(model=model_id(client), prompt="Once upon a time", max_tokens=8, temperature=1.0,
              extra_body={"ignore_eos": True})
    a = client.completions.create(**kw, seed=1234, n=2)
    b = client.completions.create(**kw, seed=1234, n=2)
    assert [c.index for c in a.choices] == [0, 1]
    assert [c.text for c in a.choices] == [c.text for c in b.choices]
    assert a.usage.completion_tokens == 16
    # choice i samples with seed + i: the two choices differ, and choice 1 is a request of its own
    # with seed 1235
    assert a.choices[0].text != a.choices[1].text
    one = client.completions.create(**kw, seed=1235)
    assert one.choices[0].text == a.choices[1].text


def test_logprobs(client):
    r = client.chat.completions.create(
        model=model_id(client), temperature=0, max_tokens=4, logprobs=True, top_logprobs=2,
        messages=[{"role": "user", "content": "Say hi."}])
    items = r.choices[0].logprobs.content
    assert len(items) == r.usage.completion_tokens
    for it in items:
        assert it.logprob <= 0 and len(it.top_logprobs) == 2
        assert it.top_logprobs[0].logprob >= it.top_logprobs[1].logprob
        # greedy: the chosen token is the most likely one, the same token with the same logprob
        assert it.top_logprobs[0].token == it.token
        assert abs(it.top_logprobs[0].logprob - it.logprob) < 1e-4
        assert it.top_logprobs[1].token != it.token
        # the bytes are the token's text, and the alternatives are disjoint events
        assert bytes(it.bytes).decode("utf-8") == it.token
        assert all(bytes(t.bytes).decode("utf-8") == t.token for t in it.top_logprobs)
        assert sum(math.exp(t.logprob) for t in it.top_logprobs) <= 1 + 1e-6
    if r.choices[0].finish_reason == "length":  # EOS ends without text
        assert "".join(it.token for it in items) == r.choices[0].message.content
    c = client.completions.create(model=model_id(client), prompt=PROMPT, max_tokens=3,
                                  temperature=0, logprobs=2)
    lp = c.choices[0].logprobs
    assert len(lp.tokens) == 3 and "".join(lp.tokens) == c.choices[0].text
    assert lp.text_offset == [0, len(lp.tokens[0]), len(lp.tokens[0]) + len(lp.tokens[1])]
    for token, logprob, top in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs):
        assert len(top) == 2 and top[token] == pytest.approx(logprob, abs=1e-4)
        assert max(top.values()) == top[token]  # greedy
        assert sum(math.exp(v) for v in top.values()) <= 1 + 1e-6


def test_error_statuses(server, client):
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_id(client), prompt="x", temperature=7)
    assert e.value.body["param"] == "temperature"
    with pytest.raises(openai.BadRequestError) as e:
        client.completions.create(model=model_id(client), prompt="x", max_tokens=2_000_000)
    assert "1024" in e.value.message and "2000000" in e.value.message
    assert e.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError) as e:
        # memra's built-in Gemma template teaches no tool-call format: a call cannot be forced
        client.chat.completions.create(
            model=model_id(client), messages=[{"role": "user", "content": "x"}],
            tools=[{"type": "function", "function": {"name": "f"}}], tool_choice="required")
    assert e.value.body["param"] == "tool_choice" and "tool-call format" in e.value.message
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=server.url + "/v1", api_key="wrong", max_retries=0).models.list()
    with pytest.raises(openai.NotFoundError):
        client.completions.create(model="no-such-model", prompt="x")
    r = httpx.get(server.url + "/v1/nowhere", headers={"authorization": f"Bearer {API_KEY}"})
    assert r.status_code == 404 and r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/completions", content=b"{" + b" " * 70000 + b"}",
                   headers={"authorization": f"Bearer {API_KEY}", "content-type": "application/json"})
    assert r.status_code == 413 and "65536" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/completions", content=b"{not json",
                   headers={"x-api-key": API_KEY})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"
    assert httpx.get(server.url + "/health").status_code == 200  # probes need no key
    assert httpx.get(server.url + "/livez").status_code == 200


def test_64_concurrent_streams(server, client):
    mid = model_id(client)
    solo = client.completions.create(model=mid, prompt=PROMPT, max_tokens=3, temperature=0)

    def one(i):
        chunks = list(client.completions.create(model=mid, prompt=PROMPT, max_tokens=3,
                                                temperature=0, stream=True,
                                                stream_options={"include_usage": True}))
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        return text, chunks[-1].usage.completion_tokens

    with concurrent.futures.ThreadPoolExecutor(64) as pool:
        results = list(pool.map(one, range(64)))
    assert all(r == (solo.choices[0].text, 3) for r in results), results[:4]


def test_disconnect_frees_the_sequence(server):
    headers = {"authorization": f"Bearer {API_KEY}"}
    before = server.metrics(headers).get('memra:request_success_total{finished_reason="cancelled"}', 0)
    body = {"prompt": "Write a long story.", "max_tokens": 500, "temperature": 0, "stream": True}
    with httpx.stream("POST", server.url + "/v1/completions", json=body, headers=headers,
                      timeout=60) as r:
        lines = r.iter_lines()
        got = [next(lines) for _ in range(4)]
        assert any(line.startswith("data: ") for line in got)
    # the connection is closed here; the sequence must leave the engine promptly
    deadline = time.time() + 10
    while time.time() < deadline:
        m = server.metrics(headers)
        running = sum(v for k, v in m.items() if k.startswith("memra:num_requests_running"))
        cancelled = m.get('memra:request_success_total{finished_reason="cancelled"}', 0)
        if running == 0 and cancelled == before + 1:
            break
        time.sleep(0.05)
    assert running == 0 and cancelled == before + 1, m
