"""Real-model gate (CPU): the packaged Gemma 3 270M Q4_K_M GGUF. Checks it is that model, and
that memra's teacher-forced next-token argmax agrees with transformers running the same GGUF
(dequantized to float32; reference made once by scripts/gen_real_model_reference.py and
committed as tests/fixtures/models/gemma3-270m/teacher_forced.json) at >= 99% of positions, and
that on this file the fast ops give the reference ops' logits within 1e-5 (the 99% bound measures
the quantization and cannot see a kernel error; fast vs reference measured 6e-7).
"""
import json
import pathlib
import subprocess

import numpy as np
import pytest
from gguf import GGUFReader

ROOT = pathlib.Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "tests" / "fixtures" / "models" / "gemma3-270m" / "teacher_forced.json"


@pytest.fixture(scope="session")
def model_run(build_dir) -> pathlib.Path:
    path = build_dir / "tests" / "models" / "model_run"
    assert path.exists(), f"{path} is missing: build target model_run"
    return path


def test_default_model_is_gemma3_270m(default_model):
    reader = GGUFReader(default_model)
    fields = {name: field.contents() for name, field in reader.fields.items()
              if not name.startswith("tokenizer.ggml.")}
    assert fields["general.architecture"] == "gemma3"
    assert fields["general.size_label"] == "270M"
    assert fields["gemma3.block_count"] == 18
    assert fields["gemma3.embedding_length"] == 640
    assert fields["gemma3.attention.head_count"] == 4
    assert fields["gemma3.attention.head_count_kv"] == 1
    embd = next(t for t in reader.tensors if t.name == "token_embd.weight")
    assert [int(d) for d in embd.shape] == [640, 262144]
    assert embd.tensor_type.name == "Q8_0"
    n_params = sum(int(np.prod([int(d) for d in t.shape])) for t in reader.tensors)
    assert 260e6 < n_params < 280e6


def test_teacher_forced_agreement_with_transformers(default_model, model_run, tmp_path):
    ref = json.loads(REFERENCE.read_text())
    assert len(ref["tokens"]) >= 190
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps(ref["tokens"]))
    proc = subprocess.run([str(model_run), "--model", str(default_model), "--tokens-file",
                           str(tokens), "--chunk", "64", "--argmax", "--threads", "2"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    ours = np.array(json.loads(proc.stdout)["argmax"])
    theirs = np.array(ref["argmax"])
    assert ours.shape == theirs.shape
    agreement = float(np.mean(ours == theirs))
    assert agreement >= 0.99, f"top-1 agreement {agreement:.4f}"


def test_fast_ops_match_reference_ops(default_model, model_run):
    tokens = json.dumps(json.loads(REFERENCE.read_text())["tokens"][:8])
    logits = []
    for extra in ([], ["--reference"]):
        proc = subprocess.run([str(model_run), "--model", str(default_model), "--tokens", tokens,
                               "--chunk", "64", "--all-logits", "--threads", "2", *extra],
                              capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        logits.append(np.array(json.loads(proc.stdout)["logits"], dtype=np.float64))
    fast, slow = logits
    assert fast.shape == slow.shape == (8, 262144)
    err = np.abs(fast - slow).max() / np.abs(slow).max()
    assert err <= 1e-5, err
