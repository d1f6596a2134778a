#!/usr/bin/env python3
"""The GPU model gate: the CUDA backend against the CPU backend (the float32 oracle) on the same
weights, through tests/models/model_run. Per model: teacher-forced logits over P prompt positions
(top-1 agreement, mean KL(cpu || cuda), worst |cuda - cpu| / max |cpu| per row) and G greedy
tokens (identical). Teeth: the same comparison with the CUDA rows shifted by one position must
fail, so a gate that cannot fail is caught.

Mixture-of-experts models: a token's top-k experts are a discontinuous function of its router
logits, so where the CPU's k-th and (k+1)-th experts are closer than the backends' rounding
difference, the two backends route that token differently and its output moves by a whole
expert's share. The gate therefore runs the CUDA side a second time with the CPU's routing pinned
(model_run --routes-out / --routes-in) and holds that run to the thresholds and the greedy rule;
the free run's metrics are reported beside it with the number of (token, layer) routings of the
prompt that differ, and each such difference must be a near-tie: the CPU's logit margin between
an expert only it chose and one only CUDA chose at most twice that row's largest |cuda - cpu|
router logit (more could not flip from rounding the logits; a routing defect would).

Needs python3 + numpy only (it runs on the GPU machine). Usage:
    scripts/gpu_model_gate.py --bin DIR --json OUT.json MODEL [MODEL ...]
MODEL is a fixture folder or a GGUF file; --positions P (default 256), --greedy G (default 32).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

TOP1_MIN = 0.99
KL_MAX = 1e-3
# bf16 activations and KV against float32: relative to the largest |logit| of the row.
REL_ERR_MAX = 5e-2


def token_ids(n, vocab, seed):
    """Deterministic ids in the ordinary range of any vocabulary (past the first specials)."""
    lo, hi = min(3, vocab - 1), min(vocab, 32000)
    rng = np.random.default_rng(seed)
    return [int(t) for t in rng.integers(lo, hi, size=n)]


def run(bin_dir, model, tokens, greedy, device, out_dir, extra=()):
    ids = os.path.join(out_dir, "ids.json")
    with open(ids, "w") as f:
        json.dump(tokens, f)
    raw = os.path.join(out_dir, f"logits-{device}.f32")
    cmd = [os.path.join(bin_dir, "model_run"), "--model", model, "--tokens-file", ids,
           "--chunk", "128", "--greedy", str(greedy), "--all-logits", "--logits-out", raw,
           "--device", device, *extra]
    t0 = time.time()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    out = json.loads(proc.stdout)
    rows, cols = out["logits_file"]["rows"], out["logits_file"]["cols"]
    logits = np.fromfile(raw, dtype=np.float32).reshape(rows, cols)
    return out, logits, time.time() - t0


def compare(cpu, cuda, n_prompt):
    """Metrics over the teacher-forced prompt rows."""
    a = cpu[:n_prompt].astype(np.float64)
    b = cuda[:n_prompt].astype(np.float64)
    if not np.isfinite(b).all():
        return {"finite": False, "top1": 0.0, "kl_mean": float("inf"), "rel_err_max": float("inf")}
    top1 = float(np.mean(a.argmax(1) == b.argmax(1)))
    la = a - a.max(1, keepdims=True)
    lb = b - b.max(1, keepdims=True)
    la -= np.log(np.exp(la).sum(1, keepdims=True))
    lb -= np.log(np.exp(lb).sum(1, keepdims=True))
    kl = float(np.mean((np.exp(la) * (la - lb)).sum(1)))
    rel = float(np.max(np.abs(a - b).max(1) / np.maximum(np.abs(a).max(1), 1e-30)))
    return {"finite": True, "top1": top1, "kl_mean": kl, "rel_err_max": rel}


def passes(m):
    return (m["finite"] and m["top1"] >= TOP1_MIN and m["kl_mean"] <= KL_MAX and
            m["rel_err_max"] <= REL_ERR_MAX)


def explain_divergence(args, model, prompt, greedy_cpu, greedy_cuda, tmp, pinned=False):
    """Where greedy decoding first differs, both backends' logits on the same tokens (the prompt
    and the tokens both chose before that step): the CPU's margin between its pick and the
    CUDA pick, against that row's largest |cuda - cpu|. A margin under the row's error is a
    near-tie that the backends' rounding decides; a margin far above it points at a defect.
    Reported only: the gate's verdict stays greedy-identical. pinned: the CUDA run takes the CPU
    run's MoE routing, as the gate's judged run did."""
    step = next(i for i, (a, b) in enumerate(zip(greedy_cpu, greedy_cuda)) if a != b)
    tokens = prompt + greedy_cpu[:step]
    routes = os.path.join(tmp, "routes-explain.json")
    _, cpu, _ = run(args.bin, model, tokens, 0, "cpu", tmp,
                    ["--threads", str(args.threads)] + (["--routes-out", routes] if pinned else []))
    _, cuda, _ = run(args.bin, model, tokens, 0, args.device, tmp,
                     ["--routes-in", routes] if pinned else [])
    a, b = cpu[len(tokens) - 1].astype(np.float64), cuda[len(tokens) - 1].astype(np.float64)
    pick_cpu, pick_cuda = greedy_cpu[step], greedy_cuda[step]
    return {"step": step, "cpu_token": pick_cpu, "cuda_token": pick_cuda,
            "cpu_margin": float(a[pick_cpu] - a[pick_cuda]),
            "cuda_margin": float(b[pick_cuda] - b[pick_cpu]),
            "row_abs_err_max": float(np.abs(a - b).max()),
            "row_abs_logit_max": float(np.abs(a).max())}


def route_flips(cpu_routes, cuda_routes):
    """Over the (token, layer) routings of the teacher-forced prompt chunks (calls of more than
    one token, where both runs saw the same tokens): how many expert sets differ, how many of
    those are not near-ties (the CPU's margin for an expert only it chose over one only CUDA chose
    above twice the row's largest router-logit difference), and the largest margin / (2 x error).
    """
    flips = total = unexplained = 0
    worst = 0.0
    for a, b in zip(cpu_routes, cuda_routes):
        if a["n"] <= 1 or (a["layer"], a["n"]) != (b["layer"], b["n"]):
            continue
        k = len(a["ids"]) // a["n"]
        n_expert = len(a["logits"]) // a["n"]
        for t in range(a["n"]):
            total += 1
            mine = set(a["ids"][t * k:(t + 1) * k])
            theirs = set(b["ids"][t * k:(t + 1) * k])
            if mine == theirs:
                continue
            flips += 1
            la = np.asarray(a["logits"][t * n_expert:(t + 1) * n_expert], dtype=np.float64)
            lb = np.asarray(b["logits"][t * n_expert:(t + 1) * n_expert], dtype=np.float64)
            err = float(np.abs(la - lb).max())
            margin = max(la[i] - la[j] for i in mine - theirs for j in theirs - mine)
            ratio = margin / (2 * err) if err > 0 else float("inf")
            worst = max(worst, ratio)
            unexplained += ratio > 1 + 1e-6
    return flips, total, unexplained, worst


def gate_model(args, model):
    with tempfile.TemporaryDirectory() as tmp:
        probe, _, _ = run(args.bin, model, [3, 4], 1, "cpu", tmp, ["--threads", str(args.threads)])
        vocab = int(probe["n_vocab"])
        tokens = token_ids(args.positions, vocab, seed=len(model))
        cpu_routes = os.path.join(tmp, "routes-cpu.json")
        cpu_out, cpu, cpu_s = run(args.bin, model, tokens, args.greedy, "cpu", tmp,
                                  ["--threads", str(args.threads), "--routes-out", cpu_routes])
        with open(cpu_routes) as f:
            moe = len(json.load(f)) > 0
        free_routes = os.path.join(tmp, "routes-cuda.json")
        cuda_out, cuda, cuda_s = run(args.bin, model, tokens, args.greedy, args.device, tmp,
                                     ["--routes-out", free_routes] if moe else [])
        m = compare(cpu, cuda, args.positions)
        if moe:  # the free run reported; the pinned run judged
            with open(cpu_routes) as f, open(free_routes) as g:
                flips, routed, unexplained, worst = route_flips(json.load(f), json.load(g))
            m["free"] = dict(m, greedy_identical=cpu_out["greedy"] == cuda_out["greedy"],
                             route_flips=flips, routed_token_layers=routed,
                             route_flips_not_near_ties=unexplained,
                             route_flip_margin_over_error_max=worst)
            cuda_out, cuda, cuda_s = run(args.bin, model, tokens, args.greedy, args.device, tmp,
                                         ["--routes-in", cpu_routes])
            m = dict(compare(cpu, cuda, args.positions), free=m["free"], routing="pinned to the CPU's")
    m["greedy_identical"] = cpu_out["greedy"] == cuda_out["greedy"]
    m["greedy_cpu"], m["greedy_cuda"] = cpu_out["greedy"], cuda_out["greedy"]
    m["pass"] = (passes(m) and m["greedy_identical"] and
                 m.get("free", {}).get("route_flips_not_near_ties", 0) == 0)
    if not m["greedy_identical"]:
        with tempfile.TemporaryDirectory() as tmp:
            m["divergence"] = explain_divergence(args, model, tokens, cpu_out["greedy"],
                                                 cuda_out["greedy"], tmp, pinned="free" in m)
    # Teeth: rows off by one position (what a wrong position or KV slot would look like).
    shifted = compare(cpu[1:], cuda[:-1], args.positions - 1)
    m["teeth_shifted_rows_fail"] = not passes(shifted)
    m.update({"model": model, "device": cuda_out.get("device"), "positions": args.positions,
              "greedy": args.greedy, "cpu_s": round(cpu_s, 2), "cuda_s": round(cuda_s, 2)})
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    ap.add_argument("--bin", required=True, help="folder with model_run")
    ap.add_argument("--positions", type=int, default=256)
    ap.add_argument("--greedy", type=int, default=32)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--device", default="cuda", help="the backend compared with the CPU")
    args = ap.parse_args()
    results = []
    for model in args.models:
        try:
            results.append(gate_model(args, model))
        except RuntimeError as e:
            results.append({"model": model, "pass": False, "error": str(e)})
    print(f"{'model':48} {'top1':>7} {'KL':>9} {'rel err':>9} {'greedy':>7} {'teeth':>6} verdict")
    for r in results:
        if "error" in r:
            print(f"{r['model'][-48:]:48} ERROR {r['error'][:200]}")
            continue
        if "free" in r:
            f = r["free"]
            print(f"  {r['model'][-46:]}: MoE, judged with the CPU's routing pinned; free run: top1 "
                  f"{f['top1']:.4f}, KL {f['kl_mean']:.2e}, rel err {f['rel_err_max']:.2e}, greedy "
                  f"{'same' if f['greedy_identical'] else 'DIFF'}, {f['route_flips']} of "
                  f"{f['routed_token_layers']} (token, layer) routings differ, "
                  f"{f['route_flips_not_near_ties']} of them not near-ties (largest margin / "
                  f"2 x logit error {f['route_flip_margin_over_error_max']:.2f})")
        if "divergence" in r:
            d = r["divergence"]
            print(f"  {r['model'][-46:]}: greedy differs at step {d['step']} (cpu {d['cpu_token']}, "
                  f"cuda {d['cuda_token']}): cpu margin {d['cpu_margin']:.3g}, cuda margin "
                  f"{d['cuda_margin']:.3g}, row max |cuda - cpu| {d['row_abs_err_max']:.3g} "
                  f"of max |logit| {d['row_abs_logit_max']:.3g}")
        print(f"{r['model'][-48:]:48} {r['top1']:7.4f} {r['kl_mean']:9.2e} {r['rel_err_max']:9.2e} "
              f"{'same' if r['greedy_identical'] else 'DIFF':>7} "
              f"{'ok' if r['teeth_shifted_rows_fail'] else 'NONE':>6} "
              f"{'PASS' if r['pass'] else 'FAIL'}")
    ok = all(r["pass"] and r.get("teeth_shifted_rows_fail") for r in results)
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    except OSError:
        gpu = "none (nvidia-smi not found)"
    summary = {"what": "gpu-model-gate", "commit": os.environ.get("MEMRA_COMMIT", ""),
               "gpu": gpu, "command": " ".join(sys.argv),
               "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
               "pass": ok, "thresholds": {
        "top1_min": TOP1_MIN, "kl_mean_max": KL_MAX, "rel_err_max": REL_ERR_MAX}, "models": results}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    print("ALL GREEN" if ok else "RED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
