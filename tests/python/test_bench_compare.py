"""`memra bench --compare` offline (--receipts): the table built from committed receipts and the
committed llama.cpp baselines, with no model and no GPU; and its refusals by name. The matching
logic itself is unit-tested in tests/tools/bench_compare_test.cpp."""
import json
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BASELINES = ROOT / "bench" / "baselines" / "llama.cpp-h200-2026-11-29.json"
RECEIPT_8B = ROOT / "receipts" / "2026-11-30-bench-qwen3-8b-q4_k_m.json"
RECEIPT_BF16 = ROOT / "receipts" / "2026-11-30-bench-qwen3-8b-bf16.json"
RECEIPT_H100 = ROOT / "receipts" / "2026-12-05-bench-qwen3-8b-q4_k_m-h100.json"


def bench(memra_bin, *args):
    return subprocess.run([str(memra_bin), "bench", *map(str, args)], capture_output=True,
                          text=True, timeout=60)


def rows_of(stdout):
    """Every table row in the output: {metric: [memra, peer, ratio, target, vs target]}."""
    rows = {}
    for line in stdout.splitlines():
        if not line.startswith("| ") or line.startswith("| metric"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1:]
    return rows


def median_of(receipt, name):
    return next(f["median"] for f in json.loads(receipt.read_text())["figures"]
                if f["name"] == name)


def test_decode_ratio_from_the_receipt(memra_bin):
    r = bench(memra_bin, "--compare", BASELINES, "--receipts", RECEIPT_8B)
    assert r.returncode == 0, r.stderr
    assert "compared with llama.cpp (0253fb21f, NVIDIA H200, 2026-11-29)" in r.stdout
    rows = rows_of(r.stdout)
    memra, peer, ratio, target, vs_target = rows["qwen3-8b q4_k_m decode tg128"]
    median = median_of(RECEIPT_8B, "decode tg128")
    assert float(memra) == pytest.approx(median, abs=0.05)
    assert float(peer) == pytest.approx(215.7)
    assert float(ratio) == pytest.approx(median / 215.7, abs=5e-4)
    assert target == ">= 650"
    assert vs_target == f"{median / 650:.3f} " + ("met" if median >= 650 else "not met")
    # A measured figure no entry has is listed with "-"; entries no receipt measured come last.
    assert rows["qwen3-8b q4_k_m c1 prefill pp512"][1] != "-"
    assert "not measured by these receipts:" in r.stdout
    assert rows["qwen3-0.6b q4_k_m decode tg128"][0] == "-"
    assert rows["qwen3-8b q4_k_m server start to ready (s)"][3] == "<= 10"


def test_another_gpu_is_listed_not_compared(memra_bin, tmp_path):
    # An H100 run against the H200 baselines: its figures are listed without a ratio or a target
    # verdict, under a heading that names both GPUs; the H200 receipt beside it is compared.
    out = tmp_path / "compare.json"
    r = bench(memra_bin, "--compare", BASELINES, "--receipts", RECEIPT_8B, RECEIPT_H100,
              "--json", out)
    assert r.returncode == 0, r.stderr
    assert (f"{RECEIPT_H100} (ran on NVIDIA H100 80GB HBM3: listed, not compared; the baselines "
            "ran on NVIDIA H200):") in r.stdout
    rows = json.loads(out.read_text())["compare"]
    h100 = [x for x in rows if x.get("receipt") == str(RECEIPT_H100)]
    assert h100 and all(x["baseline"] is None and x["target_met"] is None for x in h100)
    assert all(x["gpu"] == "NVIDIA H100 80GB HBM3" for x in h100)
    h200 = next(x for x in rows if x.get("receipt") == str(RECEIPT_8B)
                and x["figure"] == "decode tg128")
    assert h200["baseline"] == pytest.approx(215.7) and "gpu" not in h200


def test_alias_and_json(memra_bin, tmp_path):
    out = tmp_path / "compare.json"
    r = bench(memra_bin, "--compare", BASELINES, "--receipts", RECEIPT_8B, RECEIPT_BF16,
              "--json", out)
    assert r.returncode == 0, r.stderr
    rows = rows_of(r.stdout)
    # -p 512,2048 names the decode after the 512 prompt "decode tg128 @ d512": llama-bench's tg128.
    median = median_of(RECEIPT_BF16, "decode tg128 @ d512")
    assert float(rows["qwen3-8b bf16 decode tg128 @ d512"][2]) == pytest.approx(median / 183.7,
                                                                                abs=5e-4)
    j = json.loads(out.read_text())
    assert j["what"] == "bench-compare" and j["receipts"] == [str(RECEIPT_8B), str(RECEIPT_BF16)]
    assert j["compare_baselines"]["peer"] == "llama.cpp"
    row = next(x for x in j["compare"] if x["figure"] == "decode tg128 @ d512")
    assert row["baseline_figure"] == "decode tg128" and row["receipt"] == str(RECEIPT_BF16)
    assert row["ratio"] == pytest.approx(median / 183.7)
    assert row["target"] == 230 and row["target_met"] == (median >= 230)


@pytest.mark.parametrize("args, named", [
    (["--receipts", RECEIPT_8B], "--receipts needs --compare BASELINES.json"),
    (["--compare", BASELINES, "--receipts"], "--receipts needs at least one receipt file"),
    (["--compare", BASELINES, "--receipts", RECEIPT_8B, "-m", "x.gguf"],
     "-m cannot be given with --receipts"),
    (["--compare", BASELINES, "-p", "512", "--receipts", RECEIPT_8B],
     "-p cannot be given with --receipts"),
    (["--compare", "/nonexistent/b.json", "--receipts", RECEIPT_8B],
     "--compare /nonexistent/b.json: cannot be read"),
    (["--compare", RECEIPT_8B, "--receipts", RECEIPT_8B],
     f"--compare {RECEIPT_8B}: not a baselines file"),
    (["--compare", ROOT / "README.md", "--receipts", RECEIPT_8B],
     f"--compare {ROOT / 'README.md'}: not JSON"),
    (["--compare", BASELINES, "--receipts", BASELINES],
     f"--receipts {BASELINES}: not a bench receipt (\"what\" is \"bench-baselines\""),
    (["--compare", BASELINES, "--receipts", ROOT / "receipts" / "2026-11-30-kernel-bench.json"],
     "not a bench receipt"),
])
def test_refusals_by_name(memra_bin, args, named):
    r = bench(memra_bin, *args)
    assert r.returncode == 2 and named in r.stderr, r.stderr


def test_missing_baselines_refused_before_a_run(memra_bin):
    # The baselines are read before the model: a run never starts only to fail at the end.
    r = bench(memra_bin, "-m", "/nonexistent/model.gguf", "--compare", "/nonexistent/b.json")
    assert r.returncode == 2 and "--compare /nonexistent/b.json: cannot be read" in r.stderr


def test_alongside_a_run(memra_bin, tmp_path):
    """After a run (the tiny CPU fixture: no shape of the baselines), the comparison follows the
    report, every figure listed with "-", and the receipt carries it."""
    fixture = ROOT / "tests" / "fixtures" / "models" / "qwen3"
    receipt = tmp_path / "bench.json"
    r = bench(memra_bin, "-m", fixture, "--device", "cpu", "--threads", "1", "-p", "16", "-n", "4",
              "--compare", BASELINES, "--json", receipt)
    assert r.returncode == 0, r.stderr
    report, comparison = r.stdout.split("compared with llama.cpp", 1)
    assert "| prefill pp16" in report
    assert "this run (ran on cpu: listed, not compared; the baselines ran on NVIDIA H200):" in \
        comparison
    rows = rows_of(comparison)
    assert [name.split(" ", 2)[2] for name in rows] == ["prefill pp16", "decode tg4"]
    for name, (memra, peer, ratio, target, vs_target) in rows.items():
        assert float(memra) > 0 and peer == ratio == target == vs_target == "-", name
    assert "not measured" not in comparison  # alongside a run: only the figures just measured
    j = json.loads(receipt.read_text())
    assert j["compare_baselines"]["path"] == str(BASELINES)
    assert [x["figure"] for x in j["compare"]] == ["prefill pp16", "decode tg4"]
    assert j["compare"][0]["memra"] == pytest.approx(j["figures"][0]["median"])
    assert j["compare"][0]["baseline"] is None


def test_a_deterministic_off_receipt_is_labelled(memra_bin, tmp_path):
    # The fast mode's figures sit beside the default's; the table and the JSON say which is which.
    fast = json.loads(RECEIPT_8B.read_text())
    fast["options"]["deterministic"] = False
    path = tmp_path / "fast.json"
    path.write_text(json.dumps(fast))
    out = tmp_path / "compare.json"
    r = bench(memra_bin, "--compare", BASELINES, "--receipts", RECEIPT_8B, path, "--json", out)
    assert r.returncode == 0, r.stderr
    assert f"{path} (--deterministic off: not batch-invariant):" in r.stdout
    assert f"{RECEIPT_8B}:" in r.stdout
    rows = json.loads(out.read_text())["compare"]
    modes = {(row["receipt"], row["deterministic"]) for row in rows if row["memra"] is not None}
    assert modes == {(str(RECEIPT_8B), True), (str(path), False)}
    fast["options"]["deterministic"] = "no"
    path.write_text(json.dumps(fast))
    bad = bench(memra_bin, "--compare", BASELINES, "--receipts", path)
    assert bad.returncode == 2 and "options.deterministic is not a boolean" in bad.stderr
