"""Shared pytest fixtures: where the build and the shared test data live."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def build_dir() -> pathlib.Path:
    return pathlib.Path(os.environ.get("MEMRA_BUILD_DIR", ROOT / "build" / "cpu"))


@pytest.fixture(scope="session")
def memra_bin(build_dir) -> pathlib.Path:
    path = build_dir / "tools" / "memra"
    assert path.exists(), f"{path} is missing: build the cpu preset first"
    return path


@pytest.fixture(scope="session")
def shared_data() -> pathlib.Path:
    """../shared/data beside the checkout (read in place, never copied into the repo)."""
    path = pathlib.Path(os.environ.get("MEMRA_SHARED_DATA", ROOT.parent / "shared" / "data"))
    assert path.is_dir(), f"shared test data not found at {path}"
    return path


@pytest.fixture(scope="session")
def default_model() -> pathlib.Path:
    model_dir = pathlib.Path(os.environ.get("MEMRA_MODEL_DIR", pathlib.Path.home() / ".cache/memra/models"))
    path = model_dir / "gemma-3-270m-q4_k_m.gguf"
    assert path.exists(), f"{path} missing: run scripts/setup.sh"
    return path
