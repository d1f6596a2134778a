#!/usr/bin/env python3
"""Where the CUDA backend's activations leave the CPU backend's, op by op and layer by layer.

Runs tests/models/model_run --trace on the same prompt on both devices and prints, for every
named intermediate (in forward order, prefill chunk only), the relative difference of sum |x|
and of its first values (|cuda - cpu| / max |cpu| over the traced head). A layer type whose
error jumps where the others' do not is the place to look; a flat profile says the difference
is the f16 matrix inputs' rounding carried through the stack.

Needs python3 only (it runs on the GPU machine). Usage:
    scripts/gpu_trace_diff.py --bin DIR MODEL [--positions 64] [--top 12]
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile


def trace(bin_dir, model, ids_file, device):
    cmd = [os.path.join(bin_dir, "model_run"), "--model", model, "--tokens-file", ids_file,
           "--chunk", "1024", "--trace", "--device", device]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return json.loads(proc.stdout)["trace"]


def rel(a, b):
    scale = max(max(abs(x) for x in a), 1e-30)
    return max(abs(x - y) for x, y in zip(a, b)) / scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="folder with model_run")
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--top", type=int, default=12, help="also list the N largest head errors")
    ap.add_argument("model")
    args = ap.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        ids = os.path.join(tmp, "ids.json")
        with open(ids, "w") as f:
            json.dump([rng.randrange(3, 120) for _ in range(args.positions)], f)
        cpu = trace(args.bin, args.model, ids, "cpu")
        cuda = trace(args.bin, args.model, ids, "cuda")
    if len(cpu) != len(cuda):
        print(f"trace lengths differ: cpu {len(cpu)}, cuda {len(cuda)} (comparing the common prefix)")
    rows = []
    for a, b in zip(cpu, cuda):
        if (a["name"], a["layer"]) != (b["name"], b["layer"]):
            print(f"trace order differs at {a['name']}/{a['layer']} vs {b['name']}/{b['layer']}")
            break
        s = abs(b["sum_abs"] - a["sum_abs"]) / max(a["sum_abs"], 1e-30)
        rows.append((a["name"], a["layer"], s, rel(a["head"], b["head"])))
    print(f"{'op':28} {'layer':>5} {'sum|x| rel':>11} {'head rel':>10}")
    for name, layer, s, h in rows:
        print(f"{name:28} {layer:5d} {s:11.2e} {h:10.2e}")
    print(f"\nlargest head errors ({args.model}):")
    for name, layer, s, h in sorted(rows, key=lambda r: -r[3])[:args.top]:
        print(f"{name:28} {layer:5d} {s:11.2e} {h:10.2e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
