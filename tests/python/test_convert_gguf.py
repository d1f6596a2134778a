"""`memra convert` gate: tiny random Hugging Face checkpoints (llama, qwen3; safetensors in F32,
F16 and BF16, a SentencePiece-style BPE tokenizer.json built with `tokenizers`) converted to every --type.
The output must read back in the gguf package's reader with standard names and keys, the
tokenizer and chat template, the types the mix policy promises, and values within each type's
error of the source."""
import json
import pathlib
import struct
import subprocess

import numpy as np
import pytest
from gguf import GGMLQuantizationType as T
from gguf import GGUFReader, quants

TEMPLATE = "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
# Relative RMS error bound per stored type against the F32 source (Gaussian weights).
REL_ERROR = {T.F32: 0.0, T.F16: 1e-3, T.BF16: 8e-3, T.Q8_0: 1e-2, T.Q6_K: 2.5e-2, T.Q5_K: 5e-2,
             T.Q5_0: 6e-2, T.Q5_1: 6e-2, T.Q4_K: 0.1}
LLAMA_FTYPE = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_k_m": 15, "q5_k_m": 17, "q6_k": 18}
MATRIX_TYPE = {"f32": T.F32, "f16": T.F16, "bf16": T.BF16, "q8_0": T.Q8_0, "q4_k_m": T.Q4_K,
               "q5_k_m": T.Q5_K, "q6_k": T.Q6_K}


def write_safetensors(path: pathlib.Path, tensors: dict[str, tuple[str, np.ndarray]]):
    """safetensors by hand so BF16 (no numpy dtype) can be written: name -> (dtype, array)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        if dtype == "BF16":  # round-to-nearest-even f32 -> bf16
            bits = arr.astype(np.float32).view(np.uint32).astype(np.uint64)
            raw = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        else:
            raw = arr.astype({"F32": np.float32, "F16": np.float16}[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    head = json.dumps(header).encode()
    head += b" " * (-len(head) % 8)
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def source_as_f32(dtype: str, arr: np.ndarray) -> np.ndarray:
    if dtype == "BF16":
        bits = arr.astype(np.float32).view(np.uint32).astype(np.uint64)
        return (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    return arr.astype({"F32": np.float32, "F16": np.float16}[dtype]).astype(np.float32)


def build_tokenizer(folder: pathlib.Path) -> int:
    """A Llama-2 style tokenizer.json (SentencePiece BPE with byte fallback) built with the
    `tokenizers` library: <unk> <s> </s>, the 256 byte tokens, letters and a few merges."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    vocab |= {f"<0x{b:02X}>": 3 + b for b in range(256)}
    for ch in "\u2581abcdefghijklmnopqrstuvwxyzTHE":
        vocab.setdefault(ch, len(vocab))
    merges = [("\u2581", "t"), ("h", "e"), ("\u2581t", "he"), ("\u2581", "a"), ("e", "r"), ("i", "n")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    tok = Tokenizer(models.BPE(vocab, merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    tok.add_special_tokens(["<unk>", "<s>", "</s>"])
    tok.save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": True,
        "chat_template": TEMPLATE, "tokenizer_class": "LlamaTokenizerFast"}))
    assert tok.encode("the cat").tokens[:2] == ["\u2581the", "\u2581"]
    return tok.get_vocab_size()


def make_checkpoint(folder: pathlib.Path, arch: str, hidden: int, ffn: int, n_head: int,
                    n_kv: int, dtype: str, n_layer: int = 2, tied: bool = False, seed: int = 0):
    """A random-weight HF folder; returns {hf_name: (dtype, array)} of what it wrote."""
    folder.mkdir(parents=True)
    vocab = build_tokenizer(folder)
    head_dim = hidden // n_head
    rng = np.random.default_rng(seed)
    w = lambda *shape: rng.normal(0, 0.05, shape).astype(np.float32)
    t = {"model.embed_tokens.weight": w(vocab, hidden), "model.norm.weight": 1 + w(hidden)}
    if not tied:
        t["lm_head.weight"] = w(vocab, hidden)
    for i in range(n_layer):
        p = f"model.layers.{i}."
        t |= {p + "self_attn.q_proj.weight": w(n_head * head_dim, hidden),
              p + "self_attn.k_proj.weight": w(n_kv * head_dim, hidden),
              p + "self_attn.v_proj.weight": w(n_kv * head_dim, hidden),
              p + "self_attn.o_proj.weight": w(hidden, n_head * head_dim),
              p + "mlp.gate_proj.weight": w(ffn, hidden), p + "mlp.up_proj.weight": w(ffn, hidden),
              p + "mlp.down_proj.weight": w(hidden, ffn),
              p + "input_layernorm.weight": 1 + w(hidden),
              p + "post_attention_layernorm.weight": 1 + w(hidden)}
        if arch == "qwen3":
            t |= {p + "self_attn.q_norm.weight": 1 + w(head_dim), p + "self_attn.k_norm.weight": 1 + w(head_dim)}
    # Norms in F32 as checkpoints usually keep them; matrices in the requested dtype.
    typed = {k: ("F32" if v.ndim == 1 else dtype, v) for k, v in t.items()}
    write_safetensors(folder / "model.safetensors", typed)
    config = {"architectures": ["LlamaForCausalLM" if arch == "llama" else "Qwen3ForCausalLM"],
              "model_type": arch, "hidden_size": hidden, "intermediate_size": ffn,
              "num_hidden_layers": n_layer, "num_attention_heads": n_head, "num_key_value_heads": n_kv,
              "head_dim": head_dim, "vocab_size": vocab, "max_position_embeddings": 512,
              "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "hidden_act": "silu",
              "tie_word_embeddings": tied, "bos_token_id": 0, "eos_token_id": 1}
    (folder / "config.json").write_text(json.dumps(config))
    return typed, config


def gguf_name(hf: str) -> str:
    table = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    if hf in table:
        return table[hf]
    parts = hf.split(".")
    layer, rest = parts[2], ".".join(parts[3:])
    sub = {"self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
           "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
           "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
           "mlp.down_proj.weight": "ffn_down.weight", "input_layernorm.weight": "attn_norm.weight",
           "post_attention_layernorm.weight": "ffn_norm.weight",
           "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight"}
    return f"blk.{layer}.{sub[rest]}"


def llama_permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """llama.cpp's converter reorders q/k rows per head from (2, d/2) to (d/2, 2)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def expected_source(typed, config, arch) -> dict[str, np.ndarray]:
    out = {}
    for hf, (dtype, arr) in typed.items():
        v = source_as_f32(dtype, arr)
        name = gguf_name(hf)
        if arch == "llama" and name.endswith("attn_q.weight"):
            v = llama_permute(v, config["num_attention_heads"])
        elif arch == "llama" and name.endswith("attn_k.weight"):
            v = llama_permute(v, config["num_key_value_heads"])
        out[name] = v
    return out


def convert(memra_bin, folder, out, type_name, check=True):
    proc = subprocess.run([str(memra_bin), "convert", str(folder), "-o", str(out), "--type", type_name],
                          capture_output=True, text=True, timeout=120)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def read_field(reader: GGUFReader, key: str):
    field = reader.get_field(key)
    assert field is not None, f"missing metadata key {key}"
    return field.contents()


def check_values(reader: GGUFReader, source: dict[str, np.ndarray]):
    names = {t.name for t in reader.tensors}
    assert names == set(source), f"names differ: {sorted(names ^ set(source))}"
    for t in reader.tensors:
        ref = source[t.name]
        got = quants.dequantize(t.data, t.tensor_type).reshape(ref.shape)
        if t.tensor_type == T.F32 or (ref.ndim == 1):
            assert np.array_equal(got, ref), t.name
            continue
        rel = np.sqrt(np.mean((got - ref) ** 2) / np.mean(ref ** 2))
        assert rel <= REL_ERROR[t.tensor_type], f"{t.name} {t.tensor_type.name}: {rel:.4g}"


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("hf") / "llama"
    typed, config = make_checkpoint(folder, "llama", hidden=256, ffn=512, n_head=4, n_kv=2, dtype="F32", n_layer=8)
    return folder, typed, config


@pytest.mark.parametrize("type_name", list(LLAMA_FTYPE))
def test_convert_llama_every_type(memra_bin, tmp_path, llama_dir, type_name):
    folder, typed, config = llama_dir
    out = tmp_path / f"llama-{type_name}.gguf"
    proc = convert(memra_bin, folder, out, type_name)
    assert "converting" in proc.stderr  # plain progress lines when stderr is not a terminal
    reader = GGUFReader(out)
    assert read_field(reader, "general.architecture") == "llama"
    assert read_field(reader, "general.file_type") == LLAMA_FTYPE[type_name]
    assert read_field(reader, "general.quantization_version") == 2
    assert read_field(reader, "llama.block_count") == 8
    assert read_field(reader, "llama.embedding_length") == 256
    assert read_field(reader, "tokenizer.ggml.model") == "llama"
    assert len(read_field(reader, "tokenizer.ggml.tokens")) == config["vocab_size"]
    assert read_field(reader, "tokenizer.chat_template") == TEMPLATE
    types = {t.name: t.tensor_type for t in reader.tensors}
    assert types["output_norm.weight"] == T.F32 and types["blk.0.attn_norm.weight"] == T.F32
    base = MATRIX_TYPE[type_name]
    assert types["blk.3.attn_q.weight"] == base
    if type_name in ("q4_k_m", "q5_k_m"):
        assert types["output.weight"] == T.Q6_K
        assert types["token_embd.weight"] == base
        # use_more_bits over 8 layers: 0, 7 (first/last eighth) and 3, 6 ((i - 1) % 3 == 2).
        for i in range(8):
            more = i in (0, 3, 6, 7)
            assert types[f"blk.{i}.attn_v.weight"] == (T.Q6_K if more else base), i
            assert types[f"blk.{i}.ffn_down.weight"] == (T.Q6_K if more else base), i
    elif type_name == "q6_k":
        assert types["output.weight"] == T.Q6_K
    check_values(reader, expected_source(typed, config, "llama"))
    # memra's own reader agrees on every tensor's type and shape.
    inspect = subprocess.run([str(memra_bin), "inspect", "--json", str(out)], capture_output=True,
                             text=True, timeout=60)
    assert inspect.returncode == 0, inspect.stderr
    ours = {t["name"]: (t["type"], t["shape"]) for t in json.loads(inspect.stdout)["tensors"]}
    assert ours == {t.name: (t.tensor_type.name, [int(d) for d in t.shape]) for t in reader.tensors}


@pytest.mark.parametrize("type_name", ["q4_k_m", "q8_0", "bf16"])
def test_convert_qwen3_odd_sizes_fall_back(memra_bin, tmp_path, type_name):
    """hidden 96 is no multiple of 256 (K types fall back to Q5_0/Q5_1/Q8_0) and ffn 200 is no
    multiple of 32 (ffn_down falls back to F16); source weights in BF16, tied embeddings."""
    folder = tmp_path / "qwen3"
    typed, config = make_checkpoint(folder, "qwen3", hidden=96, ffn=200, n_head=2, n_kv=1,
                                    dtype="BF16", tied=True, seed=5)
    out = tmp_path / "qwen3.gguf"
    convert(memra_bin, folder, out, type_name)
    reader = GGUFReader(out)
    assert read_field(reader, "general.architecture") == "qwen3"
    types = {t.name: t.tensor_type for t in reader.tensors}
    assert "output.weight" not in types
    assert types["blk.0.attn_q_norm.weight"] == T.F32
    if type_name == "q4_k_m":
        assert types["token_embd.weight"] == T.Q8_0  # the (tied) output: Q6_K -> Q8_0
        assert types["blk.1.attn_q.weight"] == T.Q5_0  # Q4_K -> Q5_0
        assert types["blk.0.ffn_down.weight"] == T.F16  # 200 columns: no block type fits
    elif type_name == "q8_0":
        assert types["blk.1.attn_q.weight"] == T.Q8_0
        assert types["blk.0.ffn_down.weight"] == T.F16
    else:
        assert types["blk.1.attn_q.weight"] == T.BF16
    source = expected_source(typed, config, "qwen3")
    if type_name == "bf16":  # BF16 -> BF16 is a byte copy: exact
        for t in reader.tensors:
            if t.tensor_type == T.BF16:
                got = quants.dequantize(t.data, T.BF16).reshape(source[t.name].shape)
                assert np.array_equal(got, source[t.name]), t.name
    check_values(reader, source)


def test_convert_refuses_clearly(memra_bin, tmp_path, llama_dir):
    folder, _, _ = llama_dir
    proc = convert(memra_bin, folder, tmp_path / "x.gguf", "q3_k_s", check=False)
    assert proc.returncode == 2 and "q4_k_m" in proc.stderr
    proc = convert(memra_bin, tmp_path / "missing", tmp_path / "x.gguf", "f16", check=False)
    assert proc.returncode == 2
    assert not (tmp_path / "x.gguf").exists()
    # A NaN in a weight is refused for a quantized type, naming the tensor.
    bad = tmp_path / "nan"
    typed, _ = make_checkpoint(bad, "llama", hidden=256, ffn=256, n_head=4, n_kv=4, dtype="F32", n_layer=1)
    typed["model.layers.0.mlp.up_proj.weight"][1][7] = np.nan
    write_safetensors(bad / "model.safetensors", typed)
    proc = convert(memra_bin, bad, tmp_path / "nan.gguf", "q8_0", check=False)
    assert proc.returncode == 2 and "blk.0.ffn_up.weight" in proc.stderr and "NaN" in proc.stderr
    assert not (tmp_path / "nan.gguf").exists()


def test_convert_progress_bar_on_terminal(memra_bin, tmp_path, llama_dir):
    """With stderr on a terminal the bar is redrawn in place (carriage returns), ending at 100%."""
    import os
    import pty
    folder, _, _ = llama_dir
    leader, follower = pty.openpty()
    # Read while it runs so a full terminal buffer never blocks the writer.
    proc = subprocess.Popen([str(memra_bin), "convert", str(folder), "-o", str(tmp_path / "tty.gguf"),
                             "--type", "q8_0"], stdout=subprocess.DEVNULL, stderr=follower)
    os.close(follower)
    chunks = []
    try:
        while True:
            try:
                data = os.read(leader, 65536)
            except OSError:  # EIO: the child closed its side
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(leader)
        proc.wait(timeout=120)
    err = b"".join(chunks).decode()
    assert proc.returncode == 0, err
    assert err.count("\r") >= 10, err  # one redraw per tensor
    assert "[" + "#" * 30 + "] 100%" in err, err
