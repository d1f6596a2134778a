#!/usr/bin/env python3
"""Whether two settings of the engine give the same bits: tests/models/model_run on one backend
run twice per model, once under each setting (--a, --b: VAR=VALUE[,VAR=VALUE...] in the
environment), the same prompt and greedy decode, and every logit row (the prompt's positions,
then each greedy step's) and every greedy token compared bit for bit. A switch that claims the
same arithmetic (a fused kernel, a moved phase) must pass; --chunk 1 makes every prompt step one
token, so that a one-token path serves each row. Teeth: the same comparison with run b's rows
shifted by one position must find differences, so a comparison that cannot fail is caught.

Needs python3 + numpy only (it runs on the GPU machine). Usage:
    scripts/same_bits.py --bin DIR --a MEMRA_X=0 --b MEMRA_X=1 [--chunk 1] [--json OUT] MODEL...
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np


def settings(text):
    """VAR=VALUE[,VAR=VALUE...] as a dict."""
    out = {}
    for item in filter(None, text.split(",")):
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise argparse.ArgumentTypeError(f"{item!r}: expected VAR=VALUE")
        out[name] = value
    return out


def model_run(args, model, tokens, env, out_dir, tag, greedy, chunk):
    """model_run's JSON and its logit rows' bits (uint32), under the settings env."""
    ids = os.path.join(out_dir, "ids.json")
    with open(ids, "w") as f:
        json.dump(tokens, f)
    raw = os.path.join(out_dir, f"logits-{tag}.f32")
    cmd = [os.path.join(args.bin, "model_run"), "--model", model, "--tokens-file", ids,
           "--chunk", str(chunk), "--greedy", str(greedy), "--all-logits", "--logits-out", raw,
           "--device", args.device]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, **env})
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    out = json.loads(proc.stdout)
    rows, cols = out["logits_file"]["rows"], out["logits_file"]["cols"]
    return out, np.fromfile(raw, dtype=np.uint32).reshape(rows, cols)


def token_ids(args, model, out_dir):
    """Seeded ids in the ordinary range of the model's vocabulary (past the first specials),
    which a two-token probe run reports."""
    probe, _ = model_run(args, model, [3, 4], {}, out_dir, "probe", 1, 2)
    vocab = int(probe["n_vocab"])
    rng = np.random.default_rng(args.seed)
    return [int(t) for t in rng.integers(min(3, vocab - 1), min(vocab, 32000),
                                         size=args.positions)]


def run(args, model, tokens, env, out_dir, tag):
    """The greedy tokens and every logit row's bits of one setting."""
    out, rows = model_run(args, model, tokens, env, out_dir, tag, args.greedy, args.chunk)
    return out.get("greedy", []), rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--bin", required=True, help="folder with model_run")
    ap.add_argument("--a", type=settings, required=True, help="VAR=VALUE[,...] of the first run")
    ap.add_argument("--b", type=settings, required=True, help="VAR=VALUE[,...] of the second run")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--chunk", type=int, default=1, help="prompt tokens a step")
    ap.add_argument("--positions", type=int, default=96)
    ap.add_argument("--greedy", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args()
    results, ok = [], True
    print(f"{'model':<44} {'rows':>5} {'rows differ':>11} {'greedy':>7} {'teeth':>7}  verdict")
    for model in args.models:
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            tokens = token_ids(args, model, tmp)
            greedy_a, rows_a = run(args, model, tokens, args.a, tmp, "a")
            greedy_b, rows_b = run(args, model, tokens, args.b, tmp, "b")
        same_shape = rows_a.shape == rows_b.shape
        differ = int((rows_a != rows_b).any(axis=1).sum()) if same_shape else -1
        same_greedy = greedy_a == greedy_b
        # Teeth: b's rows one position later must differ from a's somewhere.
        teeth = same_shape and rows_a.shape[0] > 1 and bool((rows_a[1:] != rows_b[:-1]).any())
        passed = same_shape and differ == 0 and same_greedy and teeth
        ok &= passed
        name = os.path.basename(model.rstrip("/"))
        print(f"{name:<44} {rows_a.shape[0]:>5} {differ:>11} "
              f"{'same' if same_greedy else 'DIFF':>7} {'RED' if teeth else 'MISSED':>7}  "
              f"{'PASS' if passed else 'FAIL'}")
        results.append({"model": model, "rows": int(rows_a.shape[0]), "rows_differ": differ,
                        "greedy_same": same_greedy, "greedy_a": greedy_a, "greedy_b": greedy_b,
                        "teeth_caught": teeth, "pass": passed,
                        "seconds": round(time.time() - t0, 1)})
    print("same bits:", "ALL PASS" if ok else "FAIL")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"command": " ".join(sys.argv), "commit": os.environ.get("MEMRA_COMMIT", ""),
                       "a": args.a, "b": args.b, "device": args.device, "chunk": args.chunk,
                       "positions": args.positions, "greedy": args.greedy, "models": results,
                       "pass": ok}, f, indent=1)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
