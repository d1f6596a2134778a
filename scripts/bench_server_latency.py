#!/usr/bin/env python3
"""Time to first token (TTFT) and inter-token latency (ITL) of a running memra-server.

Starts nothing: point it at a server (--url). For each concurrency level, C clients each send
--rounds streamed /v1/completions requests back to back (greedy, ignore_eos, so every request
generates exactly --max-tokens tokens); every prompt is --prompt-tokens token ids built from the
server's /tokenize of distinct text (so no two requests share a prefix-cache entry). One untimed
round at each level comes first (lazy start-up work such as CUDA graph capture stays out).

Figures per level: TTFT (request sent -> first streamed text) and ITL (gaps between streamed text
chunks; a chunk normally carries one token, the "chunks/token" column says when text was held back
and merged) as p50/p90, TPOT ((last chunk - first chunk) / (tokens - 1), per request), and output
tok/s (all generated tokens / the level's wall time). Python standard library only, so it runs
wherever python3 does. --json FILE writes a receipt.

    scripts/bench_server_latency.py --url http://127.0.0.1:8080 --json receipts/x.json
"""
import argparse
import datetime
import http.client
import json
import os
import random
import sys
import threading
import time
import urllib.parse

WORDS = ("the of and to in is was for on that with as by at from his an were are which this be "
         "have had one not but all they their there been has when who will more no if out so up "
         "said what its about than into them can only other new some could time these two may "
         "first then do any like my now over such our man me even most made after also did many "
         "before must through back years where much your way well down should because each just "
         "those people how too little state good very make world still own see men work long get "
         "here between both life being under never day same another know while last might us "
         "great old year off come since against go came right used take three river garden "
         "window market silver engine winter harbor letter mountain").split()


class Client:
    """One HTTP origin (and API key); a fresh connection per request."""

    def __init__(self, url, api_key, timeout):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise SystemExit(f"--url {url!r}: expected http://HOST:PORT or https://HOST:PORT")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.https else 80)
        self.base = parts.path.rstrip("/")
        self.timeout = timeout
        self.headers = {"content-type": "application/json"}
        if api_key:
            self.headers["authorization"] = f"Bearer {api_key}"

    def connect(self):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def request_json(self, method, path, body=None):
        conn = self.connect()
        try:
            data = None if body is None else json.dumps(body)
            conn.request(method, self.base + path, data, self.headers)
            resp = conn.getresponse()
            text = resp.read().decode("utf-8", "replace")
            if resp.status != 200:
                raise RuntimeError(f"{method} {path}: HTTP {resp.status}: {text[:500]}")
            return json.loads(text)
        finally:
            conn.close()


def prompt_ids(client, model, n_tokens, seed):
    """The first n_tokens ids of /tokenize over distinct seeded text (BOS included if added)."""
    rng = random.Random(seed)
    n_words = n_tokens + 16
    for _ in range(8):
        text = f"Request {seed}: " + " ".join(rng.choice(WORDS) for _ in range(n_words))
        body = {"prompt": text}
        if model:
            body["model"] = model
        ids = client.request_json("POST", "/tokenize", body)["tokens"]
        if len(ids) >= n_tokens:
            return ids[:n_tokens]
        n_words *= 2
    raise RuntimeError(f"could not build a {n_tokens}-token prompt from /tokenize")


def stream_completion(client, model, ids, max_tokens):
    """Sends one streamed completion; returns (send time, [arrival time of each text chunk], usage)."""
    body = {"prompt": ids, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    if model:
        body["model"] = model
    conn = client.connect()
    try:
        sent = time.perf_counter()
        conn.request("POST", client.base + "/v1/completions", json.dumps(body), client.headers)
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"/v1/completions: HTTP {resp.status}: {resp.read()[:500]!r}")
        arrivals, usage = [], None
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                break
            now = time.perf_counter()
            event = json.loads(payload)
            if "error" in event:
                raise RuntimeError(f"stream error: {event['error']}")
            if event.get("usage"):
                usage = event["usage"]
            if any(c.get("text") for c in event.get("choices", [])):
                arrivals.append(now)
        return sent, arrivals, usage
    finally:
        conn.close()


def percentile(values, q):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    v = sorted(values)
    pos = (len(v) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def summary_ms(values_s):
    ms = [v * 1e3 for v in values_s]
    if not ms:
        return None
    return {"p50": percentile(ms, 0.5), "p90": percentile(ms, 0.9), "min": min(ms),
            "max": max(ms), "mean": sum(ms) / len(ms), "n": len(ms)}


def run_level(client, model, args, concurrency, rounds, max_tokens, seeds):
    """C clients x rounds requests; returns the per-request records and the level's wall time."""
    prompts = [[prompt_ids(client, model, args.prompt_tokens, next(seeds)) for _ in range(rounds)]
               for _ in range(concurrency)]
    records, errors = [], []
    lock = threading.Lock()
    barrier = threading.Barrier(concurrency)

    def worker(i):
        try:
            barrier.wait()
            for ids in prompts[i]:
                rec = stream_completion(client, model, ids, max_tokens)
                with lock:
                    records.append(rec)
        except Exception as e:  # reported once all workers are done
            with lock:
                errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(concurrency)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"{len(errors)} request(s) failed at concurrency {concurrency}: {errors[0]}")
    return records, wall


def level_figures(records, wall, concurrency):
    ttft, itl, tpot = [], [], []
    tokens = chunks = 0
    for sent, arrivals, usage in records:
        if not arrivals:
            raise RuntimeError("a request streamed no text")
        n = usage["completion_tokens"] if usage else len(arrivals)
        tokens += n
        chunks += len(arrivals)
        ttft.append(arrivals[0] - sent)
        itl.extend(b - a for a, b in zip(arrivals, arrivals[1:]))
        if n > 1:
            tpot.append((arrivals[-1] - arrivals[0]) / (n - 1))
    return {"concurrency": concurrency, "requests": len(records), "completion_tokens": tokens,
            "chunks_per_token": chunks / tokens if tokens else None, "wall_s": wall,
            "output_tok_s": tokens / wall, "ttft_ms": summary_ms(ttft), "itl_ms": summary_ms(itl),
            "tpot_ms": summary_ms(tpot)}


def fmt(x):
    return "n/a" if x is None else f"{x:.2f}"


def print_table(levels):
    print("| conc | requests | TTFT p50 ms | TTFT p90 ms | ITL p50 ms | ITL p90 ms | TPOT p50 ms "
          "| output tok/s | chunks/token |")
    print("|------|----------|-------------|-------------|------------|------------|-------------"
          "|--------------|--------------|")
    for f in levels:
        t, i, p = f["ttft_ms"] or {}, f["itl_ms"] or {}, f["tpot_ms"] or {}
        print(f"| {f['concurrency']:4d} | {f['requests']:8d} | {fmt(t.get('p50')):>11} "
              f"| {fmt(t.get('p90')):>11} | {fmt(i.get('p50')):>10} | {fmt(i.get('p90')):>10} "
              f"| {fmt(p.get('p50')):>11} | {f['output_tok_s']:12.1f} | {fmt(f['chunks_per_token']):>12} |")


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="server origin, e.g. http://127.0.0.1:8080")
    ap.add_argument("--api-key", default=os.environ.get("MEMRA_API_KEY", ""),
                    help="Bearer key (default: $MEMRA_API_KEY)")
    ap.add_argument("--model", default="", help="model id (default: the server's first)")
    ap.add_argument("--prompt-tokens", type=int, default=512)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--concurrency", default="1,16", help="comma-separated levels (default 1,16)")
    ap.add_argument("--rounds", type=int, default=4, help="requests per client per level")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per request")
    ap.add_argument("--json", default="", help="write a receipt to this file")
    args = ap.parse_args(argv)
    try:
        args.levels = [int(x) for x in args.concurrency.split(",")]
    except ValueError:
        ap.error(f"--concurrency {args.concurrency!r}: expected integers like 1,16")
    if any(c < 1 for c in args.levels):
        ap.error("--concurrency levels must be >= 1")
    if args.prompt_tokens < 1 or args.max_tokens < 2 or args.rounds < 1:
        ap.error("--prompt-tokens >= 1, --max-tokens >= 2 and --rounds >= 1 are required")
    return args


def redacted(argv):
    """The command line with the API key's value hidden."""
    out, hide = [], False
    for a in argv:
        out.append("***" if hide else ("--api-key=***" if a.startswith("--api-key=") else a))
        hide = a == "--api-key"
    return out


def main(argv):
    args = parse_args(argv)
    client = Client(args.url, args.api_key, args.timeout)
    models = client.request_json("GET", "/v1/models")["data"]
    model = args.model or (models[0]["id"] if models else "")
    seeds = iter(range(1, 1 << 30))
    levels = []
    for c in args.levels:
        run_level(client, model, args, c, 1, min(args.max_tokens, 8), seeds)  # untimed warm-up
        records, wall = run_level(client, model, args, c, args.rounds, args.max_tokens, seeds)
        levels.append(level_figures(records, wall, c))
    print(f"memra-server {args.url} model {model}: {args.prompt_tokens}-token prompts, "
          f"{args.max_tokens} tokens each, {args.rounds} round(s) per client")
    print_table(levels)
    if args.json:
        receipt = {
            "what": "bench-server-latency",
            "commit": os.environ.get("MEMRA_COMMIT", ""),
            "timestamp": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "command": " ".join(["scripts/bench_server_latency.py"] + redacted(argv)),
            "url": args.url, "model": model,
            "models": models, "prompt_tokens": args.prompt_tokens, "max_tokens": args.max_tokens,
            "rounds": args.rounds, "levels": levels,
        }
        with open(args.json, "w") as f:
            json.dump(receipt, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except (RuntimeError, OSError) as e:
        print(f"bench_server_latency: {e}", file=sys.stderr)
        sys.exit(1)
