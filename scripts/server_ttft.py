#!/usr/bin/env python3
"""Two serving figures of a model through memra-server, as a bench receipt.

- "server start to ready" (s): from starting memra-server to its first 200 on /readyz, the
  median of --starts starts after one untimed start (which puts the file in the page cache).
- "server ttft pp512 c1" (ms): time to first streamed token of a --prompt-tokens prompt, one
  client, --requests requests (memra bench-serve; the prefix cache is off, so every prompt is
  computed in full), the median.

The receipt has the shape of a `memra bench` receipt ("what": "bench", the model object that
`memra bench` reports, "figures"), so `memra bench --compare BASELINES --receipts FILE` puts the
figures beside their targets; the bench-serve receipt rides along under "bench_serve".

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


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", required=True, help="folder with memra-server and memra")
    ap.add_argument("--model", required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--starts", type=int, default=3, help="timed starts (after one untimed)")
    ap.add_argument("--requests", type=int, default=20)
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--start-timeout", type=float, default=600)
    ap.add_argument("--json", required=True, help="write the receipt here")
    args = ap.parse_args(argv)
    if args.starts < 1 or args.requests < 1 or args.prompt_tokens < 1:
        raise SystemExit("server_ttft: --starts, --requests and --prompt-tokens must be >= 1")
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
            serve_json = pathlib.Path(tmp) / "serve.json"
            subprocess.run([str(memra), "bench-serve", "--url", f"http://127.0.0.1:{server.port}",
                            "--concurrency", "1", "--requests", str(args.requests),
                            "--prompt-tokens", str(args.prompt_tokens), "--output-tokens", "4",
                            "--json", str(serve_json)],
                           check=True, stdout=subprocess.DEVNULL)
            serve = json.loads(serve_json.read_text())
        finally:
            server.stop()
        if serve.get("failed"):
            raise SystemExit(f"server_ttft: {serve['failed']} requests failed: "
                             f"{serve.get('first_error')}")
    ttft = serve["ttft_ms"]
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
        "figures": [
            figure("server start to ready", "s", starts),
            {"name": f"server ttft pp{args.prompt_tokens} c1", "unit": "ms",
             "median": ttft["p50"], "p90": ttft["p90"], "max": ttft["max"], "runs": ttft["n"]},
        ],
        "bench_serve": serve,
    }
    pathlib.Path(args.json).write_text(json.dumps(receipt, indent=2) + "\n")
    print(f"server start to ready: median {receipt['figures'][0]['median']:.2f} s "
          f"({', '.join(f'{s:.2f}' for s in starts)})")
    print(f"TTFT, {args.prompt_tokens}-token prompt, 1 client: p50 {ttft['p50']:.1f} ms, "
          f"p90 {ttft['p90']:.1f} ms ({ttft['n']} requests)")


if __name__ == "__main__":
    main(sys.argv[1:])
