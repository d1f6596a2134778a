"""scripts/fetch_test_data.py's check on hand-made folders: the stamp's pin and every listed file's
size, and MEMRA_TEST_DATA_ONLY, which limits the check to one prefix (the chat templates that
scripts/device_pack.sh carries to a GPU machine without the 75 MB of vocabularies)."""
import fetch_test_data
import pytest


def make_folder(root, files, listed):
    """files: {relative path: bytes} written under root; listed: the stamp's entries."""
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    lines = [fetch_test_data.pin()["sha256"]] + [f"{size} {rel}" for rel, size in listed.items()]
    (root / fetch_test_data.STAMP).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_a_partial_copy_passes_only_for_its_prefix(tmp_path, monkeypatch):
    folder = make_folder(tmp_path, {"chat-templates/a.jinja": b"{{ x }}"},
                         {"chat-templates/a.jinja": 7, "vocab/ggml-vocab-x.gguf": 1000})
    monkeypatch.delenv("MEMRA_TEST_DATA_ONLY", raising=False)
    with pytest.raises(fetch_test_data.TestDataError, match="vocab/ggml-vocab-x.gguf"):
        fetch_test_data.check(folder)
    monkeypatch.setenv("MEMRA_TEST_DATA_ONLY", "chat-templates/")
    assert fetch_test_data.check(folder) == folder


def test_the_prefix_still_checks_its_own_files(tmp_path, monkeypatch):
    folder = make_folder(tmp_path, {"chat-templates/a.jinja": b"{{ x }}"},
                         {"chat-templates/a.jinja": 8})  # the file changed size
    monkeypatch.setenv("MEMRA_TEST_DATA_ONLY", "chat-templates/")
    with pytest.raises(fetch_test_data.TestDataError, match="a.jinja is missing or changed"):
        fetch_test_data.check(folder)


def test_another_artifact_is_refused_whatever_the_prefix(tmp_path, monkeypatch):
    folder = make_folder(tmp_path, {}, {})
    (folder / fetch_test_data.STAMP).write_text("0" * 64 + "\n", encoding="utf-8")
    monkeypatch.setenv("MEMRA_TEST_DATA_ONLY", "chat-templates/")
    with pytest.raises(fetch_test_data.TestDataError, match="another artifact"):
        fetch_test_data.check(folder)
