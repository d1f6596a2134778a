#!/usr/bin/env python3
"""Where a decode step's GPU time goes: runs `memra bench` under Nsight Compute (ncu, clocks left
alone: --clock-control none) over a window of kernel launches in the middle of the decode phase,
and prints one row per kernel: launches, total and per-step microseconds, share of the window.
ncu runs kernels one at a time (no overlap from programmatic dependent launch, no graph replay
timing), so the sum is the serialized kernel time of a step, not its wall time: use it to rank
kernels, and `memra bench` for the step time itself.

    scripts/gpu_profile.py --bin .device/bin --model /tmp/memra-synth/qwen3-8b-q4_k_m.gguf

A decode step is counted by its last kernel (argmax_rows by default: greedy bench steps end
with it). Only whole steps inside the window count, and only decode steps: a step with a kernel
matching --prefill-kernel (the attention kernel's multi-query forms, which prompts take) is left
out and counted apart, so a window that lands in a prefill says so instead of passing for decode.
--prompt turns that around: the table of the window's whole prompt steps (a prefill through the
argmax of its last token), e.g. 8B Q4_K_M's 512-token prompts:

    scripts/gpu_profile.py --bin .device/bin --model /tmp/memra-synth/qwen3-8b-q4_k_m.gguf \
        --prompt --skip 0 --count 6000 --bench-args "-p 512 -n 2 -r 2"

--detail REGEX gives Nsight Compute's sections and stall reasons of the matching kernels instead,
under memra bench or (--kernel-bench) under memra-kernel-bench, e.g. the BF16 prefill kernel:

    scripts/gpu_profile.py --bin .device/bin --kernel-bench --detail prefill_wgmma_kernel \
        --skip 150 --count 1 --bench-args "--tokens 512 --dtypes bf16"
"""
import argparse
import collections
import csv
import glob
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile


def find_ncu():
    path = shutil.which("ncu")
    if path:
        return path
    found = sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu") +
                   glob.glob("/usr/local/cuda*/bin/ncu"))
    if not found:
        sys.exit("gpu_profile: ncu (Nsight Compute) not found")
    return found[-1]


def known_metrics(names):
    """The metrics of names this ncu reports on device 0 (an unknown one fails a whole run)."""
    if not names:
        return []
    out = subprocess.run([find_ncu(), "--devices", "0", "--query-metrics"], capture_output=True,
                         text=True)
    known = {line.split()[0] for line in out.stdout.splitlines() if line.strip()}
    keep = []
    for name in names:
        base = name.split(".")[0]  # the query lists base names; suffixes pick the roll-up
        if base in known:
            keep.append(name)
        else:
            print(f"gpu_profile: ncu does not know {base} on this GPU: left out", flush=True)
    return keep


def short_name(name):
    # "void memra::kernels::(anonymous namespace)::foo<...>(args)" -> "foo<...>"
    name = name.split("(")[0] if not name.startswith("void ") else name[5:].split("(")[0]
    for prefix in ("memra::kernels::", "(anonymous namespace)::", "matmul_detail::", "detail::"):
        name = name.replace(prefix, "")
    return name[:90]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="folder with the memra executable")
    ap.add_argument("--model", help="the model file memra bench runs (not with --kernel-bench)")
    ap.add_argument("--skip", type=int, default=4000, help="launches skipped (load, prefill)")
    ap.add_argument("--count", type=int, default=1500, help="launches profiled")
    ap.add_argument("--step-kernel", default="argmax", help="a kernel run once per step")
    # (not the decode kernel's two-blocks form, decode_attention_kernel<D, T, 1>)
    ap.add_argument("--prefill-kernel",
                    default=r"(?<!decode_)attention_kernel<\d+, [^,]+, 1|attention_flash_kernel",
                    help="regex of a kernel only prompt (prefill) steps run")
    ap.add_argument("--prompt", action="store_true",
                    help="the table of the window's whole prompt steps instead of its decode "
                         "steps (e.g. --skip 0 --count 6000 --bench-args '-p 512 -n 2 -r 2')")
    ap.add_argument("--bench-args", default="-p 16 -n 64 -r 3 -c 1")
    ap.add_argument("--detail", metavar="REGEX",
                    help="instead of the per-kernel table: Nsight Compute's throughput, occupancy, "
                         "memory and warp-stall sections for the first --count launches (after "
                         "--skip) of the kernels whose name matches REGEX")
    ap.add_argument("--kernel-bench", action="store_true",
                    help="with --detail: profile memra-kernel-bench (--bench-args are its "
                         "arguments) instead of memra bench (--model is then not needed)")
    ap.add_argument("--extra-metrics", default="",
                    help="with --detail: more Nsight Compute metrics, comma-separated; those this "
                         "ncu does not know on this GPU are named and left out")
    ap.add_argument("--demangled", action="store_true",
                    help="match --detail against the demangled name with its template arguments "
                         "(e.g. 'cluster_decode_kernel<\\(memra::DType\\)12') instead of the "
                         "function's base name")
    ap.add_argument("--flush-l2", action="store_true",
                    help="with --detail: Nsight Compute flushes the caches before each profiled "
                         "kernel (--cache-control all) instead of leaving them as the run left "
                         "them: the kernel with its inputs cold, as a step reads its weights")
    ap.add_argument("--source", type=int, default=0, metavar="N",
                    help="with --detail: also the N SASS instructions where Nsight Compute's warp "
                         "sampling found warps stalled most, with their largest stall reasons "
                         "(the SourceCounters section, read back from a saved report)")
    args = ap.parse_args()
    if args.source and not args.detail:
        ap.error("--source needs --detail")
    if args.kernel_bench and not args.detail:
        ap.error("--kernel-bench needs --detail")
    if not args.kernel_bench and not args.model:
        ap.error("--model is required (memra bench runs it)")
    if args.detail:
        target = ([os.path.join(args.bin, "memra-kernel-bench")] if args.kernel_bench else
                  [os.path.join(args.bin, "memra"), "bench", "-m", args.model, "--device", "cuda"])
        extra = known_metrics([m for m in args.extra_metrics.split(",") if m])
        cmd = [find_ncu(), "--clock-control", "none",
               "--cache-control", "all" if args.flush_l2 else "none",
               *(["--kernel-name-base", "demangled"] if args.demangled else []),
               "--kernel-name", f"regex:{args.detail}",
               "--launch-skip", str(args.skip), "--launch-count", str(args.count),
               "--section", "SpeedOfLight", "--section", "Occupancy",
               "--section", "MemoryWorkloadAnalysis", "--section", "WarpStateStats",
               "--section", "LaunchStats", "--section", "SchedulerStats",
               # Why warps wait (cycles a warp spends stalled on each reason per issued
               # instruction): the sections above give the total only.
               "--metrics", ",".join([
                   f"smsp__average_warps_issue_stalled_{r}_per_issue_active.ratio"
                   for r in ("long_scoreboard", "short_scoreboard", "wait", "barrier",
                             "math_pipe_throttle", "mio_throttle", "lg_throttle",
                             "not_selected", "selected", "dispatch_stall", "no_instruction",
                             "membar", "branch_resolving", "drain", "imc_miss", "tex_throttle")
                   ] + extra),
               *target, *shlex.split(args.bench_args)]
        report = None
        if args.source:
            report = os.path.join(tempfile.mkdtemp(), "detail")
            cmd[1:1] = ["--section", "SourceCounters", "--export", report]
        print("$", " ".join(cmd), flush=True)
        out = subprocess.run(cmd, capture_output=True, text=True)
        keep = [l for l in out.stdout.splitlines() if not l.startswith("==PROF==")]
        print("\n".join(keep[-400:]))
        if out.returncode != 0:
            print(out.stderr[-3000:])
            sys.exit(out.returncode)
        if report:
            # With --export ncu prints no sections: read them back from the report first.
            details = subprocess.run([find_ncu(), "--import", report + ".ncu-rep", "--page",
                                      "details"], capture_output=True, text=True)
            print("\n".join(details.stdout.splitlines()[-400:]))
            print_source_top(report + ".ncu-rep", args.source)
        return
    cmd = [find_ncu(), "--csv", "--clock-control", "none", "--cache-control", "none",
           "--metrics", "gpu__time_duration.sum",
           "--launch-skip", str(args.skip), "--launch-count", str(args.count),
           os.path.join(args.bin, "memra"), "bench", "-m", args.model, "--device", "cuda",
           *shlex.split(args.bench_args)]
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"ID"')), None)
    if start is None:
        print(out.stdout[-3000:], out.stderr[-3000:], sep="\n")
        sys.exit("gpu_profile: no ncu results")
    launches = []  # (name, microseconds) in launch order
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        value = float(row["Metric Value"].replace(",", ""))
        unit = row["Metric Unit"]
        scales = {"nsecond": 1e-3, "ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3,
                  "ms": 1e3}
        if unit not in scales:
            sys.exit(f"gpu_profile: unknown time unit '{unit}'")
        launches.append((short_name(row["Kernel Name"]), value * scales[unit]))
    # Whole steps: from after one step kernel through the next.
    ends = [i for i, (n, _) in enumerate(launches) if args.step_kernel in n]
    prefill = re.compile(args.prefill_kernel)
    total = collections.Counter()
    count = collections.Counter()
    steps = skipped = 0
    kind = "prompt" if args.prompt else "decode"
    for a, b in zip(ends, ends[1:]):
        step = launches[a + 1:b + 1]
        if any(prefill.search(n) for n, _ in step) != args.prompt:
            skipped += 1
            continue
        steps += 1
        for n, us in step:
            total[n] += us
            count[n] += 1
    other = "decode" if args.prompt else "prompt"
    print(f"{len(launches)} launches; {steps} whole {kind} steps (by '{args.step_kernel}'), "
          f"{skipped} {other} steps left out")
    if steps == 0:
        sys.exit(f"gpu_profile: no whole {kind} step in the window (move --skip or widen "
                 "--count)")
    window = sum(total.values())
    print(f"{window:.1f} us serialized kernel time, {window / steps:.1f} us per step, "
          f"{sum(count.values()) / steps:.0f} launches per step")
    print(f"{'kernel':90s} {'launches':>8s} {'us/step':>9s} {'us/launch':>9s} {'share':>6s}")
    for name, us in total.most_common():
        print(f"{name:90s} {count[name]:8d} {us / steps:9.1f} {us / count[name]:9.2f} "
              f"{100 * us / window:5.1f}%")

def print_source_top(report, n):
    """The n SASS instructions of a saved report with the most warp-stall samples (all samples),
    each with its three largest stall-reason columns."""
    cmd = [find_ncu(), "--import", report, "--page", "source", "--csv", "--print-source", "sass"]
    print("$", " ".join(cmd), flush=True)
    out = subprocess.run(cmd, capture_output=True, text=True)
    lines = out.stdout.splitlines()
    # The header: the first line naming the warp-sampling column (a preamble may come before it).
    start = next((i for i, l in enumerate(lines) if "Warp Stall Sampling (All" in l), None)
    if out.returncode != 0 or start is None:
        print("\n".join(lines[:5]), out.stdout[-2000:], out.stderr[-2000:], sep="\n")
        sys.exit("gpu_profile: no source page with warp sampling in the report")
    rows = [{k: v for k, v in r.items() if k is not None}
            for r in csv.DictReader(io.StringIO("\n".join(lines[start:])))]
    if not rows:
        sys.exit("gpu_profile: the source page has no rows")
    cols = list(rows[0].keys())
    total_col = next(c for c in cols if "Warp Stall Sampling (All" in c)

    def num(v):
        try:
            return float(str(v).replace(",", ""))
        except ValueError:
            return 0.0

    reasons = [c for c in cols
               if c != total_col and "not issued" not in c.lower().replace("-", " ") and
               ("stall" in c.lower())]
    total = sum(num(r.get(total_col)) for r in rows)
    print(f"{len(rows)} instructions, {total:.0f} warp samples; the {n} with the most "
          f"(reasons from the columns: {', '.join(reasons)}; 'other' = samples none names):")
    src = next((c for c in cols if c.lower() == "source"), cols[1])
    addr = next((c for c in cols if "Address" in c), cols[0])
    for r in sorted(rows, key=lambda r: -num(r.get(total_col)))[:n]:
        top = sorted(((num(r.get(c)), c) for c in reasons), reverse=True)[:3]
        why = ", ".join(f"{c} {v:.0f}" for v, c in top if v > 0)
        other = num(r.get(total_col)) - sum(num(r.get(c)) for c in reasons)
        if other > 0:
            why += f", other {other:.0f}"
        print(f"{str(r.get(addr)):>8s} {100 * num(r.get(total_col)) / max(total, 1):5.1f}%  "
              f"{str(r.get(src)).strip()[:70]:70s}  {why}")

if __name__ == "__main__":
    main()
