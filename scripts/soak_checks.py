"""The soak's traffic (scripts/soak.py): a weighted mix of request kinds, each sent over a fresh
loopback connection and checked: status, body or SSE stream shape, tool-call arguments and
structured output against their schemas, and the OpenAI error shape of every refusal.
Python standard library plus jsonschema (in the test venv)."""
import http.client
import json
import random
import socket
import threading
import time

import jsonschema

# A request fails when the server goes STALL_TIMEOUT seconds without sending a byte (a stall or a
# lost request), or when it is not finished after REQUEST_TIMEOUT. The soak proves that nothing is
# lost or leaked; latency under a 64-client overload of 2 CPU cores is reported (the "latency_s"
# of each kind), not judged: a preempted 400-token stream waits its turn and recomputes.
STALL_TIMEOUT = 300
REQUEST_TIMEOUT = 1800
MAX_BODY_BYTES = 256 * 1024  # the server's --max-body-bytes in the soak
MAX_FAILURE_SAMPLES = 50

WORDS = ("river garden window market silver engine winter harbor letter mountain the of and to "
         "in is was for on that with as by at from one two three red blue green stone paper "
         "light music cloud forest bridge").split()

TOOL_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "hot"],
               "properties": {"city": {"enum": ["Oslo", "Rome", "Lima"]},
                              "hot": {"type": "boolean"}}}
TOOLS = [{"type": "function", "function": {"name": "wx", "parameters": TOOL_SCHEMA}}]
ANSWER_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["answer", "sure"],
                 "properties": {"answer": {"enum": ["yes", "no"]}, "sure": {"type": "boolean"}}}

# (kind, weight): ~10% disconnects and ~5% malformed, as the issue asks.
MIX = [("chat", 12), ("chat_stream", 14), ("completion", 10), ("completion_stream", 14),
       ("tool", 8), ("tool_stream", 4), ("structured", 8), ("n_chat", 6),
       ("n_completion_stream", 4), ("long", 5), ("disconnect", 10), ("malformed", 5)]


class CheckFailed(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise CheckFailed(what)


class Client:
    """Fresh HTTP/1.1 connection per request to 127.0.0.1:port."""

    def __init__(self, host, port):
        assert host == "127.0.0.1"  # the soak only ever talks to its own local server
        self.host, self.port = host, port

    def _send(self, method, path, body, timeout):
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        headers = {"Connection": "close"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer (413) before reading a body it refuses
        return conn, conn.getresponse()

    def request(self, method, path, body=None, timeout=STALL_TIMEOUT):
        """(status, lower-cased headers, body bytes); `timeout` bounds each socket wait."""
        conn, resp = self._send(method, path, body, timeout)
        try:
            return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
        finally:
            conn.close()

    def stream(self, path, body, stop_after=None, timeout=REQUEST_TIMEOUT):
        """(status, headers, [data payloads] or the error body); closes after stop_after events.
        Each socket wait is bounded by STALL_TIMEOUT, the whole stream by `timeout`."""
        deadline = time.time() + timeout
        conn, resp = self._send("POST", path, body, STALL_TIMEOUT)
        try:
            headers = {k.lower(): v for k, v in resp.getheaders()}
            if resp.status != 200:
                return resp.status, headers, resp.read()
            events = []
            while time.time() < deadline:
                line = resp.readline(1 << 22)
                if not line:
                    return resp.status, headers, events
                line = line.rstrip(b"\r\n")
                if line.startswith(b"data:"):
                    events.append(line[5:].strip())
                    if stop_after and len(events) >= stop_after:
                        return resp.status, headers, events
            raise CheckFailed(f"stream not finished after {timeout} s")
        finally:
            conn.close()

    def send_and_close(self, path, body):
        """Sends a request and hangs up before the answer."""
        data = json.dumps(body).encode()
        with socket.create_connection((self.host, self.port), timeout=30) as s:
            s.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(data)}\r\n\r\n".encode() + data)


def check_error_shape(status, headers, body, want_status, want_code=None):
    expect(status == want_status, f"HTTP {status}, expected {want_status}: {body[:200]!r}")
    try:
        err = json.loads(body)["error"]
    except (ValueError, KeyError, TypeError):
        raise CheckFailed(f"HTTP {status} body is not an OpenAI error: {body[:200]!r}")
    expect(isinstance(err.get("message"), str) and err["message"], "error without a message")
    expect(isinstance(err.get("type"), str), "error without a type")
    expect("param" in err and "code" in err, "error without param/code")
    if want_code:
        expect(err["code"] == want_code, f"error code {err['code']!r}, expected {want_code!r}")


def check_rate_limited(status, headers, body):
    check_error_shape(status, headers, body, 429, "queue_full")
    expect("retry-after" in headers, "429 without Retry-After")


def check_usage(usage, n, max_tokens):
    expect(isinstance(usage, dict), "no usage")
    expect(usage["prompt_tokens"] > 0, "usage.prompt_tokens is 0")
    expect(0 <= usage["completion_tokens"] <= n * max_tokens,
           f"usage.completion_tokens {usage['completion_tokens']} out of 0..{n * max_tokens}")
    expect(usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"],
           "usage.total_tokens is not the sum")


def check_body(body, chat, n, max_tokens, finishes=("stop", "length")):
    j = json.loads(body)
    expect(j["object"] == ("chat.completion" if chat else "text_completion"), "wrong object")
    expect(sorted(c["index"] for c in j["choices"]) == list(range(n)), "choice indexes")
    for c in j["choices"]:
        expect(c["finish_reason"] in finishes, f"finish_reason {c['finish_reason']!r}")
        if chat:
            expect(c["message"]["role"] == "assistant", "message.role")
        else:
            expect(isinstance(c["text"], str), "text is not a string")
    check_usage(j["usage"], n, max_tokens)
    return j


def parse_stream(events, chat, n, max_tokens, finishes=("stop", "length")):
    """Checks an SSE stream and returns {index: (text, finish, tool calls)}."""
    expect(events and events[-1] == b"[DONE]", "the stream does not end with [DONE]")
    chunks = [json.loads(e) for e in events[:-1]]
    expect(chunks, "no chunk before [DONE]")
    expect(len({c["id"] for c in chunks}) == 1, "chunk ids differ")
    for c in chunks:
        expect("error" not in c, f"error event: {c.get('error')}")
        expect(c["object"] == ("chat.completion.chunk" if chat else "text_completion"),
               f"chunk object {c['object']!r}")
    usage = chunks[-1].get("usage")
    expect(chunks[-1]["choices"] == [] and usage, "no final usage chunk")
    check_usage(usage, n, max_tokens)
    out = {}
    for c in chunks[:-1]:
        for ch in c["choices"]:
            text, finish, calls = out.get(ch["index"], ("", None, {}))
            expect(finish is None, f"choice {ch['index']} continues after its finish_reason")
            delta = ch.get("delta", {}) if chat else {"content": ch.get("text")}
            text += delta.get("content") or ""
            for tc in delta.get("tool_calls") or []:
                name, args = calls.get(tc["index"], ("", ""))
                fn = tc.get("function", {})
                calls[tc["index"]] = (name + (fn.get("name") or ""), args + (fn.get("arguments") or ""))
            out[ch["index"]] = (text, ch.get("finish_reason"), calls)
    expect(sorted(out) == list(range(n)), f"choices {sorted(out)}, expected {n}")
    for index, (_, finish, _) in out.items():
        expect(finish in finishes, f"choice {index} finish_reason {finish!r}")
    return out


def check_tool_call(name, arguments):
    expect(name == "wx", f"tool name {name!r}")
    try:
        jsonschema.validate(json.loads(arguments), TOOL_SCHEMA)
    except (ValueError, jsonschema.ValidationError) as e:
        raise CheckFailed(f"tool arguments {arguments!r}: {e}")


def malformed_cases(big):
    """(method, path, body, expected status, expected error code or None)."""
    msgs = [{"role": "user", "content": "hi"}]
    return [
        ("POST", "/v1/chat/completions", b'{"messages": [', 400, None),
        ("POST", "/v1/chat/completions", {"messages": msgs, "temperature": "hot"}, 400, None),
        ("POST", "/v1/chat/completions", {"messages": msgs, "n": 1000}, 400, None),
        ("POST", "/v1/chat/completions", {"messages": msgs, "model": "no-such-model"}, 404,
         "model_not_found"),
        ("POST", "/v1/completions", {"prompt": "hi", "max_tokens": 10 ** 7}, 400,
         "context_length_exceeded"),
        ("POST", "/v1/completions", {"prompt": big, "max_tokens": 4}, 413, None),
        ("POST", "/v1/chat/completions", {"messages": msgs, "functions": []}, 400,
         "unsupported_parameter"),
        ("GET", "/v1/chat/completions", None, 405, None),
        ("POST", "/v1/chat/completions", {"max_tokens": 4}, 400, None),
        ("POST", "/v1/chat/completions", {"messages": []}, 400, None),
        ("POST", "/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]},
         400, None),
        ("POST", "/v1/nowhere", {"prompt": "x"}, 404, None),
    ]


def latency_summary(seconds):
    """p50 / p90 / p99 / max of a list of durations, in seconds."""
    s = sorted(seconds)
    pick = lambda q: round(s[min(len(s) - 1, int(q * len(s)))], 3)
    return {"n": len(s), "p50": pick(0.5), "p90": pick(0.9), "p99": pick(0.99),
            "max": round(s[-1], 3)}


class Traffic:
    """The request kinds of the mix, their counters and the burst over the queue limit."""

    def __init__(self, client, context, burst_size):
        self.client, self.context, self.burst_size = client, context, burst_size
        self.kinds, weights = zip(*MIX)
        self.cum = [sum(weights[:i + 1]) for i in range(len(weights))]
        self.big = "x" * (MAX_BODY_BYTES + 1024)
        self.malformed = malformed_cases(self.big)
        self.lock = threading.Lock()
        self.reset()

    def reset(self):
        with self.lock:
            self.by_kind, self.failures, self.sent = {}, [], 0
            self.latencies = {}  # kind -> seconds of each answered request

    def count(self, kind, key):
        with self.lock:
            c = self.by_kind.setdefault(kind, {"sent": 0, "failed": 0})
            c[key] = c.get(key, 0) + 1

    def summary(self):
        with self.lock:
            failed = sum(c.get("failed", 0) for c in self.by_kind.values())
            return {"sent": self.sent, "failures": failed, "by_kind": self.by_kind,
                    "latency_s": {k: latency_summary(v) for k, v in self.latencies.items()},
                    "failure_samples": list(self.failures)}

    def prompt(self, rng, lo, hi):
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))

    def client_loop(self, rng, stop_at):
        while time.time() < stop_at:
            r = rng.random() * self.cum[-1]
            kind = self.kinds[next(i for i, c in enumerate(self.cum) if r < c)]
            if self.run_one(kind, rng) == 429:
                # As real clients do (Retry-After: 1); without it a full queue turns the clients
                # into a 429 loop and the mix into mostly 429s.
                time.sleep(min(1.0, max(0.0, stop_at - time.time())))

    def run_one(self, kind, rng):
        with self.lock:
            self.sent += 1
        self.count(kind, "sent")
        t0 = time.time()
        try:
            status = getattr(self, "do_" + kind)(rng)
            self.count(kind, str(status))
            if status == 200:
                with self.lock:
                    self.latencies.setdefault(kind, []).append(time.time() - t0)
            return status
        except Exception as e:  # a failed check, a transport error or a timeout
            self.count(kind, "failed")
            with self.lock:
                if len(self.failures) < MAX_FAILURE_SAMPLES:
                    self.failures.append(f"{kind}: {type(e).__name__}: {e}"[:400])
            return None

    # Each do_* sends one request, checks the answer and returns its status.

    def _chat_body(self, rng, max_tokens, **extra):
        msgs = [{"role": "user", "content": self.prompt(rng, 2, 10)}]
        return dict(messages=msgs, max_tokens=max_tokens, temperature=rng.choice([0, 0.8]),
                    seed=rng.randrange(1 << 30), **extra)

    def _plain(self, rng, chat, n=1, stream=False):
        max_tokens = rng.randint(2, 24)
        if chat:
            body = self._chat_body(rng, max_tokens, n=n)
        else:
            body = dict(prompt=self.prompt(rng, 2, 12), max_tokens=max_tokens, n=n,
                        temperature=rng.choice([0, 0.8]), seed=rng.randrange(1 << 30))
        path = "/v1/chat/completions" if chat else "/v1/completions"
        if not stream:
            status, headers, data = self.client.request("POST", path, body)
            if status == 429:
                check_rate_limited(status, headers, data)
            else:
                expect(status == 200, f"HTTP {status}: {data[:200]!r}")
                check_body(data, chat, n, max_tokens)
            return status
        body.update(stream=True, stream_options={"include_usage": True})
        status, headers, events = self.client.stream(path, body)
        if status == 429:
            check_rate_limited(status, headers, events)
        else:
            expect(status == 200, f"HTTP {status}: {events[:200]!r}")
            parse_stream(events, chat, n, max_tokens)
        return status

    def do_chat(self, rng):
        return self._plain(rng, True)

    def do_chat_stream(self, rng):
        return self._plain(rng, True, stream=True)

    def do_completion(self, rng):
        return self._plain(rng, False)

    def do_completion_stream(self, rng):
        return self._plain(rng, False, stream=True)

    def do_n_chat(self, rng):
        return self._plain(rng, True, n=rng.randint(2, 4))

    def do_n_completion_stream(self, rng):
        return self._plain(rng, False, n=rng.randint(2, 3), stream=True)

    def do_tool(self, rng, stream=False):
        # Llama 3 JSON calls of this schema are under 80 bytes, so 110 tokens always finish.
        body = self._chat_body(rng, 110, tools=TOOLS, parallel_tool_calls=False,
                               tool_choice={"type": "function", "function": {"name": "wx"}})
        if not stream:
            status, headers, data = self.client.request("POST", "/v1/chat/completions", body)
            if status == 429:
                check_rate_limited(status, headers, data)
                return status
            expect(status == 200, f"HTTP {status}: {data[:200]!r}")
            choice = check_body(data, True, 1, 110, finishes=("tool_calls",))["choices"][0]
            calls = choice["message"]["tool_calls"]
            expect(len(calls) == 1, f"{len(calls)} tool calls")
            check_tool_call(calls[0]["function"]["name"], calls[0]["function"]["arguments"])
            return status
        body.update(stream=True, stream_options={"include_usage": True})
        status, headers, events = self.client.stream("/v1/chat/completions", body)
        if status == 429:
            check_rate_limited(status, headers, events)
            return status
        expect(status == 200, f"HTTP {status}: {events[:200]!r}")
        _, _, calls = parse_stream(events, True, 1, 110, finishes=("tool_calls",))[0]
        expect(len(calls) == 1, f"{len(calls)} streamed tool calls")
        check_tool_call(*calls[0])
        return status

    def do_tool_stream(self, rng):
        return self.do_tool(rng, stream=True)

    def do_structured(self, rng):
        fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER_SCHEMA}}
        body = self._chat_body(rng, 80, response_format=fmt)
        status, headers, data = self.client.request("POST", "/v1/chat/completions", body)
        if status == 429:
            check_rate_limited(status, headers, data)
            return status
        expect(status == 200, f"HTTP {status}: {data[:200]!r}")
        content = check_body(data, True, 1, 80, finishes=("stop",))["choices"][0]["message"]
        try:
            jsonschema.validate(json.loads(content["content"]), ANSWER_SCHEMA)
        except (ValueError, TypeError, jsonschema.ValidationError) as e:
            raise CheckFailed(f"structured output {content['content']!r}: {e}")
        return status

    def _long_body(self, rng):
        # Prompt and output each about 40% of the context: few of these fill the KV cache, so
        # the engine preempts. Words average over 4 bytes, so the prompt is under 0.4 * context
        # tokens with any tokenizer.
        n_words = max(4, int(self.context * 0.4 / 5))
        max_tokens = max(8, int(self.context * 0.4))
        return max_tokens, dict(prompt=self.prompt(rng, n_words, n_words), max_tokens=max_tokens,
                                ignore_eos=True, temperature=0.8, stream=True,
                                stream_options={"include_usage": True})

    def do_long(self, rng):
        max_tokens, body = self._long_body(rng)
        status, headers, events = self.client.stream("/v1/completions", body)
        if status == 429:
            check_rate_limited(status, headers, events)
            return status
        expect(status == 200, f"HTTP {status}: {events[:200]!r}")
        parse_stream(events, False, 1, max_tokens, finishes=("length",))
        usage = json.loads(events[-2])["usage"]
        expect(usage["completion_tokens"] == max_tokens,
               f"ignore_eos: {usage['completion_tokens']} of {max_tokens} tokens")
        return status

    def do_disconnect(self, rng):
        _, body = self._long_body(rng)
        path = rng.choice(["/v1/completions", "/v1/chat/completions"])
        if path.endswith("chat/completions"):
            body = dict(self._chat_body(rng, body["max_tokens"], stream=True), ignore_eos=True)
        if rng.random() < 0.3:  # gone before the first byte of the answer
            self.client.send_and_close(path, body)
            return "hangup"
        status, headers, events = self.client.stream(path, body, stop_after=rng.randint(1, 4))
        if status == 429:
            check_rate_limited(status, headers, events)
        else:
            expect(status == 200, f"HTTP {status}: {events[:200]!r}")
        return status

    def do_malformed(self, rng):
        method, path, body, want, code = rng.choice(self.malformed)
        status, headers, data = self.client.request(method, path, body)
        check_error_shape(status, headers, data, want, code)
        return status

    def burst(self):
        """burst_size streamed requests at once: more than the engine runs plus its queue."""
        rng = random.Random(len(self.by_kind) + self.sent)
        seeds = [rng.randrange(1 << 30) for _ in range(self.burst_size)]
        threads = [threading.Thread(target=self.run_one, args=("burst", random.Random(s)),
                                    daemon=True) for s in seeds]
        for t in threads:
            t.start()
        for t in threads:
            t.join(REQUEST_TIMEOUT + 30)

    def do_burst(self, rng):
        # Short outputs: all of them arrive at once, so the queue overflows whatever their length,
        # and a slow model (Gemma on 2 CPU cores) still drains the burst within the timeout.
        max_tokens = max(8, self.context // 16)
        body = dict(prompt=self.prompt(rng, 4, 8), max_tokens=max_tokens, ignore_eos=True,
                    stream=True, stream_options={"include_usage": True})
        status, headers, events = self.client.stream("/v1/completions", body)
        if status == 429:
            check_rate_limited(status, headers, events)
        else:
            expect(status == 200, f"HTTP {status}: {events[:200]!r}")
            parse_stream(events, False, 1, max_tokens, finishes=("length",))
        return status
