#!/usr/bin/env python3
"""Captures the seed corpus of fuzz/http_fuzz.cpp: the exact bytes real clients (the openai and
anthropic SDKs, httpx, curl) send for typical requests, recorded by a loopback listener that
answers each with a minimal response. Writes fuzz/corpus/http/<name>.http.
Usage: .venv/bin/python fuzz/capture_http_seeds.py"""
import json
import pathlib
import socket
import subprocess
import threading

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "http"


def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        if name.strip().lower() == b"expect" and b"100-continue" in value.lower():
            conn.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
    while len(body) < length:
        body += conn.recv(65536)
    return head + b"\r\n\r\n" + body


def serve(listener, captured):
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            req = read_request(conn)
            captured.append(req)
            body = b'{"error":{"message":"capture only","type":"server_error"}}'
            conn.sendall(b"HTTP/1.1 500 Internal Server Error\r\nContent-Type: application/json\r\n"
                         b"Connection: close\r\nContent-Length: %d\r\n\r\n" % len(body) + body)


def main():
    import anthropic
    import httpx
    import openai

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    captured = []
    threading.Thread(target=serve, args=(listener, captured), daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    oa = openai.OpenAI(base_url=url + "/v1", api_key="sk-seed", max_retries=0)
    an = anthropic.Anthropic(base_url=url, api_key="sk-ant-seed", max_retries=0)
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
    calls = {
        "openai_chat": lambda: oa.chat.completions.create(
            model="m", messages=[{"role": "system", "content": "Be brief."},
                                 {"role": "user", "content": "Hello, world"}], max_tokens=16),
        "openai_chat_stream_tools": lambda: oa.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools,
            stream=True, stream_options={"include_usage": True}),
        "openai_chat_json_schema": lambda: oa.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "A person"}], n=2, seed=7,
            response_format={"type": "json_schema", "json_schema": {"name": "p", "schema": {
                "type": "object", "properties": {"name": {"type": "string"}}}}}),
        "openai_completions": lambda: oa.completions.create(
            model="m", prompt="Once upon a time", max_tokens=8, logprobs=2, stop=["\n"]),
        "openai_models": lambda: oa.models.list(),
        "openai_responses": lambda: oa.responses.create(model="m", input="Hi", stream=True),
        "anthropic_messages_stream": lambda: an.messages.create(
            model="m", max_tokens=32, system="s", stream=True,
            messages=[{"role": "user", "content": [{"type": "text", "text": "Hi \u00e9\u4e16"}]}]),
        "httpx_health": lambda: httpx.get(url + "/health"),
        "httpx_metrics": lambda: httpx.get(url + "/metrics?x=1", headers={"Accept": "text/plain"}),
    }
    for name, call in calls.items():
        before = len(captured)
        try:
            call()
        except Exception:  # the listener answers 500 on purpose
            pass
        for i, req in enumerate(captured[before:]):
            (OUT / f"{name}{'' if i == 0 else i}.http").write_bytes(req)
    # curl: HTTP/1.1 with Expect: 100-continue on a body over 1 KiB.
    big = json.dumps({"model": "m", "prompt": "x" * 1500, "max_tokens": 1})
    before = len(captured)
    subprocess.run(["curl", "-s", "-o", "/dev/null", url + "/v1/completions", "-H",
                    "Content-Type: application/json", "-H", "Authorization: Bearer sk-seed",
                    "-d", big], check=False, timeout=30)
    for req in captured[before:]:
        (OUT / "curl_completions_expect.http").write_bytes(req)
    # Keep-alive pipelining: two real requests back to back on one connection.
    if captured:
        (OUT / "pipelined.http").write_bytes(
            (OUT / "httpx_health.http").read_bytes() + (OUT / "openai_chat.http").read_bytes())
    listener.close()


if __name__ == "__main__":
    OUT.mkdir(parents=True, exist_ok=True)
    main()
    print("\n".join(sorted(p.name for p in OUT.iterdir())))
