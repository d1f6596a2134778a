"""`memra bench-serve` against the CPU memra-server on the tiny fixture model (fast): counts,
token totals, latency percentiles, the prefix-cache hit rate from /metrics, multi-turn sessions
at a Poisson rate, a JSONL dataset, and errors sorted by kind (HTTP status, transport, timeout)."""
import json
import pathlib
import socket
import subprocess

import pytest

from server_harness import API_KEY, Server, free_port, real_server_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "models" / "qwen3"
TEMPLATE = ROOT / "scripts" / "soak_chat_template.jinja"


@pytest.fixture(scope="module")
def server(build_dir):
    s = Server(real_server_binary(build_dir),
               ["--model", str(FIXTURE), "--chat-template", str(TEMPLATE), "--threads", "2",
                "--log-level", "warn"], env={"MEMRA_API_KEYS": API_KEY})
    yield s
    s.stop()


def bench(memra_bin, tmp_path, *args, key=API_KEY, check=True):
    receipt = tmp_path / "bench-serve.json"
    receipt.unlink(missing_ok=True)
    cmd = [str(memra_bin), "bench-serve", *args, "--json", str(receipt)]
    if key:
        cmd += ["--api-key", key]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if check:
        assert r.returncode == 0, r.stdout + r.stderr
    return r, (json.loads(receipt.read_text()) if receipt.exists() else None)


def assert_latencies(j, n):
    for figure in ("ttft_ms", "e2e_ms"):
        assert j[figure]["n"] == n
        p = j[figure]
        assert 0 < p["p50"] <= p["p90"] <= p["p99"] <= p["max"]
    assert j["itl_ms"]["n"] > 0


def test_completions_fixed_concurrency_shared_prefix(server, memra_bin, tmp_path):
    r, j = bench(memra_bin, tmp_path, "--url", server.url, "--requests", "12", "--concurrency",
                 "4", "--prompt-tokens", "uniform:8-16", "--output-tokens", "4",
                 "--shared-prefix", "48")
    assert "TTFT" in r.stdout and "requests/s" in r.stdout
    assert "\r" not in r.stderr  # no progress line off a terminal
    assert j["what"] == "bench-serve" and j["mode"] == "concurrency 4"
    assert API_KEY not in j["command"] and "***" in j["command"]
    assert (j["requests"], j["succeeded"], j["failed"], j["errors"]) == (12, 12, 0, {})
    assert j["output_tokens"] == 12 * 4  # ignore_eos: every request generates all its tokens
    assert j["requests_per_s"] > 0 and j["output_tok_per_s"] > 0
    assert_latencies(j, 12)
    # The 48-token system prompt is shared: after the first requests it comes from the cache.
    cache = j["prefix_cache"]
    assert cache["hit_tokens"] > 0 and 0 < cache["hit_rate"] < 1
    assert j["usage_cached_tokens"] == cache["hit_tokens"]


def test_chat_multi_turn_at_a_poisson_rate(server, memra_bin, tmp_path):
    _, j = bench(memra_bin, tmp_path, "--url", server.url + "/v1", "--endpoint", "chat",
                 "--rate", "40", "--requests", "9", "--turns", "3", "--prompt-tokens", "10",
                 "--output-tokens", "3", "--seed", "7")
    assert j["mode"].startswith("rate 40/s") and j["workload"]["turns"] == 3
    assert (j["succeeded"], j["output_tokens"]) == (9, 27)
    assert_latencies(j, 9)
    # Later turns resend the history, so their prompts are served mostly from the cache.
    assert j["prefix_cache"]["hit_rate"] > 0.2


def test_dataset_conversations(server, memra_bin, tmp_path):
    data = tmp_path / "conv.jsonl"
    data.write_text("\n".join(json.dumps(c) for c in [
        {"messages": [{"role": "system", "content": "be brief"},
                      {"role": "user", "content": "name a river"},
                      {"role": "assistant", "content": "the Nile"},
                      {"role": "user", "content": "and a mountain"}]},
        {"conversations": [{"from": "human", "value": "say hello"},
                           {"from": "gpt", "value": "hello"}]},
        {"messages": [{"role": "assistant", "content": "no user here: skipped"}]},
    ]) + "\n")
    _, j = bench(memra_bin, tmp_path, "--url", server.url, "--endpoint", "chat", "--dataset",
                 str(data), "--requests", "4", "--concurrency", "2", "--output-tokens", "2")
    assert j["workload"]["dataset_conversations"] == 2 and j["succeeded"] == 4


def test_errors_by_kind(server, memra_bin, tmp_path):
    # A wrong key: every request is an HTTP 401, and a run with no success exits 1.
    r, j = bench(memra_bin, tmp_path, "--url", server.url, "--requests", "3", "--output-tokens",
                 "2", key="sk-wrong", check=False)
    assert r.returncode == 1 and j["errors"] == {"http_401": 3} and j["succeeded"] == 0
    assert "401" in j["first_error"] and j["prefix_cache"] is None

    # A listener that never answers: timeouts; a closed port: transport errors.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        r, j = bench(memra_bin, tmp_path, "--url", url, "--requests", "2", "--timeout", "0.5",
                     key="", check=False)
        # /v1/models timed out too: the model is unknown and the run still reports.
        assert r.returncode == 1 and j["errors"] == {"timeout": 2}, r.stderr
    r, j = bench(memra_bin, tmp_path, "--url", f"http://127.0.0.1:{free_port()}", "--requests",
                 "2", key="", check=False)
    assert r.returncode != 0 and "connect" in r.stderr and j is None


@pytest.mark.parametrize("args, message", [
    (["--url", "https://127.0.0.1:1"], "https is not supported"),
    (["--url", "127.0.0.1:8080"], "expected http://"),
    (["--prompt-tokens", "uniform:9-3"], "A must be <= B"),
    (["--endpoint", "embeddings"], "--endpoint expects"),
    (["--requests", "5", "--duration", "10"], "not both"),
    (["--bogus"], "unknown argument"),
])
def test_refuses_bad_options(memra_bin, args, message):
    r = subprocess.run([str(memra_bin), "bench-serve", *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and message in r.stderr, r.stderr
