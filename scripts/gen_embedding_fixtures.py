#!/usr/bin/env python3
"""Writes the embeddings gate's reference: transformers' final-norm hidden states of the tiny
model fixtures (tests/fixtures/models/<arch>, made by gen_model_fixtures.py), pooled by the last
token, the mean and the first (CLS) token, for a few inputs cut from each fixture's prompt.

It loads the committed checkpoints as they are (bf16 values, computed in float32) and never
rewrites them or reference.json. Run in the fixture venv (transformers 5.17 + torch):
    /work/venv-fixtures/bin/python scripts/gen_embedding_fixtures.py [--fixtures DIR]

Per architecture it writes <arch>/embeddings.json:
  inputs   token id lists (the prompt, a cut, a shifted cut, a 1-token input)
  last, mean, cls   pooled vectors [len(inputs) x hidden], float32, not normalized
"""
import argparse
import json
import pathlib

import torch
import transformers

ARCHS = ["llama", "qwen2", "qwen3", "gemma3", "qwen3_moe", "qwen3_moe_sparse_step", "gemma4",
         "qwen3_5", "qwen3_5_moe", "gemma4_moe"]


def inputs_of(prompt):
    return [prompt, prompt[:20], prompt[5:37], prompt[7:8]]


def pooled(model, ids):
    with torch.no_grad():
        h = model.model(torch.tensor([ids])).last_hidden_state[0]  # after the final norm
    return {"last": h[-1], "mean": h.mean(dim=0), "cls": h[0]}


def generate(fixture_dir):
    ref = json.loads((fixture_dir / "reference.json").read_text())
    model = transformers.AutoModelForCausalLM.from_pretrained(
        fixture_dir, dtype=torch.float32, attn_implementation="eager").eval()
    inputs = inputs_of(ref["prompt"])
    out = {"arch": ref["arch"], "transformers": transformers.__version__,
           "torch": torch.__version__, "inputs": inputs, "last": [], "mean": [], "cls": []}
    for ids in inputs:
        for name, v in pooled(model, ids).items():
            out[name].append([round(float(x), 7) for x in v])
    (fixture_dir / "embeddings.json").write_text(json.dumps(out, separators=(",", ":")) + "\n")
    print(f"{ref['arch']}: {len(inputs)} inputs, hidden {len(out['last'][0])}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    root = pathlib.Path(__file__).resolve().parents[1]
    parser.add_argument("--fixtures", type=pathlib.Path, default=root / "tests/fixtures/models")
    parser.add_argument("--arch", nargs="*", default=ARCHS)
    args = parser.parse_args()
    for arch in args.arch:
        generate(args.fixtures / arch)


if __name__ == "__main__":
    main()
