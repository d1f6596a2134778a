"""`memra run` on the real packaged model (Gemma 3 270M Q4_K_M, the base model: it has no chat
template, so prompts use a plain "Question: ...\\nAnswer:" form), greedy. Each answer must contain
the expected fact; generation stops at the first newline (a stop string, which is not emitted)."""
import subprocess

import pytest

FACTS = [
    ("What is the capital of France?", "Paris"),
    ("What is the capital of Japan?", "Tokyo"),
    ("What is the largest planet in the solar system?", "Jupiter"),
]


def run(memra_bin, *args, timeout=120):
    return subprocess.run([memra_bin, "run", "--threads", "2", "--ctx", "512", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("question,answer", FACTS)
def test_greedy_factual_answer(memra_bin, default_model, question, answer):
    r = run(memra_bin, "-m", str(default_model), "-p", f"Question: {question}\nAnswer:",
            "-n", "12", "--stop", "\n")
    assert r.returncode == 0, r.stderr
    assert answer in r.stdout, r.stdout
    assert "\n" not in r.stdout.rstrip("\n"), "the stop string leaked into the output"
    assert "finish: stop" in r.stderr
    assert "tok/s" in r.stderr


def test_default_model_and_length_limit(memra_bin):
    # No -m: the default model. Without a stop string the run ends on max_tokens.
    r = run(memra_bin, "-p", "Question: What is the capital of France?\nAnswer:", "-n", "6")
    assert r.returncode == 0, r.stderr
    assert "Paris" in r.stdout
    assert "generation: 6 tokens" in r.stderr
    assert "finish: length" in r.stderr


def test_chat_without_template_is_refused(memra_bin, default_model):
    r = run(memra_bin, "-m", str(default_model), "--chat", "-p", "hello")
    assert r.returncode == 2
    assert "chat template" in r.stderr


def test_prompt_over_context_is_refused(memra_bin, default_model):
    r = run(memra_bin, "-m", str(default_model), "-p", "hello", "-n", "600")
    assert r.returncode == 2
    assert "600" in r.stderr and "512" in r.stderr


def test_bad_flag_is_refused(memra_bin):
    r = subprocess.run([memra_bin, "run", "-p", "x", "--top-p", "lots"], capture_output=True,
                       text=True)
    assert r.returncode == 2
    assert "--top-p" in r.stderr


def test_deterministic_off_is_said_to_change_nothing_on_the_cpu(memra_bin, default_model):
    # The CPU has only the batch-invariant path: --deterministic off runs it and says so.
    question, answer = FACTS[0]
    r = run(memra_bin, "-m", str(default_model), "--device", "cpu", "--deterministic", "off",
            "-p", f"Question: {question}\nAnswer:", "-n", "12", "--stop", "\n")
    assert r.returncode == 0, r.stderr
    assert answer in r.stdout, r.stdout
    assert "deterministic off: no effect on the CPU" in r.stderr, r.stderr
