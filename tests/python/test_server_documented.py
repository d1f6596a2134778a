"""Behaviour docs/SERVING.md promises, one test each: /tokenize, /detokenize and /v1/models/{id};
every refused parameter; the write and idle timeouts and an expired --shutdown-timeout; routing
between several models by alias; the metrics' values after known traffic; keys and prompts never
logged, even at debug level. These run on memra-fake-server (the real server over a scripted
engine with a byte-level tokenizer: one id per byte, <bos> = 256), except --no-prefix-cache and
the environment booleans, which need the real engine's prefix cache (the qwen2 fixture)."""
import json
import pathlib
import signal
import socket
import subprocess
import time

import httpx
import pytest

from server_harness import Server, fake_server_binary, real_server_binary

QWEN2 = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "models" / "qwen2"
BOS = 256


@pytest.fixture(scope="module")
def fake(build_dir):
    s = Server(fake_server_binary(build_dir), ["--ctx-size", "512"])
    yield s
    assert s.stop() == 0, s.log_text()


def test_tokenize_detokenize_and_model_card(fake):
    r = httpx.post(fake.url + "/tokenize", json={"prompt": "hi <bos>"}).json()
    # BOS added, and control-token text in a raw prompt is the control token (as Hugging Face
    # tokenizers, vLLM and llama.cpp do: issue 12 item 5)
    assert r == {"tokens": [BOS, *b"hi ", BOS], "count": 5, "max_model_len": 512}
    r = httpx.post(fake.url + "/tokenize", json={"prompt": "hi", "add_special_tokens": False})
    assert r.json()["tokens"] == list(b"hi")
    # messages are rendered exactly as chat renders them: the count is chat's prompt_tokens
    messages = [{"role": "user", "content": "Hello there"}]
    counted = httpx.post(fake.url + "/tokenize", json={"messages": messages}).json()
    chat = httpx.post(fake.url + "/v1/chat/completions",
                      json={"messages": messages, "max_tokens": 1}).json()
    assert counted["count"] == chat["usage"]["prompt_tokens"] == len(counted["tokens"])
    text = httpx.post(fake.url + "/detokenize", json={"tokens": counted["tokens"]}).json()
    assert text == {"prompt": "<bos><start_of_turn>user\nHello there<end_of_turn>\n"
                              "<start_of_turn>model\n"}
    bad = httpx.post(fake.url + "/detokenize", json={"tokens": [1, 260]})
    assert bad.status_code == 400 and bad.json()["error"]["param"] == "tokens"
    card = httpx.get(fake.url + "/v1/models/fake-model").json()
    want = {"id": "fake-model", "object": "model", "owned_by": "memra", "max_model_len": 512,
            "architecture": "fake", "deterministic": True}
    assert {k: card.get(k) for k in want} == want, card
    missing = httpx.get(fake.url + "/v1/models/other")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


CHAT = {"messages": [{"role": "user", "content": "x"}]}
REFUSED = [  # (route, field, value)
    ("/v1/chat/completions", "functions", [{"name": "f"}]),
    ("/v1/chat/completions", "function_call", "auto"),
    ("/v1/chat/completions", "audio", {"voice": "alloy"}),
    ("/v1/chat/completions", "prediction", {"type": "content", "content": "x"}),
    ("/v1/chat/completions", "web_search_options", {}),
    ("/v1/chat/completions", "modalities", ["text", "audio"]),
    ("/v1/chat/completions", "grammar", "root ::= \"a\""),
    ("/v1/chat/completions", "guided_json", {"type": "object"}),
    ("/v1/chat/completions", "guided_regex", "a+"),
    ("/v1/chat/completions", "guided_grammar", "root ::= \"a\""),
    ("/v1/completions", "suffix", "tail"),
    ("/v1/completions", "echo", True),
    ("/v1/completions", "best_of", 3),
    ("/v1/completions", "grammar", "root ::= \"a\""),
    ("/v1/completions", "guided_json", {"type": "object"}),
]


@pytest.mark.parametrize("route,field,value", REFUSED,
                         ids=[("chat-" if "chat" in r else "completions-") + f for r, f, _ in REFUSED])
def test_refused_parameter_is_named(fake, route, field, value):
    body = dict(CHAT) if route.endswith("chat/completions") else {"prompt": "x"}
    body[field] = value
    r = httpx.post(fake.url + route, json=body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == "unsupported_parameter" and err["param"] == field, err
    assert (field if field != "modalities" else "modality") in err["message"]


def test_accepted_forms_of_refusable_fields(fake):
    # echo false, best_of == n and text-only modalities are what OpenAI does by default
    ok = httpx.post(fake.url + "/v1/completions", json={"prompt": "x", "max_tokens": 2,
                                                        "echo": False, "best_of": 2, "n": 2})
    assert ok.status_code == 200 and len(ok.json()["choices"]) == 2
    ok = httpx.post(fake.url + "/v1/chat/completions", json={**CHAT, "max_tokens": 2,
                                                             "modalities": ["text"]})
    assert ok.status_code == 200


def sse_request(path, body):
    data = json.dumps(body).encode()
    return (b"POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % (path.encode(), len(data))) + data


def test_idle_timeout_closes_a_keep_alive_connection(build_dir):
    s = Server(fake_server_binary(build_dir), ["--idle-timeout", "1"])
    try:
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
            first = c.recv(4096)
            assert first.startswith(b"HTTP/1.1 200") and b"keep-alive" in first
            start = time.time()
            assert c.recv(4096) == b""  # the server closed the idle connection
            assert 0.8 < time.time() - start < 5
    finally:
        assert s.stop() == 0


def test_write_timeout_drops_a_client_that_reads_nothing(build_dir):
    s = Server(fake_server_binary(build_dir), ["--write-timeout", "1", "--ctx-size", "70000"],
               env={"MEMRA_FAKE_STEP_MS": "0"})
    try:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(("127.0.0.1", s.port))
        c.sendall(sse_request("/v1/completions", {"prompt": "x", "max_tokens": 60000,
                                                   "ignore_eos": True, "logprobs": 20,
                                                   "stream": True}))
        key = 'memra:request_success_total{finished_reason="cancelled"}'
        deadline = time.time() + 30
        while s.metrics().get(key, 0) != 1:  # dropped: counted as cancelled, no longer in flight
            assert time.time() < deadline, s.log_text()
            time.sleep(0.2)
        # The handler leaves the in-flight count just after the generation is counted: wait for
        # it (bounded), then only the metrics request itself is in flight.
        while s.metrics()["memra:http_requests_in_flight"] != 1:
            assert time.time() < deadline, s.metrics()
            time.sleep(0.05)
        assert s.metrics().get(key, 0) == 1
        c.close()
    finally:
        assert s.stop() == 0


def test_expired_shutdown_timeout_cancels_and_exits_0(build_dir):
    s = Server(fake_server_binary(build_dir), ["--shutdown-timeout", "1", "--ctx-size", "1024"],
               env={"MEMRA_FAKE_STEP_MS": "50"})
    lines = []
    with httpx.stream("POST", s.url + "/v1/completions", timeout=60, json={
            "prompt": "x", "max_tokens": 400, "ignore_eos": True, "stream": True}) as r:
        assert r.status_code == 200
        it = r.iter_lines()
        lines.append(next(it))
        start = time.time()
        s.proc.send_signal(signal.SIGTERM)
        try:
            lines.extend(it)
        except httpx.HTTPError:
            pass
    rc = s.proc.wait(10)
    elapsed = time.time() - start
    assert rc == 0, s.log_text()
    assert 0.9 < elapsed < 6, elapsed  # 400 tokens at 50 ms would take 20 s
    assert "data: [DONE]" not in lines
    assert "cancelling 1 request(s) still running" in s.log_text()
    s.stop()


def test_routing_between_models_by_alias(build_dir):
    s = Server(fake_server_binary(build_dir), env={"MEMRA_MODELS": "small=/a.gguf,big=/b.gguf"})
    try:
        ids = [m["id"] for m in httpx.get(s.url + "/v1/models").json()["data"]]
        assert ids == ["small", "big"]
        r = httpx.post(s.url + "/v1/completions",
                       json={"model": "big", "prompt": "x", "max_tokens": 3, "ignore_eos": True})
        assert r.status_code == 200 and r.json()["model"] == "big"
        m = s.metrics()
        assert m['memra:generation_tokens_total{model_name="big"}'] == 3
        assert m['memra:generation_tokens_total{model_name="small"}'] == 0
        r = httpx.post(s.url + "/v1/chat/completions", json={**CHAT, "model": "small",
                                                             "max_tokens": 2})
        assert r.status_code == 200 and r.json()["model"] == "small"
        assert s.metrics()['memra:generation_tokens_total{model_name="small"}'] == 2
        assert httpx.get(s.url + "/v1/models/big").json()["id"] == "big"
        r = httpx.post(s.url + "/v1/completions", json={"model": "medium", "prompt": "x"})
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    finally:
        assert s.stop() == 0


def test_metrics_values_after_known_traffic(build_dir):
    s = Server(fake_server_binary(build_dir))
    try:
        for _ in range(2):  # 2 x (1 + 5 prompt tokens, 4 generated)
            r = httpx.post(s.url + "/v1/completions",
                           json={"prompt": "hello", "max_tokens": 4, "ignore_eos": True})
            assert r.status_code == 200
        chunks = httpx.post(s.url + "/v1/completions", json={
            "prompt": "abc", "max_tokens": 3, "ignore_eos": True, "stream": True}).text
        assert '"finish_reason":"length"' in chunks
        assert httpx.post(s.url + "/v1/completions", json={"prompt": 5}).status_code == 400
        m = s.metrics()
        model = '{model_name="fake-model"}'
        assert m["memra:prompt_tokens_total" + model] == 2 * 6 + 4
        assert m["memra:generation_tokens_total" + model] == 2 * 4 + 3
        assert m["memra:num_requests_running" + model] == 0
        assert m["memra:num_requests_waiting" + model] == 0
        assert m["memra:engine_steps_total" + model] >= 4
        assert m['memra:http_requests_total{route="/v1/completions",status="200"}'] == 3
        assert m['memra:http_requests_total{route="/v1/completions",status="400"}'] == 1
        assert m['memra:request_success_total{finished_reason="length"}'] == 3
        assert m.get('memra:request_success_total{finished_reason="stop"}', 0) == 0
        assert m["memra:time_to_first_token_seconds_count"] == 3
        assert m["memra:e2e_request_latency_seconds_count"] == 3
        assert m["memra:time_per_output_token_seconds_count"] == 3
        assert m["memra:http_requests_in_flight"] == 1  # this scrape
    finally:
        assert s.stop() == 0


SECRET_KEY = "sk-memra-very-secret-key-4711"
WRONG_KEY = "sk-memra-wrong-key-0815"
SECRET_PROMPT = "Zanzibar-quokka-prompt-31337"


def send_secret_traffic(s):
    auth = {"authorization": f"Bearer {SECRET_KEY}"}
    for path, body in [
        ("/v1/completions", {"prompt": SECRET_PROMPT, "max_tokens": 3}),
        ("/v1/completions", {"prompt": SECRET_PROMPT, "max_tokens": 3, "stream": True}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": SECRET_PROMPT}],
                                  "max_tokens": 3}),
        ("/v1/completions", {"prompt": SECRET_PROMPT, "temperature": 9}),  # a 400
        ("/tokenize", {"prompt": SECRET_PROMPT}),
        ("/v1/messages", {"model": "x", "max_tokens": 3,
                          "messages": [{"role": "user", "content": SECRET_PROMPT}]}),
    ]:
        assert httpx.post(s.url + path, json=body, headers=auth, timeout=60).status_code < 500
    r = httpx.post(s.url + "/v1/completions", json={"prompt": SECRET_PROMPT},
                   headers={"x-api-key": WRONG_KEY})
    assert r.status_code == 401


@pytest.mark.parametrize("server", ["fake", "real"])
def test_keys_and_prompts_are_never_logged(build_dir, server):
    if server == "fake":
        binary, args = fake_server_binary(build_dir), []
    else:  # the real engine's own logging too
        binary, args = real_server_binary(build_dir), ["--model", str(QWEN2), "--threads", "1"]
    s = Server(binary, [*args, "--log-level", "debug"], env={"MEMRA_API_KEYS": SECRET_KEY})
    try:
        send_secret_traffic(s)
    finally:
        assert s.stop() == 0
    log = s.log_path.read_text()
    assert "POST /v1/completions 200" in log  # it did log the requests
    for secret in (SECRET_KEY, WRONG_KEY, SECRET_PROMPT, "quokka"):
        assert secret not in log, f"{secret!r} in the log"


def prefix_cached_tokens(s):
    prompt = "The quick brown fox jumps over the lazy dog, " * 3
    body = {"prompt": prompt, "max_tokens": 2, "temperature": 0}
    cached = []
    for _ in range(2):
        r = httpx.post(s.url + "/v1/completions", json=body, timeout=60)
        assert r.status_code == 200, r.text
        cached.append(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])
    return cached


@pytest.mark.parametrize("flag,env,cache_on", [
    ([], {}, True),
    (["--no-prefix-cache"], {}, False),
    ([], {"MEMRA_NO_PREFIX_CACHE": "1"}, False),
    ([], {"MEMRA_NO_PREFIX_CACHE": "yes"}, False),
    ([], {"MEMRA_NO_PREFIX_CACHE": "off"}, True),
    ([], {"MEMRA_NO_PREFIX_CACHE": "false"}, True),
])
def test_no_prefix_cache_flag_and_environment_booleans(build_dir, flag, env, cache_on):
    s = Server(real_server_binary(build_dir), ["--model", str(QWEN2), "--threads", "1", *flag],
               env=env)
    try:
        first, second = prefix_cached_tokens(s)
        assert first == 0
        assert (second > 0) == cache_on, (flag, env, second)
        model = httpx.get(s.url + "/v1/models").json()["data"][0]["id"]
        hits = s.metrics()[f'memra:prefix_cache_hit_tokens_total{{model_name="{model}"}}']
        assert hits == second
    finally:
        assert s.stop() == 0


def test_environment_boolean_must_be_a_boolean(build_dir):
    r = subprocess.run([str(fake_server_binary(build_dir)), "--port", "0"],
                       env={"MEMRA_NO_PREFIX_CACHE": "maybe"}, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2
    assert "--no-prefix-cache" in r.stderr and "maybe" in r.stderr
