#!/usr/bin/env python3
"""Serving figures of a model through memra-server, as a bench receipt.

- "server start to ready" (s): from starting memra-server to its first 200 on /readyz, the
  median of --starts starts after one untimed start (which puts the file in the page cache).
- "server ttft pp512 cN" (ms): time to first streamed token of a --prompt-tokens prompt with N
  clients at once (each of --concurrency, default 1 and 16), the median over --requests requests
  (at least 4 N; memra bench-serve; the prefix cache is off, so every prompt is computed in full).
- "server itl pp512 cN" (ms): the median gap between a request's streamed tokens
  (--output-tokens of them) in the same run.

The receipt has the shape of a `memra bench` receipt ("what": "bench", the model object that
`memra bench` reports, "figures"), so `memra bench --compare BASELINES --receipts FILE` puts the
figures beside their targets; bench-serve's receipts ride along under "bench_serve", keyed "cN".

    scripts/server_ttft.py --bin build/cpu/tools --model MODEL.gguf --device cpu --json OUT.json
"""
import argparse
import json
import os
import pathlib
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def find(bin_dir, name):
    for p in (bin_dir / name, bin_dir / "server" / name, bin_dir / "memra" / name):
        if p.is_file() and os.access(p, os.X_OK):
            return p
    raise SystemExit(f"server_ttft: no {name} under {bin_dir}")


def ready(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


class Server:
    """memra-server on a free loopback port; start() returns the seconds until /readyz said 200."""

    def __init__(self, binary, args, log):
        self.binary, self.args, self.log = binary, args, log
        self.proc = None
        self.port = 0

    def start(self, timeout):
        self.port = free_port()
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            [str(self.binary), "--host", "127.0.0.1", "--port", str(self.port), "--model",
             self.args.model, "--device", self.args.device, "--no-prefix-cache",
             "--log-level", "warn"],
            stdout=self.log, stderr=subprocess.STDOUT)
        while not ready(self.port):
            if self.proc.poll() is not None:
                raise SystemExit(f"server_ttft: memra-server exited with {self.proc.returncode} "
                                 f"before it was ready (log: {self.log.name})")
            if time.monotonic() - t0 > timeout:
                self.stop()
                raise SystemExit(f"server_ttft: not ready after {timeout} s")
            time.sleep(0.01)
        return time.monotonic() - t0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def model_object(memra, args, tmp):
    """The model object `memra bench` reports (architecture, parameters, file type, bytes)."""
    out = pathlib.Path(tmp) / "model.json"
    run = subprocess.run([str(memra), "bench", "-m", args.model, "--device", args.device, "-p",
                          "16", "-n", "2", "-r", "3", "--json", str(out)],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if run.returncode != 0:
        raise SystemExit(f"server_ttft: memra bench failed: {run.stderr.strip()[-500:]}")
    return json.loads(out.read_text())["model"]


def figure(name, unit, values):
    return {"name": name, "unit": unit, "median": statistics.median(values), "min": min(values),
            "max": max(values), "runs": len(values), "values": values}


def concurrency_list(text):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"not a comma list of client counts >= 1: {text!r}")
    return values


def bench_serve(memra, port, args, clients, tmp):
    """One memra bench-serve run of `clients` concurrent clients; its receipt."""
    out = pathlib.Path(tmp) / f"serve-c{clients}.json"
    requests = args.requests if clients == 1 else max(args.requests, 4 * clients)
    subprocess.run([str(memra), "bench-serve", "--url", f"http://127.0.0.1:{port}",
                    "--concurrency", str(clients), "--requests", str(requests),
                    "--prompt-tokens", str(args.prompt_tokens), "--output-tokens",
                    str(args.output_tokens), "--json", str(out)],
                   check=True, stdout=subprocess.DEVNULL)
    serve = json.loads(out.read_text())
    if serve.get("failed"):
        raise SystemExit(f"server_ttft: {serve['failed']} of {requests} requests failed at "
                         f"concurrency {clients}: {serve.get('first_error')}")
    return serve


def latency_figure(name, stats):
    return {"name": name, "unit": "ms", "median": stats["p50"], "p90": stats["p90"],
            "max": stats["max"], "runs": stats["n"]}


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="folder with memra-server and memra")
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--starts", type=int, default=3, help="timed starts (after one untimed)")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--output-tokens", type=int, default=16, help="per request (ITL needs 2+)")
    ap.add_argument("--concurrency", type=concurrency_list, default=[1, 16],
                    help="client counts, a comma list (default 1,16)")
    ap.add_argument("--start-timeout", type=float, default=600)
    ap.add_argument("--json", required=True, help="write the receipt here")
    args = ap.parse_args(argv)
    if args.starts < 1 or args.requests < 1 or args.prompt_tokens < 1 or args.output_tokens < 2:
        raise SystemExit("server_ttft: --starts, --requests and --prompt-tokens must be >= 1, "
                         "--output-tokens >= 2")
    bin_dir = pathlib.Path(args.bin)
    server_bin, memra = find(bin_dir, "memra-server"), find(bin_dir, "memra")

    with tempfile.TemporaryDirectory() as tmp, \
            open(pathlib.Path(tmp) / "server.log", "w") as log:
        model = model_object(memra, args, tmp)
        server = Server(server_bin, args, log)
        starts = []
        for i in range(args.starts + 1):
            seconds = server.start(args.start_timeout)
            if i > 0:
                starts.append(seconds)
            if i < args.starts:
                server.stop()
        try:
            serves = {c: bench_serve(memra, server.port, args, c, tmp) for c in args.concurrency}
        finally:
            server.stop()
    figures = [figure("server start to ready", "s", starts)]
    for c, serve in serves.items():
        figures.append(latency_figure(f"server ttft pp{args.prompt_tokens} c{c}", serve["ttft_ms"]))
        figures.append(latency_figure(f"server itl pp{args.prompt_tokens} c{c}", serve["itl_ms"]))
    receipt = {
        "what": "bench",
        "tool": "scripts/server_ttft.py",
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "commit": os.environ.get("MEMRA_COMMIT", ""),
        "command": " ".join([sys.argv[0], *argv]),
        "device": args.device,
        # The server reads MEMRA_DETERMINISTIC from this environment (memra bench --compare
        # labels a --deterministic off run).
        "options": {"deterministic": os.environ.get("MEMRA_DETERMINISTIC", "1") not in
                    ("0", "off", "false", "no")},
        "model": model,
        "figures": figures,
        "bench_serve": {f"c{c}": serve for c, serve in serves.items()},
    }
    pathlib.Path(args.json).write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"server start to ready: median {receipt['figures'][0]['median']:.2f} s "
          f"({', '.join(f'{s:.2f}' for s in starts)})")
    for c, serve in serves.items():
        ttft, itl = serve["ttft_ms"], serve["itl_ms"]
        print(f"{args.prompt_tokens}-token prompts, {c} client(s): TTFT p50 {ttft['p50']:.1f} ms, "
              f"p90 {ttft['p90']:.1f} ms ({ttft['n']} requests); ITL p50 {itl['p50']:.1f} ms, "
              f"p90 {itl['p90']:.1f} ms")


if __name__ == "__main__":
    main(sys.argv[1:])
