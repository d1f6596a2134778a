"""The memra CLI's contract: usage errors exit 2 and name the problem."""
import subprocess


def test_unknown_command_exits_2(memra_bin):
    r = subprocess.run([memra_bin, "frobnicate"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "frobnicate" in r.stderr


def test_version(memra_bin):
    r = subprocess.run([memra_bin, "--version"], capture_output=True, text=True)
    assert r.returncode == 0
    assert r.stdout.startswith("memra ")
