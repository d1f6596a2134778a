"""The soak's response checks (scripts/soak_checks.py) have teeth: each accepts a well-formed
answer and refuses the same answer broken in one way (no server needed); soak.py finds the server
below a --wrapper."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import soak_checks as sc  # noqa: E402


def chunk(choices, usage=None, cid="c1", obj="chat.completion.chunk"):
    return json.dumps({"id": cid, "object": obj, "choices": choices, "usage": usage}).encode()


USAGE = {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}


def good_stream():
    return [chunk([{"index": 0, "delta": {"role": "assistant", "content": ""},
                    "finish_reason": None}]),
            chunk([{"index": 0, "delta": {"content": "hi"}, "finish_reason": None}]),
            chunk([{"index": 0, "delta": {}, "finish_reason": "length"}]),
            chunk([], USAGE), b"[DONE]"]


def test_stream_check_accepts_a_good_stream():
    out = sc.parse_stream(good_stream(), True, 1, 2)
    assert out[0][0] == "hi" and out[0][1] == "length"


@pytest.mark.parametrize("breakage", ["no_done", "two_ids", "no_usage", "no_finish", "error",
                                      "after_finish", "bad_usage", "wrong_object"])
def test_stream_check_refuses_a_broken_stream(breakage):
    ev = good_stream()
    if breakage == "no_done":
        ev = ev[:-1]
    elif breakage == "two_ids":
        ev[1] = chunk([{"index": 0, "delta": {"content": "x"}, "finish_reason": None}], cid="c2")
    elif breakage == "no_usage":
        del ev[3]
    elif breakage == "no_finish":
        ev[2] = chunk([{"index": 0, "delta": {}, "finish_reason": None}])
    elif breakage == "error":
        ev.insert(2, json.dumps({"id": "c1", "object": "chat.completion.chunk",
                                 "error": {"message": "boom"}}).encode())
    elif breakage == "after_finish":
        ev.insert(3, chunk([{"index": 0, "delta": {"content": "late"}, "finish_reason": None}]))
    elif breakage == "bad_usage":
        ev[3] = chunk([], dict(USAGE, total_tokens=8))
    elif breakage == "wrong_object":
        ev[1] = chunk([{"index": 0, "delta": {"content": "x"}, "finish_reason": None}],
                      obj="text_completion")
    with pytest.raises((sc.CheckFailed, KeyError, ValueError)):
        sc.parse_stream(ev, True, 1, 2)


def test_tool_call_arguments_are_validated():
    sc.check_tool_call("wx", '{"city": "Oslo", "hot": true}')
    for name, args in [("wy", '{"city": "Oslo", "hot": true}'), ("wx", '{"city": "Oslo"}'),
                       ("wx", '{"city": "Paris", "hot": true}'), ("wx", '{"city": "Oslo", '),
                       ("wx", '{"city": "Oslo", "hot": true, "x": 1}')]:
        with pytest.raises(sc.CheckFailed):
            sc.check_tool_call(name, args)


def test_error_shape():
    body = json.dumps({"error": {"message": "bad", "type": "invalid_request_error",
                                 "param": None, "code": "invalid_value"}}).encode()
    sc.check_error_shape(400, {}, body, 400)
    sc.check_error_shape(400, {}, body, 400, "invalid_value")
    for status, data, code in [(500, body, None), (400, b"oops", None),
                               (400, json.dumps({"error": {"message": "bad"}}).encode(), None),
                               (400, body, "context_length_exceeded")]:
        with pytest.raises(sc.CheckFailed):
            sc.check_error_shape(status, {}, data, 400, code)
    limited = json.dumps({"error": {"message": "full", "type": "rate_limit_error",
                                    "param": None, "code": "queue_full"}}).encode()
    sc.check_rate_limited(429, {"retry-after": "1"}, limited)
    with pytest.raises(sc.CheckFailed):
        sc.check_rate_limited(429, {}, limited)


def test_body_check():
    body = {"object": "chat.completion", "usage": USAGE,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hi"}}]}
    sc.check_body(json.dumps(body), True, 1, 2)
    with pytest.raises(sc.CheckFailed):
        sc.check_body(json.dumps(body), True, 2, 2)  # n=2 but one choice
    with pytest.raises(sc.CheckFailed):
        sc.check_body(json.dumps(body), True, 1, 1)  # more tokens than max_tokens
    with pytest.raises(sc.CheckFailed):
        sc.check_body(json.dumps(body), True, 1, 2, finishes=("tool_calls",))



def test_wrapper_server_is_found_below_the_wrapper():
    """soak.py --wrapper samples and signals the server process, not the wrapper above it."""
    import soak
    sleep = pathlib.Path(shutil.which("sleep")).resolve()
    wrapper = subprocess.Popen(["sh", "-c", f"{sleep} 30; true"])  # forks: `true` comes after
    pid = None
    try:
        deadline = time.time() + 10
        while True:
            try:
                pid = soak.server_below(wrapper.pid, sleep)
                break
            except SystemExit:
                assert time.time() < deadline, "sh never started sleep"
                time.sleep(0.05)
        assert pid != wrapper.pid
        assert pathlib.Path(f"/proc/{pid}/exe").resolve() == sleep
        with pytest.raises(SystemExit):
            soak.server_below(wrapper.pid, pathlib.Path("/nonexistent/memra-server"))
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
        wrapper.kill()
        wrapper.wait()
