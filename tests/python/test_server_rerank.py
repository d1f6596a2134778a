"""POST /v1/rerank (Cohere / Jina shape) against memra-server on a tiny model fixture (CPU engine):
yes/no next-token probability with a per-model prompt (here a prompt file and the fixture's
one-character answer tokens), scores identical alone and batched, top_n and return_documents,
refusals by name (at load for a model without a prompt, per request for the wrong alias)."""
import os
import pathlib
import re
import subprocess
import sys

import httpx
import pytest

from server_harness import API_KEY, Server, real_server_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "models"
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
DOCS = ["dogs bark", "cats meow", "fish swim", "cats purr softly"]


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
def server(build_dir, tmp_path_factory):
    prompt = tmp_path_factory.mktemp("rerank") / "prompt.txt"
    prompt.write_text("Query: {query} Document: {document} Relevant:")
    entries = [f"rerank={FIXTURES / 'qwen3'};task=rerank;rerank_prompt={prompt};rerank_tokens=y/n",
               f"chat={FIXTURES / 'qwen2'}"]
    s = Server(real_server_binary(build_dir),
               ["--models", ",".join(entries), "--ctx-size", "96", "--threads", "2",
                "--log-level", "warn"], env={"MEMRA_API_KEYS": API_KEY}, timeout=120)
    yield s
    s.stop()


def rerank(server, **body):
    r = httpx.post(server.url + "/v1/rerank", json={"model": "rerank", **body}, headers=HEADERS,
                   timeout=60)
    return r.status_code, r.json()


def test_scores_are_probabilities_sorted_and_equal_alone_and_batched(server):
    status, out = rerank(server, query="cats", documents=DOCS)
    assert status == 200, out
    assert out["model"] == "rerank" and out["id"].startswith("rerank-")
    results = out["results"]
    assert sorted(r["index"] for r in results) == list(range(len(DOCS)))
    scores = [r["relevance_score"] for r in results]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 < s < 1.0 for s in scores)
    assert len(set(scores)) > 1, "every document scored the same"
    assert out["usage"]["prompt_tokens"] > 0
    assert all("document" not in r for r in results)
    by_index = {r["index"]: r["relevance_score"] for r in results}
    for i, doc in enumerate(DOCS):
        status, alone = rerank(server, query="cats", documents=[{"text": doc}])
        assert status == 200
        assert alone["results"][0]["relevance_score"] == by_index[i], doc


def test_top_n_and_return_documents(server):
    _, full = rerank(server, query="cats", documents=DOCS)
    status, out = rerank(server, query="cats", documents=DOCS, top_n=2, return_documents=True)
    assert status == 200
    assert out["results"] == [dict(r, document={"text": DOCS[r["index"]]})
                              for r in full["results"][:2]]


def test_refusals_name_the_field(server):
    for bad, param in [({"query": "", "documents": DOCS}, "query"),
                       ({"query": "q", "documents": []}, "documents"),
                       ({"query": "q", "documents": [3]}, "documents"),
                       ({"query": "q", "documents": DOCS, "top_n": 0}, "top_n"),
                       ({"query": "q", "documents": ["x" * 200]}, "documents"),
                       ({"query": "q", "documents": DOCS, "rank_fields": ["a"]}, "rank_fields")]:
        status, out = rerank(server, **bad)
        assert status == 400, (bad, out)
        assert out["error"]["param"] == param, (bad, out)
    r = httpx.post(server.url + "/v1/rerank", json={"model": "chat", "query": "q",
                                                    "documents": DOCS}, headers=HEADERS,
                   timeout=30)
    assert r.status_code == 400 and "not served for rerank" in r.json()["error"]["message"]
    r = httpx.post(server.url + "/v1/chat/completions",
                   json={"model": "rerank", "messages": [{"role": "user", "content": "hi"}]},
                   headers=HEADERS, timeout=30)
    assert r.status_code == 400 and "rerank only" in r.json()["error"]["message"]
    # A good request of this test's own, so the 200 counter does not depend on test order (xdist).
    status, out = rerank(server, query="q", documents=DOCS)
    assert status == 200, out
    m = server.metrics(headers=HEADERS)
    assert m['memra:http_requests_total{route="/v1/rerank",status="200"}'] >= 1
    assert m['memra:http_requests_total{route="/v1/rerank",status="400"}'] >= 1


def test_a_model_without_a_rerank_prompt_is_refused_at_load(build_dir):
    proc = subprocess.run([str(real_server_binary(build_dir)), "--port", "0", "--models",
                           f"rerank={FIXTURES / 'llama'};task=rerank", "--log-level", "warn"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "no rerank prompt for a llama model" in proc.stderr, proc.stderr


def test_the_docs_examples_run(server):
    run_doc_examples(server, "Rerank")
