#!/usr/bin/env python3
"""Per-token decode time through a running memra-server, as a client sees it: the median gap
between streamed tokens (logprobs on, so every chunk carries exactly its tokens), for greedy,
temperature 1, and temperature 1 under a json_schema response format. Prints one line per case.

    build/cpu/tools/server/memra-server --threads 1 &
    .venv/bin/python scripts/bench_decode_gap.py --url http://127.0.0.1:8080 --runs 6
"""
import argparse
import statistics
import time

import openai

SCHEMA = {"type": "object", "properties": {"story": {"type": "string"}},
          "required": ["story"], "additionalProperties": False}


def median_gap_ms(client, model, temperature, seed, max_tokens, schema):
    kw = dict(model=model, temperature=temperature, seed=seed, max_tokens=max_tokens,
              messages=[{"role": "user", "content": "Tell me a long story about a dragon."}],
              stream=True, stream_options={"include_usage": True}, logprobs=True)
    if schema:
        kw["response_format"] = {"type": "json_schema",
                                 "json_schema": {"name": "story", "schema": SCHEMA}}
    arrivals, tokens = [], 0
    for chunk in client.chat.completions.create(**kw):
        if chunk.choices and chunk.choices[0].logprobs:
            arrivals.append(time.perf_counter())
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
    gaps = [b - a for a, b in zip(arrivals, arrivals[1:])]
    return (statistics.median(gaps) * 1000 if gaps else float("nan")), tokens


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", default="http://127.0.0.1:8080")
    ap.add_argument("--runs", type=int, default=6)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--api-key", default="unused")
    args = ap.parse_args()
    client = openai.OpenAI(base_url=args.url + "/v1", api_key=args.api_key, max_retries=0)
    model = client.models.list().data[0].id
    for name, temperature, schema in (("greedy", 0.0, False), ("T=1", 1.0, False),
                                      ("T=1 json_schema", 1.0, True)):
        runs = [median_gap_ms(client, model, temperature, seed, args.max_tokens, schema)
                for seed in range(args.runs)]
        print(f"{name:16s} median gap {statistics.median(r[0] for r in runs):6.1f} ms/token"
              f"  (tokens per run: {[r[1] for r in runs]})")


if __name__ == "__main__":
    main()
