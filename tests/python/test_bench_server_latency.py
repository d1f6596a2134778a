"""scripts/bench_server_latency.py against the CPU memra-server on the default model, with tiny
settings (short prompts, few tokens) so it stays fast: every figure it reports must be present
and positive, and its receipt must say what was run."""
import json
import pathlib
import subprocess
import sys

import pytest

from server_harness import API_KEY, REAL_ARGS, Server, real_server_binary

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "bench_server_latency.py"


@pytest.fixture(scope="module")
def server(build_dir, default_model):
    s = Server(real_server_binary(build_dir),
               REAL_ARGS + ["--model", str(default_model), "--threads", "2"],
               env={"MEMRA_API_KEYS": API_KEY})
    yield s
    s.stop()


def test_reports_positive_ttft_itl_and_throughput(server, tmp_path):
    receipt = tmp_path / "latency.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--url", server.url, "--api-key", API_KEY,
                        "--prompt-tokens", "24", "--max-tokens", "4", "--concurrency", "1,2",
                        "--rounds", "2", "--json", str(receipt)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "TTFT p50 ms" in r.stdout
    j = json.loads(receipt.read_text())
    assert j["what"] == "bench-server-latency" and j["prompt_tokens"] == 24
    assert API_KEY not in j["command"]
    assert [level["concurrency"] for level in j["levels"]] == [1, 2]
    for level in j["levels"]:
        assert level["requests"] == 2 * level["concurrency"]
        assert level["completion_tokens"] == 4 * level["requests"]  # ignore_eos: every token
        assert level["output_tok_s"] > 0
        for figure in ("ttft_ms", "itl_ms", "tpot_ms"):
            assert level[figure]["p50"] > 0 and level[figure]["p90"] >= level[figure]["p50"]


def test_refuses_a_bad_url():
    r = subprocess.run([sys.executable, str(SCRIPT), "--url", "ftp://x"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0 and "--url" in r.stderr
