"""The memra CLI's contract: usage errors exit 2 and name the problem."""
import subprocess

import pytest


def test_unknown_command_exits_2(memra_bin):
    r = subprocess.run([memra_bin, "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "frobnicate" in r.stderr


def test_version(memra_bin):
    r = subprocess.run([memra_bin, "--version"], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.startswith("memra ")


@pytest.mark.parametrize("args, named", [
    (["bench-structured", "--runs", "5x"], "--runs"),
    (["bench-tokenizer", "--mb"], "--mb needs a value"),
    (["bench", "-r", "2"], "-r expects an integer in [3, 1000]"),
    (["run", "--max-tokens"], "--max-tokens needs a value"),
    (["bench", "--deterministic", "maybe"], "--deterministic expects on or off, got 'maybe'"),
    (["run", "--deterministic", "sometimes"], "--deterministic expects on or off"),
])
def test_bad_option_values_exit_2_naming_the_flag(memra_bin, args, named):
    r = subprocess.run([str(memra_bin), *args], capture_output=True, text=True)
    assert r.returncode == 2 and named in r.stderr, r.stderr
