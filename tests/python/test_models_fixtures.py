"""Model gate (CPU): memra's forward pass vs transformers float32 on tiny random-weight
checkpoints of each architecture (tests/fixtures/models/<arch>, made by
scripts/gen_model_fixtures.py), loaded from the HF safetensors folder and from our GGUF
conversions (`memra convert --type f32|bf16|q8_0`). Pass: logits max abs error / max abs
reference <= 1e-4 and 32 greedy tokens identical for exact sources (safetensors, f32, bf16: the
fixture weights are bf16 values); documented looser bounds for q8_0 against transformers, and the
fast ops within 1e-5 of the reference ops on the same q8_0 file; a perturbed weight must fail.
"""
import json
import pathlib
import shutil
import struct
import subprocess

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
ARCHS = ["llama", "qwen2", "qwen3", "gemma3", "qwen3_moe", "qwen3_moe_sparse_step", "gemma4",
         "qwen3_5", "qwen3_5_moe", "gemma4_moe"]
# The teeth tensor per fixture: layer 0's MLP, or for the MoE fixtures a router (one perturbed
# router weight moves every routing weight of that layer).
PERTURBED = {"qwen3_moe": "blk.0.ffn_gate_inp.weight",
             "qwen3_moe_sparse_step": "blk.1.ffn_gate_inp.weight",
             "qwen3_5_moe": "blk.0.ffn_gate_inp.weight",
             "gemma4_moe": "blk.0.ffn_gate_inp.weight"}
EXACT_TOL = 1e-4
# Q8_0 rounds every weight to 8 bits. The fixtures' large random weights saturate attention,
# which amplifies that rounding: over the prompt positions the relative logit error measured
# 0.015 (gemma3) to 0.15 (llama), identical with the reference ops (so it is the quantization,
# not the kernels), and teacher-forced argmax agreed at 0.94-1.0. qwen3_moe measured 0.13 and
# 0.96 (its router stays F32; 8-bit expert weights still move some tokens' choice of experts).
# Bounds: error <= 0.35 and agreement >= 0.9 over the prompt; greedy is not compared (one
# flipped token changes every later context).
Q8_TOL = 0.35
Q8_AGREEMENT = 0.9
# qwen3_5_moe measured 0.75 and 0.81: top-2 of 8 experts behind a recurrence; a token whose
# experts flip under 8-bit weights moves every later position through the delta-rule state.
# Its f32/bf16 files pass the exact bound and its fast ops match the reference ops on the q8_0
# file, so this bounds the quantization only.
# gemma4_moe measured 0.885 and 0.6875: top-2 of 8 sharply preferred experts (its router weights
# are drawn wide, scripts/gen_model_fixtures.py) in every layer, so 8-bit weights flip many
# tokens' experts. transformers run on the same dequantized q8_0 weights gave our logits within
# 6.2e-6 (checked once by hand; torch is not in the test venv): the error is the quantization.
Q8_BOUNDS = {"qwen3_5_moe": (0.9, 0.75), "gemma4_moe": (0.95, 0.65)}
# The bounds above measure the quantization, so they cannot see the kernels: on the same Q8_0
# file the fast ops must match the reference ops (same dequantized weights, f32 vs double sums).
# Measured 2e-7 (gemma3) to 2.8e-6 (llama) of the largest logit.
FAST_VS_REFERENCE_TOL = 1e-5


@pytest.fixture(scope="session")
def model_run(build_dir) -> pathlib.Path:
    path = build_dir / "tests" / "models" / "model_run"
    assert path.exists(), f"{path} is missing: build target model_run"
    return path


def reference(arch):
    ref = json.loads((FIXTURES / arch / "reference.json").read_text())
    ref["logits"] = np.array(ref["logits"], dtype=np.float64).reshape(-1, ref["vocab"])
    return ref


def run(model_run, source, ref, *extra, chunk=20):
    cmd = [str(model_run), "--model", str(source), "--tokens", json.dumps(ref["prompt"]),
           "--chunk", str(chunk), "--greedy", str(len(ref["greedy"])), "--all-logits",
           "--threads", "2", *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    out["logits"] = np.array(out["logits"], dtype=np.float64)
    return out


def rel_err(out, ref):
    """Max abs logit error over the prompt positions and the decode steps, relative to the
    reference's max abs logit."""
    n = len(out["logits"])
    ref_logits = ref["logits"][:n]
    return float(np.abs(out["logits"] - ref_logits).max() / np.abs(ref_logits).max())


@pytest.mark.parametrize("arch", ARCHS)
def test_safetensors_matches_transformers(arch, model_run):
    ref = reference(arch)
    out = run(model_run, FIXTURES / arch, ref)
    assert len(out["logits"]) == len(ref["prompt"]) + len(ref["greedy"]) - 1
    assert rel_err(out, ref) <= EXACT_TOL
    assert out["greedy"] == ref["greedy"]


@pytest.mark.parametrize("arch", ARCHS)
def test_reference_ops_match_transformers(arch, model_run):
    """The plain reference ops (the oracle for the fast path), one prefill chunk."""
    ref = reference(arch)
    out = run(model_run, FIXTURES / arch, ref, "--reference", chunk=64)
    assert rel_err(out, ref) <= EXACT_TOL
    assert out["greedy"] == ref["greedy"]


@pytest.mark.parametrize("arch", ARCHS)
def test_perturbed_weight_fails_the_gate(arch, model_run):
    """Teeth: +1 on one weight element of layer 0 must break the 1e-4 bound."""
    ref = reference(arch)
    tensor = PERTURBED.get(arch, "blk.0.ffn_down.weight")
    out = run(model_run, FIXTURES / arch, ref, "--perturb", tensor)
    assert rel_err(out, ref) > EXACT_TOL


@pytest.mark.parametrize("gguf_type", ["f32", "bf16", "q8_0"])
@pytest.mark.parametrize("arch", ARCHS)
def test_gguf_conversion_matches_transformers(arch, gguf_type, model_run, memra_bin, tmp_path):
    ref = reference(arch)
    gguf = tmp_path / f"{arch}-{gguf_type}.gguf"
    proc = subprocess.run([str(memra_bin), "convert", str(FIXTURES / arch), "-o", str(gguf),
                           "--type", gguf_type], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = run(model_run, gguf, ref)
    if gguf_type == "q8_0":
        n = len(ref["prompt"])
        ours, theirs = out["logits"][:n], ref["logits"][:n]
        tol, agreement = Q8_BOUNDS.get(arch, (Q8_TOL, Q8_AGREEMENT))
        assert float(np.abs(ours - theirs).max() / np.abs(theirs).max()) <= tol
        assert float(np.mean(ours.argmax(-1) == theirs.argmax(-1))) >= agreement
    else:  # the fixture weights are bf16 values, so f32 and bf16 GGUFs hold them exactly
        assert rel_err(out, ref) <= EXACT_TOL
        assert out["greedy"] == ref["greedy"]


@pytest.mark.parametrize("arch", ARCHS)
def test_q8_0_fast_ops_match_reference_ops_on_the_same_file(arch, model_run, memra_bin, tmp_path):
    ref = reference(arch)
    gguf = tmp_path / f"{arch}-q8_0.gguf"
    proc = subprocess.run([str(memra_bin), "convert", str(FIXTURES / arch), "-o", str(gguf),
                           "--type", "q8_0"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    fast = run(model_run, gguf, ref, chunk=64)
    slow = run(model_run, gguf, ref, "--reference", chunk=64)
    n = len(ref["prompt"])  # the prompt rows: the same context whatever greedy picks later
    err = np.abs(fast["logits"][:n] - slow["logits"][:n]).max() / np.abs(slow["logits"][:n]).max()
    assert err <= FAST_VS_REFERENCE_TOL, err


def add_tensors(src: pathlib.Path, dst: pathlib.Path, extra: dict) -> None:
    """Copies a safetensors file adding tensors: extra maps a new name to (an existing tensor
    whose bytes it reuses, its new shape)."""
    raw = src.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out, new_header = bytearray(data), dict(header)
    for name, (like, shape) in extra.items():
        info = header[like]
        begin, end = info["data_offsets"]
        new_header[name] = {"dtype": info["dtype"], "shape": shape,
                            "data_offsets": [len(out), len(out) + end - begin]}
        out += data[begin:end]
    head = json.dumps(new_header).encode()
    head += b" " * (-len(head) % 8)
    dst.write_bytes(struct.pack("<Q", len(head)) + head + bytes(out))


def test_qwen35_mtp_head_loads_and_converts(model_run, memra_bin, tmp_path):
    """A Qwen3.5 checkpoint with its multi-token-prediction head (mtp.*: a full-attention decoder
    layer, the fc that joins embedding and hidden state, three norms) loads and gives the same
    logits (the head is kept, not run), and our GGUF of it carries the head as llama.cpp's block
    n_layer with nextn_predict_layers 1, and loads too."""
    src = FIXTURES / "qwen3_5"
    folder = tmp_path / "qwen3_5_mtp"
    shutil.copytree(src, folder)
    header = json.loads((src / "model.safetensors").read_bytes()[8:8 + struct.unpack(
        "<Q", (src / "model.safetensors").read_bytes()[:8])[0]])
    extra = {"mtp.layers.0." + k[len("model.layers.2."):]: (k, header[k]["shape"])
             for k in header if k.startswith("model.layers.2.")}
    extra["mtp.fc.weight"] = ("model.layers.2.self_attn.q_proj.weight", [96, 192])
    for norm in ("pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm"):
        extra[f"mtp.{norm}.weight"] = ("model.norm.weight", [96])
    add_tensors(src / "model.safetensors", folder / "model.safetensors", extra)
    ref = reference("qwen3_5")
    out = run(model_run, folder, ref)
    assert rel_err(out, ref) <= EXACT_TOL
    assert out["greedy"] == ref["greedy"]
    gguf_path = tmp_path / "qwen3_5_mtp.gguf"
    proc = subprocess.run([str(memra_bin), "convert", str(folder), "-o", str(gguf_path),
                           "--type", "bf16"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    import gguf
    reader = gguf.GGUFReader(str(gguf_path))
    field = reader.fields["qwen35.nextn_predict_layers"]
    assert int(field.parts[field.data[0]][0]) == 1
    field = reader.fields["qwen35.block_count"]
    assert int(field.parts[field.data[0]][0]) == 5
    names = {t.name for t in reader.tensors}
    assert {"blk.4.nextn.eh_proj.weight", "blk.4.nextn.enorm.weight",
            "blk.4.attn_q.weight"} <= names
    out = run(model_run, gguf_path, ref)
    assert rel_err(out, ref) <= EXACT_TOL
    assert out["greedy"] == ref["greedy"]
