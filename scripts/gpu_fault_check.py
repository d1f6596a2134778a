#!/usr/bin/env python3
"""GPU faults are named, never silent (CUDA issue, item 7), checked by injection on a real GPU:
  1. MEMRA_CUDA_FAULT=alloc:3: loading a model fails, naming the bytes it needed and the free
     memory, with a non-zero exit (no crash, no partial load);
  2. MEMRA_CUDA_FAULT=launch:50 in memra-server: the first request fails with a 500 in OpenAI's
     error shape naming the CUDA error, /readyz turns 503 "failed" with the reason, and the process
     stays up (/livez 200) for an orchestrator to restart.
python3 + stdlib only. Usage: scripts/gpu_fault_check.py --bin DIR --model FILE [--json OUT]
"""
import argparse
import http.client
import json
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def request(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=json.dumps(body) if body is not None else None,
                 headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read().decode("utf-8", "replace")
    conn.close()
    try:
        return resp.status, json.loads(data)
    except json.JSONDecodeError:
        return resp.status, data


def check_alloc(args):
    env = dict(os.environ, MEMRA_CUDA_FAULT="alloc:3")
    proc = subprocess.run([os.path.join(args.bin, "memra"), "run", "-m", args.model, "--device",
                           "cuda", "-p", "hello", "-n", "2"], env=env, capture_output=True,
                          text=True, timeout=120)
    msg = proc.stderr.strip()
    ok = proc.returncode not in (0, -6, -11) and "cannot allocate" in msg and "bytes" in msg
    return {"check": "alloc fault at load", "rc": proc.returncode, "message": msg[-400:], "pass": ok}


def check_launch(args):
    port = free_port()
    env = dict(os.environ, MEMRA_CUDA_FAULT="launch:50")
    server = subprocess.Popen([os.path.join(args.bin, "memra-server"), "--model", args.model,
                               "--device", "cuda", "--port", str(port), "--ctx-size", "512"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True)
    result = {"check": "sticky launch fault in a step", "pass": False}
    try:
        for _ in range(600):
            try:
                if request(port, "GET", "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)
        status, body = request(port, "POST", "/v1/completions",
                               {"prompt": "hello", "max_tokens": 4, "temperature": 0})
        ready_status, ready = request(port, "GET", "/readyz")
        live_status, _ = request(port, "GET", "/livez")
        again_status, again = request(port, "POST", "/v1/completions",
                                      {"prompt": "hello", "max_tokens": 4, "temperature": 0})
        err = body.get("error", {}) if isinstance(body, dict) else {}
        result.update({"completion_status": status, "completion_error": err,
                       "readyz": [ready_status, ready], "livez": live_status,
                       "second_request_status": again_status})
        result["pass"] = (status == 500 and "cudaError" in str(err.get("message", "")) and
                          ready_status == 503 and isinstance(ready, dict) and
                          ready.get("status") == "failed" and live_status == 200 and
                          again_status >= 500 and server.poll() is None)
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        result["server_log_tail"] = (server.stderr.read() or "")[-600:]
    return result


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--json")
    args = ap.parse_args()
    results = [check_alloc(args), check_launch(args)]
    for r in results:
        print(f"{r['check']:36} {'PASS' if r['pass'] else 'FAIL'}  "
              f"{json.dumps({k: v for k, v in r.items() if k not in ('check', 'pass', 'server_log_tail')})[:300]}")
    ok = all(r["pass"] for r in results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"what": "gpu-fault-check", "commit": os.environ.get("MEMRA_COMMIT", ""),
                       "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                       "command": " ".join(sys.argv), "pass": ok, "checks": results}, f, indent=1)
    print("ALL GREEN" if ok else "RED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
