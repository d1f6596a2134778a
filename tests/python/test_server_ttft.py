"""scripts/server_ttft.py on the tiny qwen3 fixture (CPU): a bench-shaped receipt with the
start-to-ready, TTFT and ITL figures at 1 and 3 clients, which `memra bench --compare --receipts`
accepts; and refusals when the server cannot start or the options make no sense."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "server_ttft.py"
MODEL = ROOT / "tests" / "fixtures" / "models" / "qwen3"
BASELINES = ROOT / "bench" / "baselines" / "llama.cpp-h200-2026-11-29.json"


def run_script(build_dir, tmp_path, *extra):
    out = tmp_path / "ttft.json"
    r = subprocess.run([sys.executable, str(SCRIPT), "--bin", str(build_dir / "tools"), "--device",
                        "cpu", "--starts", "1", "--requests", "2", "--prompt-tokens", "24",
                        "--output-tokens", "3", "--concurrency", "1,3", "--json", str(out),
                        *map(str, extra)],
                       capture_output=True, text=True, timeout=300)
    return r, out


def test_receipt_has_both_figures_and_compares(build_dir, memra_bin, tmp_path):
    r, out = run_script(build_dir, tmp_path, "--model", MODEL)
    assert r.returncode == 0, r.stderr
    receipt = json.loads(out.read_text())
    assert receipt["what"] == "bench" and receipt["model"]["architecture"] == "qwen3"
    figures = {f["name"]: f for f in receipt["figures"]}
    start = figures["server start to ready"]
    ttft = figures["server ttft pp24 c1"]
    assert start["unit"] == "s" and 0 < start["median"] < 300 and start["runs"] == 1
    assert ttft["unit"] == "ms" and ttft["median"] > 0 and ttft["runs"] == 2
    # Three clients: at least 4 x 3 requests; two gaps between a request's three tokens.
    ttft3, itl3 = figures["server ttft pp24 c3"], figures["server itl pp24 c3"]
    assert ttft3["runs"] == 12 and itl3["unit"] == "ms" and itl3["runs"] == 24
    assert 0 < itl3["median"] <= itl3["p90"] <= itl3["max"]
    assert figures["server itl pp24 c1"]["runs"] == 4
    # bench-serve's own receipts ride along, one per client count.
    serve = receipt["bench_serve"]
    assert serve["c1"]["succeeded"] == 2 and serve["c1"]["failed"] == 0
    assert serve["c3"]["succeeded"] == 12 and serve["c3"]["failed"] == 0
    c = subprocess.run([str(memra_bin), "bench", "--compare", str(BASELINES), "--receipts",
                        str(out)], capture_output=True, text=True, timeout=60)
    assert c.returncode == 0, c.stderr
    assert "server ttft pp24 c1 (ms)" in c.stdout and "server start to ready (s)" in c.stdout
    assert "server itl pp24 c3 (ms)" in c.stdout


def test_nonsense_options_are_refused_by_name(build_dir, tmp_path):
    r, out = run_script(build_dir, tmp_path, "--model", MODEL, "--concurrency", "0,2")
    assert r.returncode != 0 and not out.exists() and "--concurrency" in r.stderr


def test_a_model_that_cannot_load_is_named(build_dir, tmp_path):
    missing = tmp_path / "no-such-model.gguf"
    r, out = run_script(build_dir, tmp_path, "--model", missing)
    assert r.returncode != 0 and not out.exists()
    assert "server_ttft: memra bench failed" in r.stderr and "no-such-model" in r.stderr
