"""Shared pytest fixtures: where the build, the test data and the default model live."""
import os
import pathlib
import sys

import pytest

from required import missing

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import fetch_test_data  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "real_weights: the assertions need the real default model's answers (a fact, a "
        "tool call or a stop string reached within max_tokens), not just its tokenizer; "
        "scripts/gpu_server_tests.sh deselects these on a random-weight file of its shape")


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MEMRA_BUILD_DIR", ROOT / "build" / "cpu"))


@pytest.fixture(scope="session")
def memra_bin(build_dir) -> pathlib.Path:
    path = build_dir / "tools" / "memra"
    assert path.exists(), f"{path} is missing: build the cpu preset first"
    return path


@pytest.fixture(scope="session")
def test_data() -> pathlib.Path:
    """The pinned test data (vocab/, chat-templates/) unpacked by scripts/fetch_test_data.py.
    Missing or stale data fails the test with what to fetch (a skip only under
    MEMRA_ALLOW_MISSING_TEST_DATA=1, required.py)."""
    try:
        return fetch_test_data.check()
    except fetch_test_data.TestDataError as e:
        missing(str(e))


@pytest.fixture(scope="session")
def default_model() -> pathlib.Path:
    model_dir = pathlib.Path(os.environ.get("MEMRA_MODEL_DIR", pathlib.Path.home() / ".cache/memra/models"))
    path = model_dir / "gemma-3-270m-q4_k_m.gguf"
    if not path.exists():
        missing(f"{path} (run scripts/setup.sh)")
    return path
