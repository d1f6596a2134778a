"""`memra inspect` against the `gguf` package (the format's reference reader) and on malformed files.

GGUFReader walks metadata arrays item by item in Python (about 20 s of CPU for Gemma's 262k-token
vocabulary), so the full oracle comparison runs on the smallest vocabulary file of the test data; the Gemma
model is checked against facts read once with GGUFReader and for internal consistency.
"""
import json
import subprocess

import gguf
import numpy as np
import pytest


def inspect_json(memra_bin, path, *extra):
    proc = subprocess.run([memra_bin, "inspect", "--json", *extra, str(path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def field_value(field):
    """A scalar or string field's value, as the gguf package decodes it."""
    return field.contents()


def test_inspect_matches_gguf_package_on_vocab(memra_bin, test_data):
    path = test_data / "vocab" / "ggml-vocab-bert-bge.gguf"
    ours = inspect_json(memra_bin, path, "--items", "5")
    ref = gguf.GGUFReader(path)
    ref_fields = [(k, f) for k, f in ref.fields.items() if not k.startswith("GGUF.")]
    assert [m["key"] for m in ours["metadata"]] == [k for k, _ in ref_fields]
    for m, (key, f) in zip(ours["metadata"], ref_fields):
        assert m["type"] == f.types[0].name, key
        if f.types[0] == gguf.GGUFValueType.ARRAY:
            ref_items = f.contents()
            if len(f.types) > 1:  # the gguf package reports no element type for empty arrays
                assert m["element_type"] == f.types[1].name, key
            assert m["count"] == len(f.data), key
            assert m["truncated"] == (len(f.data) > 5)
            assert m["items"] == pytest.approx(list(ref_items[:5])), key
        elif f.types[0] in (gguf.GGUFValueType.FLOAT32, gguf.GGUFValueType.FLOAT64):
            assert m["value"] == pytest.approx(float(field_value(f)), rel=1e-7), key
        else:
            assert m["value"] == field_value(f), key
    assert ours["n_tensors"] == len(ref.tensors)
    assert ours["version"] == 3


def test_inspect_gemma(memra_bin, default_model):
    ours = inspect_json(memra_bin, default_model)
    assert ours["architecture"] == "gemma3"
    assert ours["version"] == 3
    assert ours["data_offset"] == 6525120  # as read by gguf.GGUFReader
    assert ours["n_tensors"] == 236
    md = {m["key"]: m for m in ours["metadata"]}
    assert md["gemma3.block_count"]["value"] == 18
    assert md["gemma3.attention.layer_norm_rms_epsilon"]["value"] == pytest.approx(1e-6)
    tokens = md["tokenizer.ggml.tokens"]
    assert (tokens["element_type"], tokens["count"]) == ("STRING", 262144)
    assert tokens["items"][:3] == ["<pad>", "<eos>", "<bos>"]
    assert md["tokenizer.ggml.add_bos_token"]["value"] is True
    tensors = {t["name"]: t for t in ours["tensors"]}
    assert tensors["token_embd.weight"]["type"] == "Q8_0"
    assert tensors["token_embd.weight"]["shape"] == [640, 262144]
    assert tensors["output_norm.weight"]["n_bytes"] == 2560
    # Internal consistency: aligned, disjoint, inside the file, totals add up.
    size = default_model.stat().st_size
    spans = sorted((t["offset"], t["offset"] + t["n_bytes"]) for t in ours["tensors"])
    assert all(a % ours["alignment"] == 0 for a, _ in spans)
    assert all(spans[i][1] <= spans[i + 1][0] for i in range(len(spans) - 1))
    assert ours["data_offset"] + spans[-1][1] <= size
    assert ours["n_parameters"] == sum(int(np.prod(t["shape"])) for t in ours["tensors"])
    assert ours["n_parameters"] == 268098176
    assert ours["tensor_bytes"] == sum(t["n_bytes"] for t in ours["tensors"])


def test_inspect_text_output(memra_bin, default_model):
    proc = subprocess.run([memra_bin, "inspect", str(default_model)], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "architecture: gemma3" in out
    assert "GGUF v3" in out
    assert "ARRAY[STRING] x262144" in out
    assert "token_embd.weight" in out and "Q8_0" in out
    assert "parameters:   268098176" in out


@pytest.fixture(scope="module")
def corpus_dir(build_dir, tmp_path_factory):
    tool = build_dir / "tests" / "gguf" / "gguf_corpus_tool"
    assert tool.exists(), f"{tool} missing: build the cpu preset"
    out = tmp_path_factory.mktemp("gguf_corpus")
    subprocess.run([tool, "corpus", out], check=True, timeout=60)
    return out


# Corpus case -> text the CLI error must contain (the field and where it was read).
EXPECTED_ERRORS = {
    "bad_magic": "magic at offset 0",
    "version_1": "GGUF version 1",
    "big_endian": "big-endian",
    "huge_kv_count": "kv_count at offset 16",
    "huge_tensor_count": "tensor_count at offset 8",
    "bad_value_type": "metadata key 'x.bad' type at offset",
    "alignment_2_pow_31": "general.alignment",
    "tensor_dim_zero": "tensor 'a.weight' dims[1] at offset",
    "tensor_unknown_type_4": "unknown GGML type id 4",
    "tensors_overlap_partially": "overlaps tensor 'a.weight'",
    "data_one_byte_short": "past the end of the file",
}


def test_inspect_malformed_exits_2(memra_bin, corpus_dir):
    files = sorted(corpus_dir.glob("*.gguf"))
    assert len(files) >= 40
    for path in files:
        proc = subprocess.run([memra_bin, "inspect", str(path)], capture_output=True, text=True,
                              timeout=30)
        if path.stem == "valid_base":
            assert proc.returncode == 0, proc.stderr
            continue
        assert proc.returncode == 2, (path.name, proc.returncode, proc.stderr)
        assert proc.stderr.startswith("memra inspect: error: "), proc.stderr
        assert str(path) in proc.stderr
        if path.stem in EXPECTED_ERRORS:
            assert EXPECTED_ERRORS[path.stem] in proc.stderr, proc.stderr


def test_inspect_usage_errors(memra_bin, tmp_path):
    missing = subprocess.run([memra_bin, "inspect", str(tmp_path / "nope.gguf")],
                             capture_output=True, text=True, timeout=30)
    assert missing.returncode == 2 and "nope.gguf" in missing.stderr
    bad_flag = subprocess.run([memra_bin, "inspect", "--bogus"], capture_output=True, text=True,
                              timeout=30)
    assert bad_flag.returncode == 2 and "--bogus" in bad_flag.stderr
