"""Tokenizer gate: memra's token ids and decoded text against Hugging Face `tokenizers`.

Oracles: the upstream HF ids in the test data's vocab/*.inp/.out, and `tokenizers` pipelines rebuilt
from each GGUF (tokenizer_oracle.py) which must first reproduce those upstream ids. Every loadable
tokenizer is checked on the upstream strings and on the >= 500-string hard corpus
(tokenizer_corpus.py), through both loaders: the GGUF and a tokenizer.json written by `tokenizers`.
"""
import json
import subprocess

import pytest

import tokenizer_corpus
import tokenizer_oracle

SEP = "\n__ggml_vocab_test__\n"
# Every ggml-vocab-*.gguf of the test data is in exactly one of these (a test checks it, so a newer
# artifact with new files fails until they are classified here).
# With upstream ids (.inp/.out) and loaded by memra: each gets an oracle validated against them.
LOADABLE = ["gpt-2", "mpt", "starcoder", "refact", "falcon", "deepseek-coder", "deepseek-llm", "llama-spm", "phi-3",
            "qwen2", "qwen35", "llama-bpe", "command-r", "gemma-4"]
# Loaded, but no upstream ids ship for them, so there is nothing to validate an oracle against.
LOADS_UNCHECKED = ["aquila", "baichuan", "gpt-neox"]
# Tokenizer models memra does not implement: refused by name.
REFUSED = {"bert-bge": "bert",  # WordPiece
           "nomic-bert-moe": "t5"}  # SentencePiece Unigram


def memra_batch(memra_bin, source, texts, parse_special=True, add_special=False):
    request = {"texts": texts, "parse_special": parse_special, "add_special": add_special}
    proc = subprocess.run([str(memra_bin), "tokenize", "-m", str(source), "--batch", "-"],
                          input=json.dumps(request), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["results"]


def read_cases(vocab_dir, name):
    """llama.cpp's format: each .inp string is followed by SEP (ggml-vocab-gemma-4's last one is
    not); the .out has one line of space-separated ids per string."""
    inp = (vocab_dir / f"ggml-vocab-{name}.gguf.inp").read_text(encoding="utf-8").split(SEP)
    if inp[-1] == "":
        inp.pop()
    out = (vocab_dir / f"ggml-vocab-{name}.gguf.out").read_text(encoding="utf-8").split("\n")
    if out[-1] == "":
        out.pop()
    assert len(inp) == len(out) and len(inp) > 10, (name, len(inp), len(out))
    return inp, [[int(x) for x in line.split()] for line in out]


def corpus_inputs():
    """(texts for memra, the strings the oracle sees): invalid bytes go as hex, repaired for HF."""
    texts = tokenizer_corpus.corpus()
    invalid = tokenizer_corpus.invalid_utf8_corpus()
    return (texts + [{"hex": b.hex()} for b in invalid],
            texts + [b.decode("utf-8", errors="replace") for b in invalid])


def check_against_oracle(memra_bin, source, oracle, label):
    ours, theirs = corpus_inputs()
    assert len(ours) >= 500
    results = memra_batch(memra_bin, source, ours)
    failures = []
    for text, res in zip(theirs, results):
        expected = oracle.encode(text, add_special_tokens=False).ids
        if res["ids"] != expected:
            failures.append(f"ids {text!r}: memra {res['ids'][:16]} hf {expected[:16]}")
            continue
        decoded = oracle.decode(expected, skip_special_tokens=False)
        if res["decoded"] != decoded:
            failures.append(f"decode {text!r}: memra {res['decoded']!r} hf {decoded!r}")
        if res["streamed"] != res["decoded"]:
            failures.append(f"stream {text!r}: {res['streamed']!r} != {res['decoded']!r}")
    assert not failures, f"{label}: {len(failures)} of {len(theirs)} differ:\n" + "\n".join(failures[:10])


@pytest.mark.parametrize("name", LOADABLE)
def test_vocab_matches_upstream_ids_and_oracle(memra_bin, test_data, tmp_path, name):
    vocab_dir = test_data / "vocab"
    gguf_path = vocab_dir / f"ggml-vocab-{name}.gguf"
    inputs, expected = read_cases(vocab_dir, name)
    oracle, _ = tokenizer_oracle.oracle_from_gguf(gguf_path)
    # The oracle is trusted only if it reproduces the upstream Hugging Face ids.
    assert [oracle.encode(s, add_special_tokens=False).ids for s in inputs] == expected
    results = memra_batch(memra_bin, gguf_path, inputs)
    for text, ids, res in zip(inputs, expected, results):
        assert res["ids"] == ids, f"{name}: {text!r}"
        assert res["decoded"] == oracle.decode(ids, skip_special_tokens=False), f"{name}: {text!r}"
        assert res["streamed"] == res["decoded"]
    check_against_oracle(memra_bin, gguf_path, oracle, f"{name} (GGUF)")
    folder = tokenizer_oracle.write_hf_folder(oracle, tmp_path / name)
    check_against_oracle(memra_bin, folder, oracle, f"{name} (tokenizer.json)")


def test_default_model_tokenizer(memra_bin, test_data, default_model, tmp_path):
    """Gemma 3 (SentencePiece BPE, byte fallback): the oracle must reproduce the upstream Gemma
    ids of ggml-vocab-gemma-4 (same vocabulary) before it judges memra."""
    oracle, _ = tokenizer_oracle.oracle_from_gguf(default_model)
    inputs, expected = read_cases(test_data / "vocab", "gemma-4")
    assert [oracle.encode(s, add_special_tokens=False).ids for s in inputs] == expected
    results = memra_batch(memra_bin, default_model, inputs)
    assert [r["ids"] for r in results] == expected
    check_against_oracle(memra_bin, default_model, oracle, "gemma-3 (GGUF)")
    folder = tokenizer_oracle.write_hf_folder(oracle, tmp_path / "gemma3")
    check_against_oracle(memra_bin, folder, oracle, "gemma-3 (tokenizer.json)")


def test_special_tokens_only_when_allowed(memra_bin, test_data, default_model):
    gpt2 = test_data / "vocab" / "ggml-vocab-gpt-2.gguf"
    text = "a<|endoftext|>b"
    allowed, denied = (memra_batch(memra_bin, gpt2, [text], parse_special=p)[0]["ids"] for p in (True, False))
    assert 50256 in allowed and 50256 not in denied
    turn = "<start_of_turn>user\nhi<end_of_turn>"
    allowed, denied = (memra_batch(memra_bin, default_model, [turn], parse_special=p)[0]["ids"] for p in (True, False))
    assert allowed[0] == 105 and 105 not in denied and 106 not in denied


def test_add_special_adds_bos(memra_bin, default_model):
    with_bos, without = (memra_batch(memra_bin, default_model, ["Hi"], add_special=a)[0]["ids"] for a in (True, False))
    assert with_bos == [2] + without


@pytest.mark.parametrize("name,model", sorted(REFUSED.items()))
def test_unsupported_vocab_is_refused_by_name(memra_bin, test_data, name, model):
    proc = subprocess.run([str(memra_bin), "tokenize", "-m", str(test_data / "vocab" / f"ggml-vocab-{name}.gguf"),
                           "--text", "hi"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"unsupported tokenizer model '{model}'" in proc.stderr


def test_every_vocab_file_is_classified(test_data):
    names = {p.name[len("ggml-vocab-"):-len(".gguf")] for p in (test_data / "vocab").glob("ggml-vocab-*.gguf")}
    listed = [*LOADABLE, *LOADS_UNCHECKED, *REFUSED]
    assert len(listed) == len(set(listed))
    assert names == set(listed), f"unlisted: {sorted(names - set(listed))}, absent: {sorted(set(listed) - names)}"
    with_ids = {n for n in names if (test_data / "vocab" / f"ggml-vocab-{n}.gguf.out").exists()}
    assert with_ids <= set(LOADABLE) | set(REFUSED), sorted(with_ids - set(LOADABLE) - set(REFUSED))


@pytest.mark.parametrize("name", LOADS_UNCHECKED)
def test_vocab_without_upstream_ids_loads(memra_bin, test_data, name):
    """No ids to compare with: memra loads the file and decoding gives the text back."""
    texts = ["Hello world", " leading space", "tabs\tand\nnewlines", "ünïcödé 日本語 🙂", "x = 42;"]
    for text, res in zip(texts, memra_batch(memra_bin, test_data / "vocab" / f"ggml-vocab-{name}.gguf", texts)):
        assert res["ids"] and res["streamed"] == res["decoded"], (name, text, res)
