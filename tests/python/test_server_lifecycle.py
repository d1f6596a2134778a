"""memra-server lifecycle with the real model: 503 while loading, SIGTERM stops accepting, lets an in-flight stream
finish, exits 0; a second signal cuts the drain short. Plus a tool call the model chooses to make
(tool_choice auto) and queue full (429), which need a model that calls tools unprompted / an engine
slowed down on purpose, so they run on memra-fake-server (the same server over a scripted test
engine). Forced tool calls on the real model: test_server_tools.py."""
import json
import signal
import socket
import threading
import time

import httpx
import openai
import pytest

from server_harness import REAL_ARGS, Server, fake_server_binary, real_server_binary


def test_503_while_loading_then_sigterm_drains_in_flight_and_exits_0(build_dir):
    s = Server(real_server_binary(build_dir), REAL_ARGS, wait_ready=False)
    assert s.first_status == 503
    r = httpx.post(s.url + "/v1/completions", json={"prompt": "x"})
    if r.status_code == 503:  # still loading (the usual case on a CPU)
        assert r.json()["error"]["code"] == "model_loading" and r.headers["retry-after"] == "1"
    s.wait_ready(180)
    assert httpx.get(s.url + "/readyz").status_code == 200
    body = {"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0, "stream": True}
    lines = []
    with httpx.stream("POST", s.url + "/v1/completions", json=body, timeout=120) as r:
        it = r.iter_lines()
        lines.append(next(it))
        s.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        with pytest.raises(httpx.TransportError):  # no longer accepting
            httpx.get(s.url + "/health", timeout=2)
        lines.extend(it)
    assert "data: [DONE]" in lines
    assert '"finish_reason":"length"' in "".join(lines)
    s.proc.wait(60)
    assert s.stop() == 0, s.log_text()


def test_second_signal_cancels_the_drain(build_dir):
    s = Server(fake_server_binary(build_dir), ["--shutdown-timeout", "600"],
               env={"MEMRA_FAKE_STEP_MS": "50"})
    # ignore_eos: the scripted reply is short, without it the stream would end by itself
    body = {"prompt": "x", "max_tokens": 200, "ignore_eos": True, "stream": True}
    done = threading.Event()
    lines = []

    def reader():
        try:
            with httpx.stream("POST", s.url + "/v1/completions", json=body, timeout=60) as r:
                for line in r.iter_lines():
                    lines.append(line)
        except httpx.HTTPError:
            pass
        done.set()

    t = threading.Thread(target=reader)
    t.start()
    deadline = time.time() + 30
    while s.metrics().get('memra:num_requests_running{model_name="fake-model"}') != 1:
        assert time.time() < deadline, s.log_text()
        time.sleep(0.05)
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert s.proc.poll() is None  # draining: 200 tokens at 50 ms take 10 s
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(3)  # at once, not after the 10 s the stream still had to run
    t.join(3)
    assert done.is_set() and s.stop() == 0
    # cut short: tokens came, but no finish_reason and no [DONE]
    assert any(line.startswith("data: {") for line in lines)
    assert "data: [DONE]" not in lines and '"finish_reason":"length"' not in "".join(lines)


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]


@pytest.fixture(scope="module")
def fake(build_dir):
    s = Server(fake_server_binary(build_dir), ["--max-sequences", "1", "--max-queued", "1", "--ctx-size", "2048"],
               env={"MEMRA_FAKE_STEP_MS": "5"})
    yield s
    assert s.stop() == 0


def test_tool_call_round_trip(fake):
    client = openai.OpenAI(base_url=fake.url + "/v1", api_key="none", max_retries=0)
    messages = [{"role": "user", "content": "TOOL: what is the weather in Paris?"}]
    r = client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls"
    call = choice.message.tool_calls[0]
    assert call.function.name == "get_weather" and call.function.arguments == '{"city":"Paris"}'
    # streamed: deltas with an index, id and name first, arguments that concatenate to JSON
    chunks = list(client.chat.completions.create(model="fake-model", messages=messages,
                                                 tools=TOOLS, stream=True))
    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    assert deltas[0].index == 0 and deltas[0].id and deltas[0].function.name == "get_weather"
    assert "".join(d.function.arguments or "" for d in deltas) == '{"city":"Paris"}'
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    # send the result back
    messages += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "sunny, 21 C"}]
    final = client.chat.completions.create(model="fake-model", messages=messages, tools=TOOLS)
    assert final.choices[0].message.content == "The tool said: sunny, 21 C"


def test_queue_full_is_429_with_retry_after(fake):
    body = {"prompt": "x", "max_tokens": 100}
    with httpx.Client(timeout=30) as c:
        results = []
        threads = [threading.Thread(target=lambda: results.append(
            c.post(fake.url + "/v1/completions", json=body))) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    statuses = sorted(r.status_code for r in results)
    assert 429 in statuses and 200 in statuses, statuses
    refused = next(r for r in results if r.status_code == 429)
    assert refused.headers["retry-after"] == "1"
    assert refused.json()["error"]["type"] == "rate_limit_error"


def test_expired_drain_keeps_engines_until_every_handler_is_done(build_dir):
    """--shutdown-timeout expires while a handler is blocked writing to a client that reads
    nothing (for up to --write-timeout). The engines must outlive that handler: before the fix they
    were freed after 5 s while it still held them, and its cancel ran on a freed engine."""
    s = Server(fake_server_binary(build_dir),
               ["--shutdown-timeout", "0", "--write-timeout", "60", "--ctx-size", "70000"],
               env={"MEMRA_FAKE_STEP_MS": "0"})
    body = json.dumps({"prompt": "x", "max_tokens": 60000, "ignore_eos": True, "logprobs": 20,
                       "stream": True}).encode()
    c = socket.socket()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a client that reads nothing
    c.connect(("127.0.0.1", s.port))
    c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % len(body) + body)
    try:
        # The engine generates all 60,000 tokens (~70 MB of chunks) while the handler writes
        # until the socket is full; then it sits in a write.
        deadline = time.time() + 60
        while s.metrics().get('memra:generation_tokens_total{model_name="fake-model"}', 0) < 60000:
            assert time.time() < deadline, s.log_text()
            time.sleep(0.1)
        time.sleep(3)
        assert s.metrics()["memra:http_requests_in_flight"] == 2  # the stream and this request
        start = time.time()
        s.proc.send_signal(signal.SIGTERM)
        rc = s.proc.wait(30)
        elapsed = time.time() - start
    finally:
        c.close()
    log = s.log_text()
    assert rc == 0, log
    assert "cancelling 1 request(s) still running" in log, log
    request_line = log.index("POST /v1/completions 200")
    assert request_line < log.index("fake engine: stopped"), log
    assert elapsed < 15, (elapsed, log)  # the blocked write is cut short, not waited out
