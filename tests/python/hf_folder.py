"""Small Hugging Face model folders for tests, built from the committed fixtures: a copy of a
safetensors file with zero rows appended to one tensor (a padded vocabulary), so a fixture's
weights can be served with a tokenizer of a different size."""
import json
import pathlib
import shutil
import struct

FIXTURES = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "models"


def pad_safetensors(src: pathlib.Path, dst: pathlib.Path, name: str, extra_rows: int) -> int:
    """Copies a safetensors file, appending `extra_rows` zero rows to tensor `name` (raw bytes, so
    any dtype works). Returns the new row count."""
    raw = src.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = {k: v for k, v in header.items() if k == "__metadata__"}
    tensors = sorted(((k, v) for k, v in header.items() if k != "__metadata__"),
                     key=lambda kv: kv[1]["data_offsets"][0])
    out, new_header = b"", dict(meta)
    rows = 0
    for key, info in tensors:
        begin, end = info["data_offsets"]
        blob = data[begin:end]
        shape = list(info["shape"])
        if key == name:
            row_bytes = len(blob) // shape[0]
            blob += b"\0" * (row_bytes * extra_rows)
            shape[0] += extra_rows
            rows = shape[0]
        new_header[key] = {"dtype": info["dtype"], "shape": shape,
                           "data_offsets": [len(out), len(out) + len(blob)]}
        out += blob
    head = json.dumps(new_header).encode()
    head += b" " * (-len(head) % 8)
    dst.write_bytes(struct.pack("<Q", len(head)) + head + out)
    assert rows, f"{name} not in {src}"
    return rows


def qwen2_folder(dst: pathlib.Path, n_vocab: int, tokenizer_json: pathlib.Path = None,
                 tokenizer_config: dict = None, eos_token_id: int = 2,
                 n_ctx: int = None) -> pathlib.Path:
    """The qwen2 fixture's weights (tied embeddings) padded with zero rows to `n_vocab`, with the
    given tokenizer.json and tokenizer_config.json (default: the fixture's own tokenizer) and
    optionally a longer trained context (plain RoPE: any length runs)."""
    src = FIXTURES / "qwen2"
    dst.mkdir(parents=True, exist_ok=True)
    config = json.loads((src / "config.json").read_text())
    assert config["tie_word_embeddings"] and n_vocab >= config["vocab_size"]
    pad_safetensors(src / "model.safetensors", dst / "model.safetensors",
                    "model.embed_tokens.weight", n_vocab - config["vocab_size"])
    config["vocab_size"] = n_vocab
    config["eos_token_id"] = eos_token_id
    if n_ctx:
        config["max_position_embeddings"] = n_ctx
    (dst / "config.json").write_text(json.dumps(config))
    (dst / "generation_config.json").write_text(json.dumps({"eos_token_id": eos_token_id}))
    shutil.copy(tokenizer_json or src / "tokenizer.json", dst / "tokenizer.json")
    if tokenizer_config is not None:
        (dst / "tokenizer_config.json").write_text(json.dumps(tokenizer_config))
    return dst
