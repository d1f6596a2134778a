"""POST /v1/embeddings through the real `openai` client against memra-server on the tiny model
fixtures (CPU engine): vectors equal transformers' final-norm hidden states pooled the same way
(tests/fixtures/models/<arch>/embeddings.json, scripts/gen_embedding_fixtures.py) within 1e-4
relative with an F32 KV cache (the CPU's), 3e-3 with an F16 one (CUDA's default: see KV_TOL);
every input shape, both encodings, usage, the per-alias task, refusals by name in
OpenAI's error shape, and the per-route metrics."""
import base64
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

import httpx
import numpy as np
import openai
import pytest

from server_harness import API_KEY, Server, openai_client, real_server_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
# Distance from transformers' unit vector by the KV cache type the server reports: F32 keeps
# float32 (the CPU, 1e-4); F16 rounds every K and V element to 11 significant bits (relative
# 2^-12), which measured 2.7e-4 to 1.4e-3 on the H200 over these fixtures.
KV_TOL = {"F32": 1e-4, "F16": 3e-3}
# alias -> (fixture, pooling); "chat" serves generation only.
ALIASES = {"embed": ("qwen3", "last"), "emb-mean": ("llama", "mean"),
           "emb-cls": ("gemma3", "cls")}


def reference(arch):
    return json.loads((FIXTURES / arch / "embeddings.json").read_text())


def unit(v):
    v = np.asarray(v, dtype=np.float64)
    return v / np.linalg.norm(v)


def rel_err(got, want):
    return float(np.linalg.norm(np.asarray(got, dtype=np.float64) - unit(want)))


def doc_examples(section):
    """The bash and python blocks of a docs/SERVING.md section."""
    text = (ROOT / "docs" / "SERVING.md").read_text()
    text = text[text.index(f"\n## {section}\n"):]
    text = text[:text.index("\n## ", 1)]
    return re.findall(r"```(bash|python)\n(.*?)```", text, re.S)


def run_doc_examples(server, section):
    examples = doc_examples(section)
    assert examples, section
    for kind, code in examples:
        code = code.replace("http://127.0.0.1:8080", server.url)
        cmd = (["bash", "-euo", "pipefail", "-c", code] if kind == "bash"
               else [sys.executable, "-c", code])
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=120,
                           env={**os.environ, "MEMRA_API_KEY": API_KEY})
        assert r.returncode == 0, r.stderr + server.log_text()
        assert r.stdout.strip(), code


@pytest.fixture(scope="module")
def server(build_dir):
    entries = [f"{alias}={FIXTURES / arch};task=embed;pooling={pooling}"
               for alias, (arch, pooling) in ALIASES.items()]
    entries.append(f"chat={FIXTURES / 'qwen2'}")
    s = Server(real_server_binary(build_dir),
               ["--models", ",".join(entries), "--ctx-size", "96", "--threads", "2",
                "--log-level", "warn"], env={"MEMRA_API_KEYS": API_KEY}, timeout=120)
    yield s
    s.stop()


@pytest.fixture(scope="module")
def client(server):
    return openai_client(server, timeout=60)


@pytest.fixture(scope="module")
def tol(server):
    """The tolerance of the KV cache type the embedding models run with (one for all)."""
    cards = httpx.get(server.url + "/v1/models",
                      headers={"Authorization": f"Bearer {API_KEY}"}).json()["data"]
    kinds = {c["kv_dtype"] for c in cards if c["id"] in ALIASES}
    assert len(kinds) == 1 and kinds <= KV_TOL.keys(), cards
    return KV_TOL[kinds.pop()]


@pytest.mark.parametrize("alias", list(ALIASES))
def test_token_inputs_match_transformers(client, alias, tol):
    arch, pooling = ALIASES[alias]
    ref = reference(arch)
    # The client asks for base64 by default and decodes it; floats are checked below.
    out = client.embeddings.create(model=alias, input=ref["inputs"])
    assert out.model == alias and out.object == "list"
    assert [d.index for d in out.data] == list(range(len(ref["inputs"])))
    for d, want in zip(out.data, ref[pooling]):
        assert len(d.embedding) == len(want)
        assert rel_err(d.embedding, want) <= tol, (alias, d.index)
        assert abs(np.linalg.norm(d.embedding) - 1.0) < 1e-5
    n_tokens = sum(len(i) for i in ref["inputs"])
    assert out.usage.prompt_tokens == n_tokens and out.usage.total_tokens == n_tokens
    # One input alone (a flat token list) is the same vector as in the batch.
    alone = client.embeddings.create(model=alias, input=ref["inputs"][1],
                                     encoding_format="float")
    assert rel_err(alone.data[0].embedding, ref[pooling][1]) <= tol


def test_float_and_base64_agree_and_text_equals_its_tokens(server, client):
    text = "hello embeddings"
    tokens = httpx.post(server.url + "/tokenize", json={"model": "embed", "prompt": text},
                        headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30).json()
    floats = client.embeddings.create(model="embed", input=text, encoding_format="float")
    by_ids = client.embeddings.create(model="embed", input=[tokens["tokens"]],
                                      encoding_format="float")
    assert floats.data[0].embedding == by_ids.data[0].embedding
    raw = httpx.post(server.url + "/v1/embeddings",
                     json={"model": "embed", "input": [text, "x"], "encoding_format": "base64"},
                     headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30).json()
    decoded = np.frombuffer(base64.b64decode(raw["data"][0]["embedding"]), dtype="<f4")
    assert decoded.tolist() == floats.data[0].embedding
    x_tokens = client.embeddings.create(model="embed", input="x").usage.prompt_tokens
    assert raw["usage"]["prompt_tokens"] == tokens["count"] + x_tokens
    assert len(raw["data"]) == 2


def test_dimensions_only_at_full_width(client):
    full = client.embeddings.create(model="embed", input="abc", dimensions=96,
                                    encoding_format="float")
    assert len(full.data[0].embedding) == 96
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="embed", input="abc", dimensions=32)
    assert e.value.body["param"] == "dimensions"
    assert e.value.body["code"] == "unsupported_parameter"
    assert "truncated" in e.value.body["message"]


def test_refusals_name_the_field(server, client):
    with pytest.raises(openai.BadRequestError) as e:
        client.embeddings.create(model="chat", input="abc")
    assert e.value.body["param"] == "model" and "not served for embeddings" in e.value.message
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="embed", messages=[{"role": "user",
                                                                    "content": "hi"}])
    assert "embeddings only" in e.value.message
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="nope", input="abc")
    for bad, param in [({"input": []}, "input"), ({"input": [[]]}, "input"),
                       ({"input": [1.5]}, "input"), ({"input": [[5, 100000]]}, "input"),
                       ({"input": ""}, "input"), ({}, "input"),
                       ({"input": "a", "encoding_format": "int8"}, "encoding_format"),
                       ({"input": list(range(3, 103))}, "input")]:
        r = httpx.post(server.url + "/v1/embeddings", json={"model": "embed", **bad},
                       headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30)
        assert r.status_code == 400, (bad, r.text)
        err = r.json()["error"]
        assert err["type"] == "invalid_request_error" and err["param"] == param, (bad, err)
    r = httpx.post(server.url + "/v1/embeddings", json={"model": "embed", "input": "a"},
                   timeout=30)
    assert r.status_code == 401


def test_no_kv_kept_and_metrics_count_the_route(server, client):
    client.embeddings.create(model="emb-mean", input=["one", "two", "three"])
    # A refused request of this test's own, so the 400 counter does not depend on test order.
    with pytest.raises(openai.BadRequestError):
        client.embeddings.create(model="emb-mean", input=[])
    # Stats are published right after the step that answered: poll briefly.
    for _ in range(100):
        m = server.metrics(headers={"Authorization": f"Bearer {API_KEY}"})
        used = {k: v for k, v in m.items() if k.startswith("memra:kv_cache_blocks_used")}
        if used and all(v == 0 for v in used.values()):
            break
        time.sleep(0.05)
    assert used and all(v == 0 for v in used.values()), used
    assert m['memra:http_requests_total{route="/v1/embeddings",status="200"}'] >= 1
    assert m['memra:http_requests_total{route="/v1/embeddings",status="400"}'] >= 1


def test_the_docs_examples_run(server):
    run_doc_examples(server, "Embeddings")


def test_an_embed_alias_without_pooling_is_refused_at_load(build_dir):
    # The HF fixture folder names no pooling (no GGUF pooling_type): the alias must say one.
    proc = subprocess.run([str(real_server_binary(build_dir)), "--port", "0", "--models",
                           f"vec={FIXTURES / 'qwen3'};task=embed", "--log-level", "warn"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "model 'vec' is served for embeddings but its file names no pooling" in proc.stderr, \
        proc.stderr


def test_sentence_transformers_pooling_is_read_from_the_folder(build_dir, tmp_path, client, tol):
    folder = tmp_path / "qwen3-st"
    shutil.copytree(FIXTURES / "qwen3", folder)
    (folder / "1_Pooling").mkdir()
    (folder / "1_Pooling" / "config.json").write_text(json.dumps(
        {"word_embedding_dimension": 96, "pooling_mode_cls_token": False,
         "pooling_mode_mean_tokens": False, "pooling_mode_lasttoken": True}))
    s = Server(real_server_binary(build_dir),
               ["--models", f"st={folder};task=embed", "--ctx-size", "96", "--threads", "2",
                "--log-level", "warn"], env={"MEMRA_API_KEYS": API_KEY}, timeout=120)
    try:
        ref = reference("qwen3")
        out = openai_client(s, timeout=60).embeddings.create(model="st", input=ref["inputs"])
        for d, want in zip(out.data, ref["last"]):
            assert rel_err(d.embedding, want) <= tol
    finally:
        s.stop()
