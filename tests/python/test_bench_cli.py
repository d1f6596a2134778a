"""`memra bench` on the tiny qwen3 fixture (context 256) on the CPU: its modes, refusals by flag
and its receipt. Speed is not checked here (a benchmark is a command, not a timed test): only that
every figure is measured, positive and ordered min <= median <= max."""
import json
import pathlib
import subprocess

import pytest

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "models" / "qwen3"


def bench(memra_bin, *args):
    return subprocess.run([str(memra_bin), "bench", "-m", str(FIXTURE), "--threads", "1",
                           "--device", "cpu", *args], capture_output=True, text=True, timeout=120)


def table_rows(stdout):
    """The last table: {figure name: [median, min, max, ceiling, % ceiling]}."""
    last = stdout.rsplit("\n\n", 1)[-1]
    rows = {}
    for line in last.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


@pytest.mark.parametrize("args, named", [
    (["-d", "250", "-n", "8"], "-d 250 with -n 8 needs 258 tokens of context; "
                               "the model's context length is 256"),
    (["-p", "300"], "-p 300 with -n 128 needs 428 tokens of context"),
    (["-c", "2"], "-p 512 with -n 128 needs 640 tokens of context"),
    (["-p", "16,16"], "-p lists 16 twice"),
    (["-p", "16,"], "-p expects an integer in [1, 1048576], got ''"),
    (["-c", "0"], "-c expects an integer in [1, 4096], got '0'"),
    (["-d", "-1"], "-d expects an integer in [0, 16777216], got '-1'"),
    (["-n", "1"], "-n expects an integer in [2, 1048576], got '1'"),
    (["--device", "gpu"], "device 'gpu' is not one of auto, cpu, cuda, cuda:N"),
    (["--json"], "--json needs a value"),
    (["--json", "/nonexistent/dir/r.json"], "--json /nonexistent/dir/r.json: cannot be written"),
    # A CPU build and a GPU-less CUDA build refuse it for different reasons, both by name.
    (["--device", "cuda:0"], "device 'cuda:0':"),
    (["--kv-dtype", "fp9"], "--kv-dtype fp9 is not a KV cache type"),
    # A real type the CPU does not keep: the engine refuses it by name.
    (["--kv-dtype", "bf16", "-p", "16", "-n", "4"], "KV cache in F32 or F8_E4M3, not BF16"),
])
def test_refusals_name_the_flag(memra_bin, args, named):
    r = bench(memra_bin, *args)
    assert r.returncode == 2 and named in r.stderr, r.stderr


def test_default_mode_prefill_then_decode(memra_bin):
    r = bench(memra_bin, "-p", "16", "-n", "4")
    assert r.returncode == 0, r.stderr
    rows = table_rows(r.stdout)
    assert list(rows) == ["prefill pp16", "decode tg4"]
    for name, (median, lo, hi, ceiling, pct) in rows.items():
        assert 0 < float(lo) <= float(median) <= float(hi), name
        assert ceiling == "n/a" and pct == "n/a"  # no ceilings on the CPU
    assert "tokens per (process CPU-seconds / 1 threads)" in r.stdout
    assert "ceilings: n/a on the CPU" in r.stdout


def test_depths_replace_decode_after_prefill(memra_bin):
    r = bench(memra_bin, "-d", "0,8", "-n", "4")
    assert r.returncode == 0, r.stderr
    assert list(table_rows(r.stdout)) == ["decode tg4 @ d0", "decode tg4 @ d8"]


def test_concurrent_sequences_and_receipt(memra_bin, tmp_path):
    receipt = tmp_path / "bench.json"
    r = bench(memra_bin, "-c", "2", "-n", "4", "-p", "16", "--json", str(receipt))
    assert r.returncode == 0, r.stderr
    rows = table_rows(r.stdout)
    assert list(rows) == ["prefill pp16", "decode tg4", "c2 prefill pp16", "c2 decode tg4"]
    assert float(rows["c2 decode tg4"][0]) > 0
    j = json.loads(receipt.read_text())
    for key in ["what", "commit", "timestamp", "command", "device", "gpu", "options", "model",
                "ceilings", "figures"]:
        assert key in j, key
    assert j["what"] == "bench" and j["gpu"] is None and j["ceilings"] is None
    assert j["command"].startswith("memra bench -m ") and "-c 2" in j["command"]
    assert j["model"]["architecture"] == "qwen3" and j["model"]["context_length"] == 256
    assert 0 < j["model"]["bytes_read_per_token"] < j["model"]["weight_bytes"]  # untied
    assert j["model"]["kv_bytes_per_token"] > 0
    # The KV cache type: as asked (null: the backend's default) and as run.
    assert j["options"]["kv_dtype"] is None and j["kv_dtype"] == j["model"]["kv_dtype"] == "F32"
    assert "KV cache F32" in r.stderr and "bytes per token of context (F32)" in r.stdout
    figures = {f["name"]: f for f in j["figures"]}
    assert figures.keys() == rows.keys()
    agg = figures["c2 decode tg4"]
    assert agg["kind"] == "aggregate_decode" and agg["concurrency"] == 2
    for f in figures.values():
        assert f["runs"] == 3 == len(f["values"])
        assert 0 < f["min"] <= f["median"] <= f["max"]
        assert f["ceiling_tok_s"] is None and f["tok_per_cpu_second_x_threads"]["median"] > 0


def test_moe_cost_counts_the_experts_a_token_uses(memra_bin, tmp_path):
    # qwen3_moe fixture: 2 of 8 experts per token. A token reads the non-expert weights and a
    # quarter of the expert weights; the receipt says how much of each.
    receipt = tmp_path / "moe.json"
    moe = FIXTURE.parent / "qwen3_moe"
    r = subprocess.run([str(memra_bin), "bench", "-m", str(moe), "--threads", "1", "--device",
                        "cpu", "-p", "16", "-n", "4", "--json", str(receipt)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "experts: 2 of 8 per token" in r.stdout, r.stdout
    m = json.loads(receipt.read_text())["model"]
    assert m["experts"] == 8 and m["experts_used"] == 2
    assert 0 < m["expert_bytes"] < m["weight_bytes"]
    # Not the idle 6/8 of the experts (nor the embedding table beyond one row), but at least
    # the quarter of the experts a token uses.
    idle = m["expert_bytes"] * 6 // 8
    assert m["expert_bytes"] // 4 < m["bytes_read_per_token"] <= m["weight_bytes"] - idle + 1


@pytest.mark.parametrize("asked, runs", [("f32", "F32"), ("fp8", "F8_E4M3")])
def test_kv_dtype_is_recorded_as_asked(memra_bin, tmp_path, asked, runs):
    receipt = tmp_path / "kv.json"
    r = bench(memra_bin, "-p", "16", "-n", "4", "--kv-dtype", asked, "--json", str(receipt))
    assert r.returncode == 0, r.stderr
    j = json.loads(receipt.read_text())
    assert (j["options"]["kv_dtype"], j["kv_dtype"]) == (asked, runs)
    assert f"--kv-dtype {asked}" in j["command"]
    # the FP8 cache says what it costs at every start
    assert ("F8_E4M3 holds twice F16's tokens" in r.stderr) == (runs == "F8_E4M3")
