#!/usr/bin/env python3
"""The GPU's SM clock, power draw and clock-event reasons while a command runs: nvidia-smi samples
device 0 every --interval-ms beside the command, then this prints the command's exit status and,
over the samples where the GPU was busy (utilization >= --busy percent), the minimum, median and
maximum of each figure, and how often each clock-event reason was active. Whether a kernel's rate
is its own or the clock's (a power or thermal limit lowers the SM clock under sustained tensor
work) is read here, not guessed:

    scripts/gpu_clocks.py --json clocks.json -- .device/bin/memra bench -m 8b-bf16.gguf \\
        --device cuda -r 10 -p 2048 -n 1

Samples are nvidia-smi's (its own averaging window), so a figure shorter than a few intervals is
not resolved; run the workload long enough (a loop of steps, not one kernel).
"""
import argparse
import csv
import io
import json
import shutil
import statistics
import subprocess
import sys

FIELDS = ["timestamp", "utilization.gpu", "clocks.sm", "clocks.max.sm", "power.draw",
          "enforced.power.limit", "temperature.gpu", "clocks_event_reasons.active"]
# The reasons' bits (nvidia-smi -q's "Clocks Event Reasons").
REASONS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap",
           0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
           0x80: "hw_power_brake_slowdown", 0x100: "display_clock_setting"}


def number(text):
    try:
        return float(text.strip().split()[0])
    except (ValueError, IndexError):
        return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--interval-ms", type=int, default=50)
    ap.add_argument("--busy", type=float, default=90.0, help="utilization.gpu that counts as busy")
    ap.add_argument("--json", help="write the samples and the summary here")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = ap.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no command given")
    smi = shutil.which("nvidia-smi")
    if not smi:
        sys.exit("gpu_clocks: nvidia-smi not found")
    # A field this nvidia-smi does not know fails the whole query: older ones name the reasons
    # clocks_throttle_reasons (the same bits).
    probe = subprocess.run([smi, "-i", "0", "--query-gpu=" + ",".join(FIELDS),
                            "--format=csv,noheader,nounits"], capture_output=True, text=True)
    if probe.returncode != 0:
        FIELDS[-1] = "clocks_throttle_reasons.active"
    sampler = subprocess.Popen(
        [smi, "-i", "0", "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits",
         "-lms", str(args.interval_ms)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rc = subprocess.call(command)
    sampler.terminate()
    out, err = sampler.communicate(timeout=10)
    rows = [r for r in csv.reader(io.StringIO(out)) if len(r) == len(FIELDS)]
    if not rows:
        sys.exit(f"gpu_clocks: nvidia-smi gave no samples: {err.strip()[:300]}")
    samples = []
    for r in rows:
        s = {"time": r[0].strip()}
        for name, text in zip(FIELDS[1:-1], r[1:-1]):
            s[name] = number(text)
        reasons = r[-1].strip()
        s["clocks_event_reasons.active"] = int(reasons, 16) if reasons.startswith("0x") else None
        samples.append(s)
    busy = [s for s in samples if (s["utilization.gpu"] or 0) >= args.busy]
    summary = {"command": command, "exit_status": rc, "samples": len(samples), "busy": len(busy)}
    print(f"gpu_clocks: exit status {rc}; {len(samples)} samples every {args.interval_ms} ms, "
          f"{len(busy)} busy (utilization >= {args.busy:g}%)")
    for name in FIELDS[2:-1]:
        values = [s[name] for s in busy if s[name] is not None]
        if not values:
            continue
        summary[name] = {"min": min(values), "median": statistics.median(values),
                         "max": max(values)}
        print(f"  {name:22s} min {min(values):8.1f}  median {statistics.median(values):8.1f}  "
              f"max {max(values):8.1f}")
    counts = {}
    for s in busy:
        bits = s["clocks_event_reasons.active"] or 0
        for bit, name in REASONS.items():
            if bits & bit:
                counts[name] = counts.get(name, 0) + 1
    summary["reasons_busy_samples"] = counts
    print("  clock-event reasons over the busy samples: " +
          (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"summary": summary, "samples": samples}, f, indent=1)
    return rc


if __name__ == "__main__":
    sys.exit(main())
