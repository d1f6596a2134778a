"""Model gate (CPU) for the multimodal wrappers (*ForConditionalGeneration): memra serves their
text model. gemma3_mm and qwen3_5_mm (scripts/gen_model_fixtures.py) hold the gemma3 / qwen3_5
fixture's text weights in the layout transformers saves, plus a tiny vision tower; loaded from
safetensors and converted to GGUF they must give the text fixture's reference logits (the same
1e-4 bound and greedy tokens), log the skipped tower once, and `memra convert` must write the same
GGUF as for the text-only checkpoint. The gemma4 and qwen3_5_moe wrappers, and gemma3 in
transformers 5's in-memory layout, are assembled here from their text fixtures (renamed tensors,
a fake tower, the wrapper config). Tensors that are neither text nor a known tower are refused
by name, and the server refuses image content parts for such a model.
"""
import json
import pathlib
import shutil
import struct
import subprocess

import httpx
import numpy as np
import pytest

from server_harness import Server, real_server_binary
from test_models_fixtures import EXACT_TOL, FIXTURES, reference, rel_err, run

WRAPPERS = ["gemma3_mm", "qwen3_5_mm"]
TOWER_LINE = {"gemma3_mm": "Gemma3ForConditionalGeneration: the vision tower and multimodal "
                           "projector ({n} tensors, ",
              "qwen3_5_mm": "Qwen3_5ForConditionalGeneration: the vision tower ({n} tensors, "}


@pytest.fixture(scope="session")
def model_run(build_dir) -> pathlib.Path:
    path = build_dir / "tests" / "models" / "model_run"
    assert path.exists(), f"{path} is missing: build target model_run"
    return path


def wrapper_info(name):
    return json.loads((FIXTURES / name / "wrapper.json").read_text())


def read_safetensors(path: pathlib.Path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n:]
    return {k: (v["dtype"], v["shape"], data[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def write_safetensors(path: pathlib.Path, tensors: dict) -> None:
    header, blob = {}, bytearray()
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + bytes(blob))


def convert(memra_bin, folder, out, gguf_type="bf16"):
    proc = subprocess.run([str(memra_bin), "convert", str(folder), "-o", str(out), "--type",
                           gguf_type], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc


def gguf_contents(path):
    """Metadata (but general.name, the folder's name) and tensors (type, shape, bytes)."""
    import gguf
    reader = gguf.GGUFReader(str(path))
    fields = {}
    for name, field in reader.fields.items():
        if name == "general.name" or name.startswith("GGUF."):
            continue
        fields[name] = [bytes(np.asarray(field.parts[i]).tobytes()) for i in field.data]
    tensors = {t.name: (int(t.tensor_type), tuple(int(d) for d in t.shape),
                        bytes(np.asarray(t.data).tobytes())) for t in reader.tensors}
    return fields, tensors


@pytest.mark.parametrize("name", WRAPPERS)
def test_wrapper_fixture_is_the_text_fixture_plus_a_tower(name):
    """The fixture's premise: transformers' run of the wrapper's text path matched the text
    fixture's reference when it was generated, and the text weights are byte for byte those of
    the text fixture."""
    info = wrapper_info(name)
    assert info["max_abs_logit_diff_vs_text_reference"] <= 1e-5
    text = read_safetensors(FIXTURES / info["text_fixture"] / "model.safetensors")
    wrapper = read_safetensors(FIXTURES / name / "model.safetensors")
    for key, value in text.items():
        rest = key[len("model."):]
        wrapped = (key if key.startswith("lm_head.") else
                   f"language_model.model.{rest}" if name == "gemma3_mm" else
                   f"model.language_model.{rest}")
        assert wrapper[wrapped] == value, key
    assert len(wrapper) == len(text) + info["tower_tensors"]


@pytest.mark.parametrize("name", WRAPPERS)
def test_wrapper_safetensors_matches_the_text_reference(name, model_run):
    info = wrapper_info(name)
    ref = reference(info["text_fixture"])
    out = run(model_run, FIXTURES / name, ref)
    assert rel_err(out, ref) <= EXACT_TOL
    assert out["greedy"] == ref["greedy"]
    # The same tensors in, the same logits out, bit for bit (measured).
    text = run(model_run, FIXTURES / info["text_fixture"], ref)
    assert np.array_equal(out["logits"], text["logits"])


@pytest.mark.parametrize("name", WRAPPERS)
def test_wrapper_converts_to_the_text_models_gguf(name, model_run, memra_bin, tmp_path):
    info = wrapper_info(name)
    proc = convert(memra_bin, FIXTURES / name, tmp_path / "wrapper.gguf")
    line = TOWER_LINE[name].format(n=info["tower_tensors"])
    logged = [entry for entry in proc.stderr.splitlines() if "not loaded" in entry]
    assert len(logged) == 1 and line in logged[0], proc.stderr
    assert "memra serves this checkpoint's text model; image inputs are refused" in logged[0]
    convert(memra_bin, FIXTURES / info["text_fixture"], tmp_path / "text.gguf")
    assert gguf_contents(tmp_path / "wrapper.gguf") == gguf_contents(tmp_path / "text.gguf")
    ref = reference(info["text_fixture"])
    out = run(model_run, tmp_path / "wrapper.gguf", ref)
    assert rel_err(out, ref) <= EXACT_TOL
    assert out["greedy"] == ref["greedy"]


# Wrappers assembled from a text fixture: (architecture, model_type, text fixture, how a text
# tensor name is wrapped, a tower tensor name, the tower's words in the log line).
ASSEMBLED = {
    "gemma4": ("Gemma4ForConditionalGeneration", "gemma4", "gemma4",
               "model.language_model.", "model.audio_tower.layers.0.w", "the audio tower ("),
    "qwen3_5_moe": ("Qwen3_5MoeForConditionalGeneration", "qwen3_5_moe", "qwen3_5_moe",
                    "model.language_model.", "model.visual.merger.linear_fc1.weight",
                    "the vision tower ("),
    "gemma3_v5": ("Gemma3ForConditionalGeneration", "gemma3", "gemma3",
                  "model.language_model.", "model.multi_modal_projector.mm_input_projection_weight",
                  "the multimodal projector ("),
}


def assemble(case, folder: pathlib.Path, extra=None) -> dict:
    architecture, model_type, text_fixture, prefix, tower, _ = ASSEMBLED[case]
    src = FIXTURES / text_fixture
    folder.mkdir()
    for f in ("tokenizer.json", "generation_config.json"):
        shutil.copy(src / f, folder / f)
    text_cfg = json.loads((src / "config.json").read_text())
    text_cfg.pop("architectures")
    cfg = {"architectures": [architecture], "model_type": model_type, "text_config": text_cfg,
           "vision_config": {"hidden_size": 16}, "image_token_id": 258880,
           "tie_word_embeddings": text_cfg.get("tie_word_embeddings", True)}
    (folder / "config.json").write_text(json.dumps(cfg))
    tensors = {}
    for key, value in read_safetensors(src / "model.safetensors").items():
        tensors[key if key.startswith("lm_head.") else prefix + key[len("model."):]] = value
    tensors[tower] = ("BF16", [4, 4], bytes(32))
    tensors.update(extra or {})
    write_safetensors(folder / "model.safetensors", tensors)
    return reference(text_fixture)


@pytest.mark.parametrize("case", list(ASSEMBLED))
def test_assembled_wrapper_matches_the_text_reference(case, model_run, memra_bin, tmp_path):
    ref = assemble(case, tmp_path / case)
    out = run(model_run, tmp_path / case, ref)
    assert rel_err(out, ref) <= EXACT_TOL
    assert out["greedy"] == ref["greedy"]
    proc = convert(memra_bin, tmp_path / case, tmp_path / "w.gguf")
    assert f"{ASSEMBLED[case][0]}: {ASSEMBLED[case][5]}1 tensor, 0.0 KB) is not loaded" \
        in proc.stderr, proc.stderr


@pytest.mark.parametrize("extra, message", [
    # Qwen3.5 has no audio tower: not skipped, refused by name.
    ("model.audio_tower.layers.0.w", "tensor 'model.audio_tower.layers.0.w' is neither "
                                     "Qwen3_5MoeForConditionalGeneration's text model"),
    # The text-only layout inside a wrapper is not the wrapper's.
    ("model.layers.0.mlp.gate.weight", "tensor 'model.layers.0.mlp.gate.weight' is neither"),
    # Under the text prefix but in no name table.
    ("model.language_model.layers.0.mlp.extra.weight",
     "tensor 'model.language_model.layers.0.mlp.extra.weight' is not in the qwen35moe name table"),
])
def test_unknown_wrapper_tensors_are_refused_by_name(extra, message, memra_bin, tmp_path):
    assemble("qwen3_5_moe", tmp_path / "m", {extra: ("BF16", [4], bytes(8))})
    proc = subprocess.run([str(memra_bin), "convert", str(tmp_path / "m"), "-o",
                           str(tmp_path / "m.gguf"), "--type", "bf16"], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode != 0
    assert message in proc.stderr, proc.stderr


def test_server_refuses_image_parts_for_a_wrapper_model(build_dir):
    """The wrapper serves text: a chat request with an image part is refused by name (400)."""
    s = Server(real_server_binary(build_dir), ["--model", str(FIXTURES / "gemma3_mm"), "--ctx-size", "96", "--threads",
                        "2", "--log-level", "warn"], timeout=120)
    try:
        assert "Gemma3ForConditionalGeneration: the vision tower" in s.log_text()
        image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
        r = httpx.post(s.url + "/v1/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": [{"type": "text", "text": "what is it?"},
                                                      image]}], "max_tokens": 2})
        assert r.status_code == 400, r.text
        assert "content part type 'image_url' is not supported" in r.text
        r = httpx.post(s.url + "/v1/messages", timeout=60, json={
            "model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                             "data": "AAAA"}}]}]})
        assert r.status_code == 400, r.text
        assert "content block type 'image' is not supported" in r.text
        r = httpx.post(s.url + "/v1/chat/completions", timeout=60, json={
            "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2})
        assert r.status_code == 200, r.text
    finally:
        s.stop()
