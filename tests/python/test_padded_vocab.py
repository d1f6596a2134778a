"""A checkpoint with more embedding rows than tokenizer ids, as padded Hugging Face checkpoints are
(Qwen2.5/Qwen3: 151,936 rows for ~151,665 ids): a copy of the qwen2 fixture with 8 extra zero
rows. Ids without a token must never be sampled, and no request may take the server down.
Before the fix `/v1/completions` with temperature 1e-40 aborted memra-server (rc 134) and
`memra run --temp 1` aborted on some seeds."""
import json
import pathlib
import shutil
import subprocess

import httpx
import pytest

from hf_folder import pad_safetensors
from server_harness import Server, real_server_binary

FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "fixtures" / "models" / "qwen2"
EXTRA_ROWS = 8


@pytest.fixture(scope="module")
def padded_model(tmp_path_factory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("qwen2-padded")
    for f in ("tokenizer.json", "generation_config.json"):
        shutil.copy(FIXTURE / f, d / f)
    rows = pad_safetensors(FIXTURE / "model.safetensors", d / "model.safetensors",
                           "model.embed_tokens.weight", EXTRA_ROWS)
    config = json.loads((FIXTURE / "config.json").read_text())
    assert config["tie_word_embeddings"], "the padded rows must reach the logits"
    config["vocab_size"] = rows
    (d / "config.json").write_text(json.dumps(config))
    return d


def test_memra_run_samples_only_real_tokens(memra_bin, padded_model):
    for args in (["--temp", "1e-40"], *(["--temp", "1", "--seed", str(s)] for s in range(4))):
        r = subprocess.run([memra_bin, "run", "-m", str(padded_model), "-p", "hello world",
                            "-n", "24", "--ignore-eos", "--threads", "1", *args],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (args, r.stderr[-2000:])
        assert "finish: length" in r.stderr, (args, r.stderr[-2000:])


def test_server_survives_tiny_temperature_and_sampling(build_dir, padded_model):
    s = Server(real_server_binary(build_dir), ["--model", str(padded_model), "--threads", "1",
                                               "--log-level", "warn"])
    try:
        greedy = httpx.post(s.url + "/v1/completions", timeout=60, json={
            "prompt": "hello world", "max_tokens": 16, "temperature": 0, "ignore_eos": True})
        assert greedy.status_code == 200, greedy.text
        tiny = httpx.post(s.url + "/v1/completions", timeout=60, json={
            "prompt": "hello world", "max_tokens": 16, "temperature": 1e-40, "ignore_eos": True})
        assert tiny.status_code == 200, tiny.text
        assert tiny.json()["choices"][0]["text"] == greedy.json()["choices"][0]["text"]
        for seed in range(4):
            r = httpx.post(s.url + "/v1/completions", timeout=60, json={
                "prompt": "hello world", "max_tokens": 24, "temperature": 1.5, "seed": seed,
                "ignore_eos": True, "logprobs": 5})
            assert r.status_code == 200, r.text
            assert r.json()["choices"][0]["finish_reason"] == "length"
        assert httpx.get(s.url + "/health").status_code == 200
    finally:
        rc = s.stop()
    assert rc == 0, s.log_text()
