"""Model archive oracle tests: tiny random Hugging Face checkpoints (safetensors + config.json) for
each supported architecture, opened by tests/archive/archive_dump, checked against numpy: GGUF
names, ggml-order shapes, values (llama's q/k row permutation and gemma3's norm + 1 done as
llama.cpp's converter does), and the config -> GGUF metadata mapping. Also checks that an HF
folder and the packaged GGUF of the same model (Gemma 3 270M) yield the same gemma3.* metadata."""
import json
import pathlib
import struct
import subprocess

import numpy as np
import pytest

ARCHS = {
    "llama": ("LlamaForCausalLM", "llama"),
    "qwen2": ("Qwen2ForCausalLM", "qwen2"),
    "qwen3": ("Qwen3ForCausalLM", "qwen3"),
    "gemma3": ("Gemma3ForCausalLM", "gemma3_text"),
}
HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 32, 48, 2, 4, 2, 8, 50


@pytest.fixture(scope="session")
def archive_dump(build_dir) -> pathlib.Path:
    path = build_dir / "tests" / "archive" / "archive_dump"
    assert path.exists(), f"{path} is missing: build target archive_dump"
    return path


def bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns, round to nearest even (as torch does)."""
    u = a.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


def write_safetensors(path: pathlib.Path, tensors: dict) -> None:
    """tensors: name -> (dtype string, shape, raw bytes); header padded to 8 bytes."""
    header, offset, blobs = {"__metadata__": {"format": "pt"}}, 0, []
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def hf_tensors(arch: str, rng: np.random.Generator, tied: bool) -> dict:
    """HF name -> float32 array with HF shapes ([out, in] for linear layers)."""
    t = {"model.embed_tokens.weight": (VOCAB, HIDDEN), "model.norm.weight": (HIDDEN,)}
    if not tied:
        t["lm_head.weight"] = (VOCAB, HIDDEN)
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        t |= {p + "self_attn.q_proj.weight": (HEADS * HEAD_DIM, HIDDEN),
              p + "self_attn.k_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
              p + "self_attn.v_proj.weight": (KV_HEADS * HEAD_DIM, HIDDEN),
              p + "self_attn.o_proj.weight": (HIDDEN, HEADS * HEAD_DIM),
              p + "mlp.gate_proj.weight": (FFN, HIDDEN), p + "mlp.up_proj.weight": (FFN, HIDDEN),
              p + "mlp.down_proj.weight": (HIDDEN, FFN), p + "input_layernorm.weight": (HIDDEN,),
              p + "post_attention_layernorm.weight": (HIDDEN,)}
        if arch in ("qwen2", "llama"):
            t |= {p + "self_attn.q_proj.bias": (HEADS * HEAD_DIM,),
                  p + "self_attn.k_proj.bias": (KV_HEADS * HEAD_DIM,),
                  p + "self_attn.v_proj.bias": (KV_HEADS * HEAD_DIM,)}
        if arch in ("qwen3", "gemma3"):
            t |= {p + "self_attn.q_norm.weight": (HEAD_DIM,), p + "self_attn.k_norm.weight": (HEAD_DIM,)}
        if arch == "gemma3":
            t |= {p + "pre_feedforward_layernorm.weight": (HIDDEN,),
                  p + "post_feedforward_layernorm.weight": (HIDDEN,)}
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in t.items()}


def make_config(arch: str, tied: bool) -> dict:
    hf_arch, model_type = ARCHS[arch]
    cfg = {"architectures": [hf_arch], "model_type": model_type, "hidden_size": HIDDEN,
           "intermediate_size": FFN, "num_hidden_layers": LAYERS, "num_attention_heads": HEADS,
           "num_key_value_heads": KV_HEADS, "head_dim": HEAD_DIM, "vocab_size": VOCAB,
           "max_position_embeddings": 512, "rms_norm_eps": 1e-5, "tie_word_embeddings": tied,
           "bos_token_id": 1, "eos_token_id": 2}
    if arch == "gemma3":
        cfg |= {"sliding_window": 64, "query_pre_attn_scalar": 16, "layer_types":
                ["sliding_attention", "full_attention"], "rope_parameters": {
                    "full_attention": {"rope_type": "default", "rope_theta": 1e6},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}}}
    else:
        cfg["rope_theta"] = 50000.0
    if arch == "llama":
        cfg["attention_bias"] = True
    return cfg


def make_model(folder: pathlib.Path, arch: str, dtype: str, tied: bool, shards: int = 1, seed: int = 0):
    folder.mkdir(parents=True, exist_ok=True)
    tensors = hf_tensors(arch, np.random.default_rng(seed), tied)
    stored = {}
    for name, a in tensors.items():
        if dtype == "BF16":
            bits = bf16_bits(a)
            stored[name] = ("BF16", a.shape, bits.tobytes())
            tensors[name] = bf16_values(bits).reshape(a.shape)
        elif dtype == "F16":
            h = a.astype(np.float16)
            stored[name] = ("F16", a.shape, h.tobytes())
            tensors[name] = h.astype(np.float32)
        else:
            stored[name] = ("F32", a.shape, a.tobytes())
    names = list(stored)
    if shards == 1:
        write_safetensors(folder / "model.safetensors", stored)
    else:
        weight_map = {}
        for s in range(shards):
            part = names[s::shards]
            shard = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
            write_safetensors(folder / shard, {n: stored[n] for n in part})
            weight_map |= {n: shard for n in part}
        (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    (folder / "config.json").write_text(json.dumps(make_config(arch, tied)))
    (folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 3]}))
    return tensors


def dump(archive_dump, path, values=True, expect_rc=0):
    args = [str(archive_dump), str(path)] + (["--values"] if values else [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == expect_rc, r.stderr
    return json.loads(r.stdout) if expect_rc == 0 else r.stderr


def gguf_name(arch: str, hf: str) -> str:
    glob = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
            "lm_head.weight": "output.weight"}
    if hf in glob:
        return glob[hf]
    _, _, layer, rest = hf.split(".", 3)
    table = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm",
             "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
             "post_attention_layernorm": "post_attention_norm" if arch == "gemma3" else "ffn_norm",
             "pre_feedforward_layernorm": "ffn_norm", "post_feedforward_layernorm": "post_ffw_norm"}
    module, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{table[module]}.{kind}"


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def expected_values(arch: str, hf: str, a: np.ndarray) -> np.ndarray:
    if arch == "llama" and ".q_proj." in hf:
        return llama_permute(a, HEADS)
    if arch == "llama" and ".k_proj." in hf:
        return llama_permute(a, KV_HEADS)
    if arch == "gemma3" and hf.endswith("norm.weight"):
        return (a.astype(np.float32) + np.float32(1)).astype(np.float32)
    return a


@pytest.mark.parametrize("arch", list(ARCHS))
@pytest.mark.parametrize("dtype,shards", [("F32", 1), ("BF16", 2), ("F16", 3)])
def test_names_shapes_values(tmp_path, archive_dump, arch, dtype, shards):
    tied = arch == "gemma3"
    tensors = make_model(tmp_path / arch, arch, dtype, tied, shards)
    out = dump(archive_dump, tmp_path / arch)
    assert out["kind"] == "hf_folder"
    got = {t["name"]: t for t in out["tensors"]}
    assert len(got) == len(tensors)
    for hf, a in tensors.items():
        t = got[gguf_name(arch, hf)]
        assert t["ne"] == list(reversed(a.shape)), hf
        norm_plus_one = arch == "gemma3" and hf.endswith("norm.weight")
        assert t["dtype"] == ("F32" if norm_plus_one else dtype), hf
        want = expected_values(arch, hf, a)
        np.testing.assert_array_equal(np.array(t["values"], dtype=np.float32).reshape(a.shape), want, err_msg=hf)


def test_llama_permutation_moves_rows(tmp_path, archive_dump):
    """Teeth: the permuted q differs from HF's layout, and row j*2+p is HF row p*hd/2+j."""
    tensors = make_model(tmp_path / "m", "llama", "F32", tied=False)
    got = {t["name"]: t for t in dump(archive_dump, tmp_path / "m")["tensors"]}
    q_hf = tensors["model.layers.0.self_attn.q_proj.weight"]
    q = np.array(got["blk.0.attn_q.weight"]["values"], dtype=np.float32).reshape(q_hf.shape)
    assert not np.array_equal(q, q_hf)
    np.testing.assert_array_equal(q[1], q_hf[HEAD_DIM // 2])
    np.testing.assert_array_equal(q[HEAD_DIM + 2], q_hf[HEAD_DIM + 1])
    # q/k permuted, v untouched.
    v_hf = tensors["model.layers.1.self_attn.v_proj.weight"]
    np.testing.assert_array_equal(np.array(got["blk.1.attn_v.weight"]["values"], dtype=np.float32).reshape(v_hf.shape), v_hf)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_config_metadata(tmp_path, archive_dump, arch):
    make_model(tmp_path / "m", arch, "F32", tied=arch == "gemma3")
    out = dump(archive_dump, tmp_path / "m", values=False)
    md, types = out["metadata"], out["metadata_types"]
    a = arch
    assert md["general.architecture"] == arch
    assert md["general.name"] == "m"
    expect = {f"{a}.embedding_length": HIDDEN, f"{a}.block_count": LAYERS, f"{a}.feed_forward_length": FFN,
              f"{a}.context_length": 512, f"{a}.attention.head_count": HEADS,
              f"{a}.attention.head_count_kv": KV_HEADS, f"{a}.attention.key_length": HEAD_DIM,
              f"{a}.attention.value_length": HEAD_DIM, "tokenizer.ggml.bos_token_id": 1,
              "tokenizer.ggml.eos_token_id": 2}
    for key, value in expect.items():
        assert md[key] == value, key
        assert types[key] == "UINT32", key
    assert md["tokenizer.ggml.eos_token_ids"] == [2, 3]
    assert types[f"{a}.attention.layer_norm_rms_epsilon"] == "FLOAT32"
    assert md[f"{a}.attention.layer_norm_rms_epsilon"] == pytest.approx(1e-5)
    if arch == "gemma3":
        assert md["gemma3.rope.freq_base"] == 1e6 and md["gemma3.rope.freq_base_swa"] == 1e4
        assert md["gemma3.attention.sliding_window"] == 64
        assert md["gemma3.attention.sliding_window_pattern"] == [True, False]
        assert md["gemma3.attention.scale"] == pytest.approx(0.25)
    else:
        assert md[f"{a}.rope.freq_base"] == 50000.0
        assert md[f"{a}.rope.dimension_count"] == HEAD_DIM


def test_llama3_rope_freqs(tmp_path, archive_dump):
    make_model(tmp_path / "m", "llama", "F32", tied=False)
    cfg = json.loads((tmp_path / "m/config.json").read_text())
    cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                           "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    (tmp_path / "m/config.json").write_text(json.dumps(cfg))
    out = dump(archive_dump, tmp_path / "m")
    rope = next(t for t in out["tensors"] if t["name"] == "rope_freqs.weight")
    # llama.cpp's LlamaModel.generate_extra_tensors, in float64.
    freqs = 1.0 / (50000.0 ** (np.arange(0, HEAD_DIM, 2) / HEAD_DIM))
    want = []
    for f in freqs:
        wavelen = 2 * np.pi / f
        if wavelen < 64 / 4.0:
            want.append(1.0)
        elif wavelen > 64 / 1.0:
            want.append(8.0)
        else:
            smooth = (64 / wavelen - 1.0) / (4.0 - 1.0)
            want.append(1 / ((1 - smooth) / 8.0 + smooth))
    np.testing.assert_allclose(rope["values"], want, rtol=1e-6)
    assert rope["ne"] == [HEAD_DIM // 2]
    assert out["metadata"]["llama.rope.scaling.llama3.factor"] == 8.0


def test_reference_writer_and_refusals(tmp_path, archive_dump):
    """A file from the safetensors package reads; unknown tensors and pickles are refused by name."""
    from safetensors.numpy import save_file

    rng = np.random.default_rng(1)
    make_model(tmp_path / "m", "qwen3", "F32", tied=True)
    tensors = hf_tensors("qwen3", rng, tied=True)
    (tmp_path / "m/model.safetensors").unlink()
    save_file(tensors, str(tmp_path / "m/model.safetensors"))
    got = {t["name"]: t for t in dump(archive_dump, tmp_path / "m")["tensors"]}
    np.testing.assert_array_equal(np.array(got["blk.1.ffn_down.weight"]["values"], dtype=np.float32),
                                  tensors["model.layers.1.mlp.down_proj.weight"].ravel())

    save_file(tensors | {"model.layers.0.mlp.extra.weight": np.zeros(3, np.float32)},
              str(tmp_path / "m/model.safetensors"))
    err = dump(archive_dump, tmp_path / "m", expect_rc=2)
    assert "model.layers.0.mlp.extra.weight" in err and "not in the qwen3 name table" in err

    (tmp_path / "m/model.safetensors").unlink()
    (tmp_path / "m/pytorch_model.bin").write_bytes(b"\x80\x04not unpickled")
    err = dump(archive_dump, tmp_path / "m", expect_rc=2)
    assert "pickle" in err and "runs arbitrary code" in err
    err = dump(archive_dump, tmp_path / "m/pytorch_model.bin", expect_rc=2)
    assert "pickle" in err

    cfg = json.loads((tmp_path / "m/config.json").read_text())
    (tmp_path / "m/config.json").write_text(json.dumps(cfg | {"architectures": ["PaliGemmaForConditionalGeneration"]}))
    err = dump(archive_dump, tmp_path / "m", expect_rc=2)
    assert "architecture 'PaliGemmaForConditionalGeneration' (model_type 'qwen3') is not" in err


def test_untied_model_needs_lm_head(tmp_path, archive_dump):
    make_model(tmp_path / "m", "qwen2", "F32", tied=True)
    cfg = json.loads((tmp_path / "m/config.json").read_text())
    (tmp_path / "m/config.json").write_text(json.dumps(cfg | {"tie_word_embeddings": False}))
    assert "no lm_head.weight" in dump(archive_dump, tmp_path / "m", expect_rc=2)


def test_gemma3_hf_metadata_matches_packaged_gguf(tmp_path, archive_dump, default_model):
    """gemma-3-270m's config.json values, mapped, agree with llama.cpp's GGUF of the model on every
    gemma3.* key the GGUF has, in value and type, and on bos/eos."""
    gguf_md = dump(archive_dump, default_model, values=False)
    folder = tmp_path / "gemma-3-270m"
    folder.mkdir()
    cfg = {"architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text", "hidden_size": 640,
           "intermediate_size": 2048, "num_hidden_layers": 18, "num_attention_heads": 4,
           "num_key_value_heads": 1, "head_dim": 256, "vocab_size": 262144,
           "max_position_embeddings": 32768, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
           "rope_local_base_freq": 10000.0, "sliding_window": 512, "query_pre_attn_scalar": 256,
           "layer_types": ["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
           "rope_scaling": None, "bos_token_id": 2, "eos_token_id": 1, "pad_token_id": 0}
    (folder / "config.json").write_text(json.dumps(cfg))
    write_safetensors(folder / "model.safetensors", {
        "model.embed_tokens.weight": ("BF16", (4, 640), bytes(4 * 640 * 2))})  # shape unchecked here
    hf_md = dump(archive_dump, folder, values=False)
    compared = 0
    for key, value in gguf_md["metadata"].items():
        if key.startswith("gemma3.") or key in ("tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                                                "tokenizer.ggml.padding_token_id", "general.architecture"):
            want = pytest.approx(value, rel=1e-7) if isinstance(value, float) else value
            assert hf_md["metadata"].get(key) == want, key
            assert hf_md["metadata_types"][key] == gguf_md["metadata_types"][key], key
            compared += 1
    assert compared >= 15


def test_hub_cache_snapshot_is_named_after_the_repo(tmp_path, archive_dump):
    """A snapshot folder (models--org--name/snapshots/<commit>/) opens with general.name = name."""
    snap = tmp_path / "hub/models--org--tiny-llama/snapshots" / ("ab" * 20)
    make_model(snap, "llama", "F32", tied=True)
    assert dump(archive_dump, snap, values=False)["metadata"]["general.name"] == "tiny-llama"
