#!/usr/bin/env python3
"""Soak memra-server: mixed traffic for a given time, then prove nothing leaked.

Starts memra-server (loopback only) on $MEMRA_SOAK_MODEL (default: the tiny test fixture
tests/fixtures/models/qwen3) with a small KV cache and queue, warms it up, samples its RSS, open
file descriptors and threads (/proc/PID) as the baseline, then runs --concurrency clients for
--duration: streaming and non-streaming chat and completions, forced tool calls with a schema,
json_schema structured output, n > 1, clients that disconnect mid-stream (~10%), malformed or
oversized requests (~5%), long requests that exhaust the KV cache (preemption), and bursts over
the queue limit (429s). Every response is checked (soak_checks.py). After the load it waits for
the server to go idle and samples again.

Pass: every well-formed request got 200 with a complete, well-formed body or stream (or a 429 in
the API's shape while the queue was full); every malformed one got its status and an OpenAI
error body; the bursts produced 429s; KV blocks in use, running and waiting requests return to
0; fds and threads return to the baseline; anonymous RSS (RssAnon) is within
--rss-tolerance-mib (or 5%, the larger) of it; the server never died and exits 0 on SIGTERM.
Prints a summary, writes --json.

    scripts/soak.sh 2m          # the same, through the wrapper CI uses

--wrapper runs the server under another command (a heap profiler: docs/TESTING.md "Soak").
"""
import argparse
import json
import os
import pathlib
import random
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import soak_checks as checks  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "scripts" / "soak_chat_template.jinja"


def parse_duration(text):
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], None)
    try:
        value = float(text[:-1]) if scale else float(text)
    except ValueError:
        raise SystemExit(f"duration {text!r}: expected e.g. 90, 90s, 2m or 2h")
    if value <= 0:
        raise SystemExit("duration must be > 0")
    return value * (scale or 1)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """memra-server on a free loopback port, its /proc figures and /metrics."""

    def __init__(self, args):
        binary = pathlib.Path(args.build_dir) / "tools" / "server" / "memra-server"
        if not binary.exists():
            raise SystemExit(f"{binary} is missing: build the cpu preset first")
        self.port = free_port()
        self.log_path = pathlib.Path(args.log or f"/tmp/memra-soak-{self.port}.log")
        self.flags = ["--host", "127.0.0.1", "--port", str(self.port), "--model", args.model,
                      "--chat-template", str(TEMPLATE), "--kv-blocks", str(args.kv_blocks),
                      "--max-sequences", str(args.max_sequences),
                      "--max-queued", str(args.max_queued),
                      "--max-body-bytes", str(checks.MAX_BODY_BYTES),
                      "--idle-timeout", "2", "--threads", str(args.threads),
                      "--log-level", "warn"]
        if args.ctx_size:
            self.flags += ["--ctx-size", str(args.ctx_size)]
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([*shlex.split(args.wrapper), str(binary), *self.flags],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        self.pid = self.proc.pid  # under --wrapper: the memra-server process below it, once up
        self.client = checks.Client("127.0.0.1", self.port)
        deadline = time.time() + args.start_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"memra-server exited with {self.proc.returncode}: "
                                 f"{self.log_tail()}")
            try:
                if self.client.request("GET", "/health", timeout=5)[0] == 200:
                    if args.wrapper:
                        self.pid = server_below(self.proc.pid, binary.resolve())
                    return
            except OSError:
                pass
            time.sleep(0.1)
        self.proc.kill()
        raise SystemExit("memra-server did not become ready: " + self.log_tail())

    def log_tail(self):
        self.log.flush()
        return self.log_path.read_text()[-3000:]

    def alive(self):
        return self.proc.poll() is None

    def proc_sample(self):
        """RSS and its anonymous part (KiB), open fds and threads from /proc/PID. Leaks show in
        RssAnon: the file-backed part grows as pages of the mapped weights are first touched
        (Gemma's 262k-row embedding table, one row per distinct token seen)."""
        status = pathlib.Path(f"/proc/{self.pid}/status").read_text()
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        return {"rss_kib": int(fields["VmRSS"].split()[0]),
                "rss_anon_kib": int(fields["RssAnon"].split()[0]),
                "threads": int(fields["Threads"]),
                "fds": len(os.listdir(f"/proc/{self.pid}/fd"))}

    def metrics(self):
        status, _, body = self.client.request("GET", "/metrics", timeout=30)
        if status != 200:
            raise RuntimeError(f"/metrics: HTTP {status}")
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                name = key.split("{")[0]
                out[name] = out.get(name, 0.0) + float(value) if "{" in key else float(value)
                out[key] = float(value)
        return out

    def stop(self):
        if self.proc.poll() is None:
            # A wrapper (heaptrack, env) waits for the server and passes its exit code on.
            os.kill(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def server_below(root_pid, binary):
    """The pid of the process running `binary` among root_pid and its descendants (a wrapper such
    as heaptrack starts the server as its child rather than exec'ing it)."""
    children = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except (OSError, ValueError):
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    pending = [root_pid]
    while pending:
        pid = pending.pop()
        try:
            if pathlib.Path(f"/proc/{pid}/exe").resolve() == binary:
                return pid
        except OSError:
            pass
        pending += children.get(pid, [])
    raise SystemExit(f"--wrapper: no process below pid {root_pid} runs {binary}")


class Sampler(threading.Thread):
    """Every `period` seconds: /proc figures and the engine's gauges, until stopped."""

    def __init__(self, server, t0, period=1.0):
        super().__init__(daemon=True)
        self.server, self.t0, self.period = server, t0, period
        self.samples, self.stop_flag = [], threading.Event()

    def sample(self):
        s = self.server.proc_sample()
        m = self.server.metrics()
        s.update(t=round(time.time() - self.t0, 2),
                 kv_blocks_used=m.get("memra:kv_cache_blocks_used", -1),
                 running=m.get("memra:num_requests_running", -1),
                 waiting=m.get("memra:num_requests_waiting", -1))
        return s

    def run(self):
        while not self.stop_flag.wait(self.period):
            try:
                self.samples.append(self.sample())
            except Exception as e:  # the server died: the main loop sees it too
                self.samples.append({"t": round(time.time() - self.t0, 2), "error": repr(e)})


def run_clients(client, traffic, n, seconds, seed, bursts=()):
    """n client threads for `seconds`, plus a queue-overflow burst at each time in `bursts`."""
    stop_at = time.time() + seconds
    threads = [threading.Thread(target=traffic.client_loop,
                                args=(random.Random(seed * 1000 + i), stop_at), daemon=True)
               for i in range(n)]
    for t in threads:
        t.start()
    start = time.time()
    for at in bursts:
        delay = start + at - time.time()
        if delay > 0:
            time.sleep(delay)
        traffic.burst()
    for t in threads:
        t.join(timeout=max(0, stop_at - time.time()) + checks.REQUEST_TIMEOUT + 30)
    return sum(t.is_alive() for t in threads)


def wait_idle(server, timeout):
    """Until KV blocks, running and waiting are 0 (from /metrics); returns the last metrics."""
    deadline = time.time() + timeout
    while True:
        m = server.metrics()
        idle = (m.get("memra:kv_cache_blocks_used") == 0 and
                m.get("memra:num_requests_running") == 0 and
                m.get("memra:num_requests_waiting") == 0)
        if idle or time.time() > deadline:
            return m
        time.sleep(0.25)


def settle(server, baseline, timeout):
    """Waits (up to timeout) for fds and threads to come back to the baseline, then 2 s more (the
    server hands free heap back to the system after a second without connections); the sample."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        s = server.proc_sample()
        if s["fds"] <= baseline["fds"] and s["threads"] <= baseline["threads"]:
            break
        time.sleep(0.25)
    time.sleep(2)
    return server.proc_sample()


def verdict(args, report):
    """The list of reasons the soak failed (empty: it passed)."""
    reasons = []
    t = report["traffic"]
    if t["failures"]:
        reasons.append(f"{t['failures']} request(s) failed their check")
    if t["by_kind"].get("burst", {}).get("429", 0) == 0:
        reasons.append("the bursts over the queue limit got no 429")
    for kind in ("disconnect", "malformed", "long"):
        if t["by_kind"].get(kind, {}).get("sent", 0) == 0:
            reasons.append(f"no '{kind}' request was sent")
    if report["preemptions"] <= 0:
        reasons.append("no sequence was preempted: the KV cache was never exhausted")
    idle = report["after"]
    if idle["kv_blocks_used"] != 0 or idle["running"] != 0 or idle["waiting"] != 0:
        reasons.append(f"engine not idle after the load: {idle}")
    base, end = report["baseline"], report["end"]
    if end["fds"] > base["fds"]:
        reasons.append(f"open fds {end['fds']} > baseline {base['fds']}")
    if end["threads"] > base["threads"]:
        reasons.append(f"threads {end['threads']} > baseline {base['threads']}")
    rss_tol_kib = max(args.rss_tolerance_mib * 1024, 0.05 * base["rss_anon_kib"])
    report["rss_anon_tolerance_kib"] = rss_tol_kib
    if end["rss_anon_kib"] > base["rss_anon_kib"] + rss_tol_kib:
        reasons.append(f"anonymous RSS {end['rss_anon_kib']} KiB > baseline "
                       f"{base['rss_anon_kib']} KiB + {rss_tol_kib:.0f} KiB")
    if report["stuck_clients"]:
        reasons.append(f"{report['stuck_clients']} client thread(s) never returned")
    if report["exit_code"] != 0:
        reasons.append(f"memra-server exited with {report['exit_code']} on SIGTERM")
    return reasons


def print_summary(report):
    t = report["traffic"]
    print(f"soak: {report['duration_s']:.0f} s at concurrency {report['concurrency']} on "
          f"{report['model']}: {t['sent']} requests, {t['failures']} failed checks")
    for kind, c in sorted(t["by_kind"].items()):
        statuses = " ".join(f"{k}:{v}" for k, v in sorted(c.items()) if k not in ("sent", "failed"))
        lat = t.get("latency_s", {}).get(kind)
        where = f"  s p50 {lat['p50']:.1f} p99 {lat['p99']:.1f} max {lat['max']:.1f}" if lat else ""
        print(f"  {kind:18s} sent {c['sent']:7d}  failed {c.get('failed', 0):5d}  {statuses}{where}")
    b, e = report["baseline"], report["end"]
    print(f"  anonymous rss {b['rss_anon_kib'] / 1024:.1f} -> {e['rss_anon_kib'] / 1024:.1f} MiB "
          f"(peak {report['peak']['rss_anon_kib'] / 1024:.1f}; all rss {b['rss_kib'] / 1024:.1f} "
          f"-> {e['rss_kib'] / 1024:.1f}), fds {b['fds']} -> {e['fds']} (peak "
          f"{report['peak']['fds']}), threads {b['threads']} -> {e['threads']} (peak "
          f"{report['peak']['threads']}), kv blocks peak {report['peak']['kv_blocks_used']:.0f} "
          f"-> {report['after']['kv_blocks_used']:.0f}, preemptions {report['preemptions']:.0f}, "
          f"cancelled {report['cancelled']:.0f}")
    for f in t["failure_samples"][:10]:
        print(f"  FAIL {f}")
    print("soak: PASS" if report["pass"] else "soak: FAIL: " + "; ".join(report["reasons"]))


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("duration", help="e.g. 120, 2m, 2h")
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--model", default=os.environ.get(
        "MEMRA_SOAK_MODEL", str(ROOT / "tests" / "fixtures" / "models" / "qwen3")))
    ap.add_argument("--build-dir", default=os.environ.get("MEMRA_BUILD_DIR",
                                                          str(ROOT / "build" / "cpu")))
    ap.add_argument("--ctx-size", type=int, default=int(os.environ.get("MEMRA_SOAK_CTX", "0")))
    ap.add_argument("--kv-blocks", type=int, default=0,
                    help="KV cache blocks (default: 6 contexts' worth, so long requests preempt)")
    ap.add_argument("--max-sequences", type=int, default=32)
    ap.add_argument("--max-queued", type=int, default=128)
    ap.add_argument("--threads", type=int, default=int(os.environ.get("MEMRA_SOAK_THREADS", "2")))
    ap.add_argument("--warmup", type=float, default=0, help="seconds (default 10%% of the "
                                                            "duration, 5..60)")
    ap.add_argument("--rss-tolerance-mib", type=float, default=24)
    ap.add_argument("--start-timeout", type=float, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--wrapper", default=os.environ.get("MEMRA_SOAK_WRAPPER", ""),
                    help="command the server runs under, e.g. 'heaptrack --raw -o "
                         "/tmp/heap/soak' (its memra-server child is sampled and signalled)")
    ap.add_argument("--log", default="", help="server log file (default /tmp/memra-soak-PORT.log)")
    ap.add_argument("--json", default="", help="write the report here")
    args = ap.parse_args(argv)
    args.duration_s = parse_duration(args.duration)
    if not args.warmup:
        args.warmup = min(60.0, max(5.0, 0.1 * args.duration_s))
    return args


def context_of(model, ctx_flag):
    """The served context, which sizes the KV cache and the request lengths."""
    if ctx_flag:
        return ctx_flag
    config = pathlib.Path(model) / "config.json"
    if config.exists():
        return min(8192, json.loads(config.read_text()).get("max_position_embeddings", 8192))
    return 1024


def main(argv):
    args = parse_args(argv)
    if not args.ctx_size and not (pathlib.Path(args.model) / "config.json").exists():
        args.ctx_size = 1024  # a GGUF: keep the default model's KV cache and prompts small
    ctx = context_of(args.model, args.ctx_size)
    if not args.kv_blocks:
        args.kv_blocks = 6 * ((ctx + 15) // 16)
    t0 = time.time()
    server = ServerProcess(args)
    traffic = checks.Traffic(server.client, ctx, burst_size=args.max_queued + args.max_sequences
                             + args.concurrency)
    report = {"what": "soak", "model": args.model, "duration_s": args.duration_s,
              "concurrency": args.concurrency, "context": ctx, "server_flags": server.flags,
              "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    sampler = None
    try:
        # Warm-up: the same mix and one burst, so pools, allocator arenas (one per thread, and a
        # burst peaks the threads) and caches reach their working size before the baseline.
        run_clients(server.client, traffic, args.concurrency, args.warmup, args.seed + 7,
                    [args.warmup / 2])
        wait_idle(server, 120)
        traffic.reset()
        time.sleep(3)  # the warm-up's connection threads exit once their clients hang up
        report["baseline"] = dict(server.proc_sample(), t=round(time.time() - t0, 2))
        sampler = Sampler(server, t0)
        sampler.start()
        bursts = [args.duration_s * f for f in (0.3, 0.7)]
        report["stuck_clients"] = run_clients(server.client, traffic, args.concurrency,
                                              args.duration_s, args.seed, bursts)
        after = wait_idle(server, 120)
        sampler.stop_flag.set()
        report["after"] = {"kv_blocks_used": after.get("memra:kv_cache_blocks_used"),
                           "running": after.get("memra:num_requests_running"),
                           "waiting": after.get("memra:num_requests_waiting")}
        report["preemptions"] = after.get("memra:num_preemptions_total", 0)
        report["cancelled"] = after.get(
            'memra:request_success_total{finished_reason="cancelled"}', 0)
        report["end"] = dict(settle(server, report["baseline"], 15), t=round(time.time() - t0, 2))
    except Exception as e:
        report.setdefault("stuck_clients", 0)
        report["error"] = repr(e)
    finally:
        if sampler:
            sampler.stop_flag.set()
        alive = server.alive()
        report["exit_code"] = server.stop() if alive else f"died ({server.proc.returncode})"
    samples = sampler.samples if sampler else []
    report["samples"] = samples
    keys = ("rss_kib", "rss_anon_kib", "fds", "threads", "kv_blocks_used")
    ok_samples = [s for s in samples if "error" not in s] or [dict.fromkeys(keys, 0)]
    report["peak"] = {k: max(s[k] for s in ok_samples) for k in keys}
    report["traffic"] = traffic.summary()
    if "error" in report:
        report["reasons"] = [f"soak aborted: {report['error']}; server log: "
                             f"{server.log_tail()[-800:]}"]
    else:
        report["reasons"] = verdict(args, report)
    report["pass"] = not report["reasons"]
    if "baseline" in report and "end" in report:
        print_summary(report)
    else:
        print("soak: FAIL: " + "; ".join(report["reasons"]))
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(report, indent=1) + "\n")
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
