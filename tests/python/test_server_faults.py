"""Faults stay contained (issue 13): an engine step that throws fails only that step's requests,
with a 500-class error in the API's shape, and the engine serves on; a model that fails to load
ends the process non-zero with the reason; slow clients (slowloris, a reader that never reads)
are cut by the timeouts while other clients are served. The step fault runs the real engine on
the tiny fixture model (MEMRA_ENGINE_FAULT injects it); the transport tests use
memra-fake-server."""
import json
import os
import pathlib
import socket
import subprocess
import threading
import time

import httpx
import pytest

from server_harness import Server, fake_server_binary, real_server_binary

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "models" / "qwen3"
FIXTURE_ARGS = ["--model", str(FIXTURE), "--kv-blocks", "64", "--log-level", "warn"]


def completion(server, stream=False, max_tokens=4, timeout=60):
    body = {"prompt": "hello", "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": stream}
    return httpx.post(server.url + "/v1/completions", json=body, timeout=timeout)


def sse_events(text):
    return [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]


def test_step_fault_fails_that_request_with_500_and_the_engine_serves_on(build_dir):
    # Step 1 is the first request's prefill: it throws.
    s = Server(real_server_binary(build_dir), FIXTURE_ARGS, env={"MEMRA_ENGINE_FAULT": "step:1"})
    try:
        r = completion(s)
        assert r.status_code == 500, r.text
        err = r.json()["error"]
        assert err["type"] == "server_error" and err["code"] == "generation_error"
        assert "injected step fault" in err["message"]
        # The engine serves on: the next requests (plain and streamed) complete, readiness holds.
        ok = completion(s)
        assert ok.status_code == 200 and ok.json()["usage"]["completion_tokens"] == 4
        streamed = completion(s, stream=True)
        events = sse_events(streamed.text)
        assert streamed.status_code == 200 and events[-1] == "[DONE]"
        assert all("error" not in json.loads(e) for e in events[:-1])
        assert httpx.get(s.url + "/readyz", timeout=10).status_code == 200
        m = s.metrics()
        assert m['memra:request_success_total{finished_reason="error"}'] == 1
        used = [v for k, v in m.items() if k.startswith("memra:kv_cache_blocks_used")]
        assert used == [0], m
    finally:
        assert s.stop() == 0


def test_step_fault_mid_stream_ends_that_stream_with_an_error_event(build_dir):
    # Step 1 (the prefill) streams the first token; step 2 throws.
    s = Server(real_server_binary(build_dir), FIXTURE_ARGS, env={"MEMRA_ENGINE_FAULT": "step:2"})
    try:
        r = completion(s, stream=True, max_tokens=8)
        assert r.status_code == 200  # the head went out with the first token
        events = sse_events(r.text)
        first = json.loads(events[0])
        assert first["choices"][0]["text"] is not None
        errors = [json.loads(e)["error"] for e in events if e != "[DONE]" and "error" in e]
        assert len(errors) == 1, events
        assert errors[0]["type"] == "server_error" and "injected step fault" in errors[0]["message"]
        ok = completion(s, stream=True, max_tokens=8)
        assert ok.status_code == 200 and sse_events(ok.text)[-1] == "[DONE]"
        assert all("error" not in json.loads(e) for e in sse_events(ok.text)[:-1])
        assert httpx.get(s.url + "/readyz", timeout=10).status_code == 200
    finally:
        assert s.stop() == 0


def test_bad_fault_spec_is_refused_by_name(build_dir, tmp_path):
    p = subprocess.run([str(real_server_binary(build_dir)), "--port", "0", *FIXTURE_ARGS],
                       env=dict(os.environ, MEMRA_ENGINE_FAULT="sometimes"), capture_output=True, text=True,
                       timeout=120)
    assert p.returncode != 0 and "MEMRA_ENGINE_FAULT=sometimes" in p.stderr + p.stdout


@pytest.mark.parametrize("model,reason", [
    ("/nonexistent/model.gguf", "/nonexistent/model.gguf"),
    ("{bad}", "config.json"),
])
def test_a_model_that_fails_to_load_exits_non_zero_with_the_reason(build_dir, tmp_path, model,
                                                                   reason):
    if model == "{bad}":
        # A folder that looks like a checkpoint but whose config is not JSON.
        bad = tmp_path / "bad-model"
        bad.mkdir()
        (bad / "config.json").write_text("{not json")
        (bad / "model.safetensors").write_bytes(b"\0" * 16)
        model = str(bad)
    p = subprocess.run([str(real_server_binary(build_dir)), "--port", "0", "--model", model],
                       capture_output=True, text=True, timeout=120)
    out = p.stderr + p.stdout
    assert p.returncode != 0, out
    assert reason in out, out


def read_status(sock, timeout):
    """The status of the response on `sock` (or None if it closed without one), within timeout."""
    sock.settimeout(timeout)
    data = b""
    try:
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                return None
            data += chunk
    except (socket.timeout, ConnectionResetError):
        return None
    return int(data.split(b" ")[1])


def test_slowloris_is_cut_by_the_read_timeout_while_others_are_served(build_dir):
    s = Server(fake_server_binary(build_dir), ["--read-timeout", "2"])
    outcomes = {}

    def trickle(i):
        # Sends the head one byte at a time, never finishing it, until the server answers.
        c = socket.create_connection(("127.0.0.1", s.port), timeout=10)
        head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 1000
        start = time.time()
        for b in head:
            try:
                c.sendall(bytes([b]))
            except OSError:
                break
            c.settimeout(0.1)  # paces the trickle; also sees the server's answer as it comes
            try:
                got = c.recv(4096)
            except socket.timeout:
                continue
            outcomes[i] = (int(got.split(b" ")[1]) if got else None, time.time() - start)
            break
            # (a closed socket ends the loop through the recv returning b"")
        c.close()

    slow = [threading.Thread(target=trickle, args=(i,)) for i in range(6)]
    for t in slow:
        t.start()
    try:
        # Other clients are served at once while the slow ones hold their connections.
        for _ in range(5):
            start = time.time()
            r = completion(s, timeout=10)
            assert r.status_code == 200 and time.time() - start < 5
        for t in slow:
            t.join(60)
            assert not t.is_alive()
        assert sorted(outcomes) == list(range(6)), outcomes
        for status, elapsed in outcomes.values():
            assert status == 408 and elapsed < 15, outcomes
    finally:
        assert s.stop() == 0


def test_a_reader_that_never_reads_is_cut_while_others_are_served(build_dir):
    s = Server(fake_server_binary(build_dir), ["--write-timeout", "5", "--ctx-size", "70000"],
               env={"MEMRA_FAKE_STEP_MS": "0"})
    try:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(("127.0.0.1", s.port))
        body = json.dumps({"prompt": "x", "max_tokens": 60000, "ignore_eos": True, "logprobs": 20,
                           "stream": True}).encode()
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        cancelled = 'memra:request_success_total{finished_reason="cancelled"}'
        # While that handler is blocked writing to it, others get full answers, streamed too.
        for stream in (False, True, False):
            r = completion(s, stream=stream, timeout=10)
            assert r.status_code == 200
            if stream:
                assert sse_events(r.text)[-1] == "[DONE]"
        deadline = time.time() + 60
        while s.metrics().get(cancelled, 0) != 1:  # then it is dropped, counted as cancelled
            assert time.time() < deadline, s.log_text()
            time.sleep(0.2)
        c.close()
    finally:
        assert s.stop() == 0


def test_a_large_answer_to_a_reader_that_never_reads_is_cut_by_the_write_timeout(build_dir):
    # One non-streamed body of megabytes: the write timeout must hold inside a single write
    # too (a blocking send of the whole body would wait for the reader forever).
    s = Server(fake_server_binary(build_dir), ["--write-timeout", "1", "--ctx-size", "70000"],
               env={"MEMRA_FAKE_STEP_MS": "0"})
    try:
        c = socket.socket()
        c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        c.connect(("127.0.0.1", s.port))
        body = json.dumps({"prompt": "x", "max_tokens": 20000, "ignore_eos": True,
                           "logprobs": 20}).encode()
        c.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % len(body) + body)
        finished = 'memra:request_success_total{finished_reason="length"}'
        deadline = time.time() + 60
        while s.metrics().get(finished, 0) != 1:  # the generation itself completes
            assert time.time() < deadline, s.log_text()
            time.sleep(0.2)
        # Then the handler gives up on the body within the write timeout: only the metrics
        # request itself stays in flight.
        while s.metrics()["memra:http_requests_in_flight"] != 1:
            assert time.time() < deadline, s.log_text()
            time.sleep(0.2)
        assert completion(s, timeout=10).status_code == 200
        c.close()
    finally:
        assert s.stop() == 0


def test_with_several_models_a_failed_one_is_reported_and_the_others_serve(build_dir, tmp_path):
    missing = tmp_path / "missing.gguf"
    s = Server(real_server_binary(build_dir),
               ["--models", f"good={FIXTURE},broken={missing}", "--kv-blocks", "64"])
    try:
        ready = httpx.get(s.url + "/readyz", timeout=10)
        assert ready.status_code == 200
        failed = ready.json()["failed_models"]
        assert [f["id"] for f in failed] == ["broken"] and str(missing) in failed[0]["error"]
        models = {m["id"]: m for m in httpx.get(s.url + "/v1/models", timeout=10).json()["data"]}
        assert models["good"]["status"] == "ready"
        assert models["broken"]["status"] == "failed" and str(missing) in models["broken"]["error"]
        ok = httpx.post(s.url + "/v1/completions", timeout=60,
                        json={"model": "good", "prompt": "hello", "max_tokens": 3})
        assert ok.status_code == 200 and ok.json()["model"] == "good"
        refused = httpx.post(s.url + "/v1/completions", timeout=60,
                             json={"model": "broken", "prompt": "hello", "max_tokens": 3})
        assert refused.status_code == 404
        assert "failed to load" in refused.json()["error"]["message"]
        assert "failed to load, serving the others" in s.log_text()
    finally:
        assert s.stop() == 0


def test_with_several_models_none_loading_exits_non_zero_naming_each(build_dir, tmp_path):
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    p = subprocess.run([str(real_server_binary(build_dir)), "--port", "0",
                        "--models", f"one={a},two={b}"], capture_output=True, text=True,
                       timeout=120)
    out = p.stderr + p.stdout
    assert p.returncode != 0, out
    assert "none of the 2 models could be loaded" in out and str(a) in out and str(b) in out
