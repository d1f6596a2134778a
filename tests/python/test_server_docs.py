"""The curl and Python examples in docs/SERVING.md run as written against the real server."""
import json
import pathlib
import re
import subprocess
import sys

import pytest

from server_harness import REAL_ARGS, Server, real_server_binary

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "SERVING.md"


def examples():
    text = DOC.read_text()
    text = text[text.index("## Examples"):]
    return re.findall(r"```(bash|python)\n(.*?)```", text, re.S)


@pytest.fixture(scope="module")
def server(build_dir):
    s = Server(real_server_binary(build_dir), REAL_ARGS)
    yield s
    assert s.stop() == 0


def test_doc_has_examples():
    kinds = [k for k, _ in examples()]
    assert kinds.count("bash") >= 3 and kinds.count("python") >= 2


def run_example(server, index):
    kind, code = examples()[index]
    code = code.replace("http://127.0.0.1:8080", server.url)
    cmd = ["bash", "-euo", "pipefail", "-c", code] if kind == "bash" else [sys.executable, "-c", code]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr + server.log_text()
    return r.stdout


# Example 3's assertions need the real model's answer (a tool call that ends within its tokens).
@pytest.mark.parametrize("index", [0, 1, 2, pytest.param(3, marks=pytest.mark.real_weights)])
def test_doc_example_runs(server, index):
    expected = {0: '"chat.completion"', 1: "data: [DONE]", 2: "memra:num_requests_running", 3: "Paris"}[index]
    out = run_example(server, index)
    assert expected in out, out


@pytest.mark.real_weights
def test_doc_tool_example_runs_with_the_template_it_names(build_dir, test_data):
    kind, code = examples()[4]
    template = re.match(r"# memra-server --chat-template (\S+)", code).group(1)
    s = Server(real_server_binary(build_dir),
               REAL_ARGS + ["--chat-template", str(test_data / "chat-templates" / template)])
    try:
        name, arguments = run_example(s, 4).strip().split(" ", 1)
        assert name == "get_weather" and isinstance(json.loads(arguments)["city"], str)
    finally:
        assert s.stop() == 0


def test_doc_anthropic_example_runs(server):
    out = run_example(server, 5).strip()
    assert re.fullmatch(r"(end_turn|max_tokens) .* \d+", out, re.S), out


def test_doc_responses_example_runs(server):
    out = run_example(server, 6).strip().splitlines()
    assert out[0].split(" ", 1)[0] in ("completed", "incomplete") and out[-1] == "True", out
