"""`memra synth` end to end: files of public shapes with seeded random weights, checked with
`memra inspect --json`, the `gguf` package (the format's reference reader and dequantizer), a
second synthesis for byte-identity, and a CPU `memra run`.

GGUFReader parses metadata arrays item by item (seconds of CPU per 150k-token vocabulary), so it
reads one file, the 2-layer qwen3-0.6b; the full gemma3-270m file is compared tensor by tensor
with the packaged real Gemma 3 270M Q4_K_M through `memra inspect`.
"""
import hashlib
import json
import pathlib
import subprocess
import sys

import gguf
import numpy as np
import pytest

QWEN_VOCAB = 151936
ROOT = pathlib.Path(__file__).resolve().parents[2]


def synth(memra_bin, out, shape, mix, *extra):
    proc = subprocess.run([memra_bin, "synth", "--shape", shape, "--type", mix, "-o", str(out),
                           *extra], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"wrote {out}" in proc.stdout
    return out


def inspect_json(memra_bin, path):
    proc = subprocess.run([memra_bin, "inspect", "--json", "--items", "4", str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def metadata(info):
    return {m["key"]: m for m in info["metadata"]}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


@pytest.fixture(scope="module")
def files(memra_bin, tmp_path_factory):
    d = tmp_path_factory.mktemp("synth")
    return {
        "q4": synth(memra_bin, d / "qwen3-q4.gguf", "qwen3-0.6b", "q4_k_m", "--layers", "2",
                    "--seed", "1", "--fast-quant", "--threads", "1"),
        "bf16": synth(memra_bin, d / "qwen3-bf16.gguf", "qwen3-0.6b", "bf16", "--layers", "2"),
        "gemma": synth(memra_bin, d / "gemma.gguf", "gemma3-270m", "q4_k_m", "--fast-quant"),
        "dir": d,
    }


def test_inspect_shapes_types_and_metadata(memra_bin, files):
    info = inspect_json(memra_bin, files["q4"])
    md = metadata(info)
    expect = {"general.architecture": "qwen3", "qwen3.block_count": 2,
              "qwen3.embedding_length": 1024, "qwen3.feed_forward_length": 3072,
              "qwen3.attention.head_count": 16, "qwen3.attention.head_count_kv": 8,
              "qwen3.attention.key_length": 128, "qwen3.context_length": 40960,
              "qwen3.rope.freq_base": 1e6, "general.file_type": 15,
              "general.name": "memra synth qwen3-0.6b seed 1 layers 2",
              "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "qwen2",
              "tokenizer.ggml.eos_token_id": 151645}
    for key, value in expect.items():
        assert md[key]["value"] == value, key
    assert md["tokenizer.ggml.tokens"]["count"] == QWEN_VOCAB
    tensors = {t["name"]: t for t in info["tensors"]}
    assert len(tensors) == 1 + 2 * 11 + 1  # tied: no output.weight
    assert tensors["token_embd.weight"]["shape"] == [1024, QWEN_VOCAB]
    assert tensors["token_embd.weight"]["type"] == "Q6_K"  # the tied output gets Q6_K
    assert tensors["blk.0.attn_q.weight"]["shape"] == [1024, 2048]
    assert tensors["blk.0.attn_q.weight"]["type"] == "Q4_K"
    assert tensors["blk.1.ffn_down.weight"]["type"] == "Q6_K"  # llama-quantize's more bits
    norm = tensors["blk.1.attn_k_norm.weight"]
    assert (norm["type"], norm["shape"]) == ("F32", [128])
    bf16 = {t["name"]: t["type"] for t in inspect_json(memra_bin, files["bf16"])["tensors"]}
    assert {t for n, t in bf16.items() if "norm" not in n} == {"BF16"}


def test_gemma_matches_the_real_model_tensor_for_tensor(memra_bin, files, default_model):
    ours = inspect_json(memra_bin, files["gemma"])
    real = inspect_json(memra_bin, default_model)
    table = lambda info: {t["name"]: (t["type"], tuple(t["shape"])) for t in info["tensors"]}
    assert table(ours) == table(real)
    ours_md, real_md = metadata(ours), metadata(real)
    for key in ["context_length", "embedding_length", "block_count", "feed_forward_length",
                "attention.head_count", "attention.head_count_kv", "attention.key_length",
                "attention.sliding_window", "rope.freq_base", "attention.layer_norm_rms_epsilon"]:
        assert ours_md["gemma3." + key]["value"] == real_md["gemma3." + key]["value"], key
    for key in ["tokenizer.ggml.model", "tokenizer.ggml.bos_token_id",
                "tokenizer.ggml.eos_token_id", "general.file_type"]:
        assert ours_md[key]["value"] == real_md[key]["value"], key
    assert ours_md["tokenizer.ggml.scores"]["count"] == 262144


def test_gguf_package_reads_every_tensor(memra_bin, files):
    ours = {t["name"]: t for t in inspect_json(memra_bin, files["q4"])["tensors"]}
    reader = gguf.GGUFReader(files["q4"])
    assert {t.name for t in reader.tensors} == set(ours)
    for t in reader.tensors:
        assert t.tensor_type.name == ours[t.name]["type"], t.name
        assert [int(x) for x in t.shape] == ours[t.name]["shape"], t.name
        values = gguf.quants.dequantize(t.data[:64], t.tensor_type)  # 64 rows are plenty
        assert np.isfinite(values).all(), t.name
        if "norm" in t.name:
            assert abs(values.mean() - 1.0) < 0.05 and 0.05 < values.std() < 0.15, t.name
        elif t.name == "blk.0.ffn_down.weight":  # fan-in 3072: std 1/sqrt(3072)
            assert abs(values.std() * np.sqrt(3072) - 1.0) < 0.1
            assert abs(values.mean()) < 0.05 * values.std()
    for key in ["tokenizer.ggml.tokens", "tokenizer.ggml.token_type"]:
        assert len(reader.fields[key].data) == QWEN_VOCAB, key
    assert 0 < len(reader.fields["tokenizer.ggml.merges"].data) < QWEN_VOCAB


def test_same_seed_same_bytes_and_other_seed_differs(memra_bin, files):
    d = files["dir"]
    again = synth(memra_bin, d / "again.gguf", "qwen3-0.6b", "q4_k_m", "--layers", "2",
                  "--seed", "1", "--fast-quant", "--threads", "3")
    other = synth(memra_bin, d / "other.gguf", "qwen3-0.6b", "q4_k_m", "--layers", "2",
                  "--seed", "2", "--fast-quant", "--threads", "1")
    first = sha256(files["q4"])
    assert sha256(again) == first
    assert sha256(other) != first
    again.unlink()
    other.unlink()


@pytest.mark.parametrize("which", ["bf16", "gemma"])
def test_cpu_run_generates(memra_bin, files, which):
    proc = subprocess.run([memra_bin, "tokenize", "-m", str(files[which]), "--text",
                           "hello world"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert 2 <= len(proc.stdout.split()) <= 8
    proc = subprocess.run([memra_bin, "run", "-m", str(files[which]), "-p", "hi", "-n", "4",
                           "--ignore-eos", "--threads", "2"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "generation: 4 tokens" in proc.stderr


@pytest.mark.parametrize("args, needle", [
    (["--shape", "qwen9", "--type", "q4_k_m", "-o", "x.gguf"], "unknown shape 'qwen9'"),
    (["--shape", "qwen3-8b", "--type", "q3_k", "-o", "x.gguf"], "--type q3_k"),
    (["--shape", "qwen3-8b", "--type", "bf16", "--layers", "0", "-o", "x.gguf"], "--layers"),
    (["--shape", "gemma3-270m", "--type", "bf16", "--layers", "19", "-o", "x.gguf"],
     "--layers 19"),
    (["--shape", "qwen3.5-9b", "--type", "bf16", "--layers", "2", "-o", "x.gguf"],
     "--layers 2 keeps no full-attention layer"),
    (["--shape", "qwen3-8b", "--type", "bf16"], "missing -o"),
    (["--shape", "qwen3-8b", "--type", "bf16", "--seed", "-1", "-o", "x.gguf"], "--seed"),
])
def test_bad_arguments_are_named(memra_bin, tmp_path, args, needle):
    proc = subprocess.run([memra_bin, "synth", *args], capture_output=True, text=True,
                          timeout=30, cwd=tmp_path)
    assert proc.returncode == 2
    assert needle in proc.stderr
    assert not (tmp_path / "x.gguf").exists()


def test_help_lists_every_shape(memra_bin):
    proc = subprocess.run([memra_bin, "synth", "--help"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    for shape in ["qwen3-0.6b", "qwen3-8b", "llama3-8b", "gemma3-270m", "gemma3-12b", "qwen3.5-9b",
                  "qwen3.6-27b", "qwen3.6-35b-a3b", "gemma-4-31b", "gemma-4-26b-a4b"]:
        assert f"  {shape} " in proc.stdout, shape


def test_vocab_from_a_vocab_only_file_tokenizes_as_the_real_model(memra_bin, tmp_path,
                                                                   default_model):
    """scripts/vocab_only_gguf.py cuts the real model's tokenizer out (a few MB, no tensors);
    `memra synth --vocab-from` puts it over random weights of the same shape, which tokenizes
    text as the real model does (what the GPU server tests run on, scripts/gpu_server_tests.sh).
    A vocabulary of another size is refused by name."""
    vocab = tmp_path / "vocab.gguf"
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "vocab_only_gguf.py"),
                           str(default_model), str(vocab)], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert vocab.stat().st_size < default_model.stat().st_size / 10
    model = synth(memra_bin, tmp_path / "gemma.gguf", "gemma3-270m", "q4_k_m", "--layers", "1",
                  "--fast-quant", "--vocab-from", str(vocab))

    def tokens(path):
        r = subprocess.run([memra_bin, "tokenize", "-m", str(path), "--text",
                            "Grüße, <start_of_turn>user\nwhat is 12*7?<end_of_turn>"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.split()

    assert tokens(model) == tokens(default_model)
    assert len(tokens(model)) > 5
    proc = subprocess.run([memra_bin, "synth", "--shape", "qwen3-0.6b", "--type", "bf16",
                           "--layers", "1", "--vocab-from", str(vocab), "-o", "x.gguf"],
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert proc.returncode == 2
    assert "262144 tokens" in proc.stderr and "151936" in proc.stderr
