#!/usr/bin/env python3
"""A model GGUF's tokenizer as a vocab-only GGUF (llama.cpp's ggml-vocab-*.gguf form): its
general.architecture and every tokenizer.* key (tokens, merges or scores, special ids, chat
template), no tensors. A few MB where the model is hundreds: small enough to travel to a machine
that cannot receive weights, where `memra synth --vocab-from` puts it over random weights.

    scripts/vocab_only_gguf.py MODEL.gguf OUT.gguf
"""
import argparse
import pathlib
import sys

import gguf


def copy_vocab(src: pathlib.Path, out: pathlib.Path) -> int:
    reader = gguf.GGUFReader(str(src))
    arch_field = reader.fields.get("general.architecture")
    if arch_field is None or "tokenizer.ggml.tokens" not in reader.fields:
        raise SystemExit(f"{src}: no general.architecture or tokenizer.ggml.tokens: not a model GGUF")
    writer = gguf.GGUFWriter(str(out), arch_field.contents())  # writes general.architecture
    n = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        vtype = field.types[0]
        sub = field.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type=sub)
        n += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return n


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", type=pathlib.Path)
    ap.add_argument("out", type=pathlib.Path)
    args = ap.parse_args()
    n = copy_vocab(args.model, args.out)
    print(f"wrote {args.out}: {n} tokenizer keys, {args.out.stat().st_size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
