#!/usr/bin/env python3
"""Test data from a pinned PyPI artifact (scripts/test-data.txt): vocabulary GGUF files with their
upstream test strings and ids, and real chat templates, from llama.cpp's `models/` folder as
vendored in the source distribution of `llama-cpp-python`.

    python scripts/fetch_test_data.py            # fetch + verify + unpack once; quick when done
    python scripts/fetch_test_data.py --from F   # use an sdist already downloaded (offline)
    python scripts/fetch_test_data.py --path     # print the folder the tests read

The folder is $MEMRA_TEST_DATA, else ~/.cache/memra/test-data/<package>-<version>; it holds
vocab/ggml-vocab-*.gguf{,.inp,.out} and chat-templates/*.jinja, and a stamp (the sdist's sha256
plus every unpacked file's size) written last, so a half-done unpack is never taken for data.
Standard library only: the test fixtures (tests/python/conftest.py) import `check` from here.
"""
import argparse
import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
LOCK = ROOT / "scripts" / "test-data.txt"
STAMP = ".stamp"
VOCAB_PREFIX = "vendor/llama.cpp/models/ggml-vocab-"
TEMPLATE_PREFIX = "vendor/llama.cpp/models/templates/"


class TestDataError(Exception):
    pass


def pin():
    """{'package', 'version', 'sha256'} from scripts/test-data.txt."""
    fields = {}
    for line in LOCK.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            key, value = line.split(None, 1)
            fields[key] = value.strip()
    missing = {"package", "version", "sha256"} - fields.keys()
    if missing:
        raise TestDataError(f"{LOCK}: missing {sorted(missing)}")
    return fields


def data_dir(p=None):
    p = p or pin()
    env = os.environ.get("MEMRA_TEST_DATA")
    if env:
        return pathlib.Path(env)
    return pathlib.Path.home() / ".cache" / "memra" / "test-data" / f"{p['package']}-{p['version']}"


def fetch_hint(p):
    return (f"run scripts/setup.sh (or: .venv/bin/python scripts/fetch_test_data.py), which "
            f"downloads the PyPI sdist {p['package']}=={p['version']} (sha256 {p['sha256']}); "
            f"offline, pass that file with --from")


def check(folder=None):
    """The test data folder, after checking its stamp names the pinned sha256 and every file it
    lists is there with its size. Raises TestDataError saying what to fetch otherwise.
    MEMRA_TEST_DATA_ONLY=PREFIX checks only the files under PREFIX (e.g. chat-templates/): a
    partial copy for a machine that runs only the tests needing those (scripts/gpu_server_tests.sh;
    a test reading another file then fails on it by name)."""
    p = pin()
    folder = pathlib.Path(folder) if folder else data_dir(p)
    only = os.environ.get("MEMRA_TEST_DATA_ONLY", "")
    stamp = folder / STAMP
    if not stamp.is_file():
        raise TestDataError(f"test data not found at {folder}: {fetch_hint(p)}")
    lines = stamp.read_text(encoding="utf-8").splitlines()
    if not lines or lines[0] != p["sha256"]:
        raise TestDataError(f"test data at {folder} is from another artifact than "
                            f"scripts/test-data.txt pins: {fetch_hint(p)}")
    for line in lines[1:]:
        size, rel = line.split(" ", 1)
        if not rel.startswith(only):
            continue
        path = folder / rel
        if not path.is_file() or path.stat().st_size != int(size):
            raise TestDataError(f"test data file {path} is missing or changed: {fetch_hint(p)}")
    return folder


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def download(p, into):
    spec = f"{p['package']}=={p['version']}"
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
           "--disable-pip-version-check", "-q", spec, "-d", str(into)]
    print(f"test data: downloading {spec} (sdist, ~77 MB) from PyPI", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = sorted(pathlib.Path(into).glob("*.tar.gz"))
    if proc.returncode != 0 or len(found) != 1:
        raise TestDataError(f"could not download {spec}: `{' '.join(cmd)}` exited "
                            f"{proc.returncode}:\n{proc.stderr[-2000:]}\n{fetch_hint(p)}")
    return found[0]


def member_target(name):
    """Where an archive member goes in the data folder, or None for members we do not keep."""
    parts = name.split("/", 1)  # drop the sdist's top folder, llama_cpp_python-<version>/
    rel = parts[1] if len(parts) == 2 else ""
    base = rel.rsplit("/", 1)[-1]
    if rel.startswith(VOCAB_PREFIX) and "/" not in rel[len("vendor/llama.cpp/models/"):]:
        return f"vocab/{base}"
    if rel.startswith(TEMPLATE_PREFIX) and "/" not in rel[len(TEMPLATE_PREFIX):] and base:
        return f"chat-templates/{base}"
    return None


def unpack(p, sdist, folder):
    got = sha256_of(sdist)
    if got != p["sha256"]:
        raise TestDataError(f"{sdist}: sha256 {got}, but scripts/test-data.txt pins "
                            f"{p['sha256']} for {p['package']}=={p['version']} (corrupted or "
                            f"another file): {fetch_hint(p)}")
    folder.parent.mkdir(parents=True, exist_ok=True)
    # Unpack beside the target and rename into place: a crash or a concurrent run never leaves a
    # half-filled folder that looks done (the stamp is written inside before the rename).
    staging = pathlib.Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    manifest = []
    with tarfile.open(sdist, "r:gz") as tar:
        for m in tar:
            rel = member_target(m.name)
            if rel is None or not m.isfile():
                continue
            dest = staging / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            with tar.extractfile(m) as src, open(dest, "wb") as out:
                shutil.copyfileobj(src, out)
            manifest.append(f"{m.size} {rel}")
    vocab = [x for x in manifest if x.split(" ", 1)[1].startswith("vocab/")]
    if not vocab or len(manifest) == len(vocab):
        shutil.rmtree(staging)
        raise TestDataError(f"{sdist} holds no {VOCAB_PREFIX}* or {TEMPLATE_PREFIX}* files")
    manifest.sort(key=lambda line: line.split(" ", 1)[1])
    (staging / STAMP).write_text("\n".join([p["sha256"]] + manifest) + "\n", encoding="utf-8")
    if folder.exists():
        shutil.rmtree(folder)
    os.replace(staging, folder)
    return len(vocab), len(manifest) - len(vocab)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--from", dest="source", help="an already downloaded sdist to unpack")
    ap.add_argument("--path", action="store_true", help="print the data folder and exit")
    args = ap.parse_args()
    p = pin()
    folder = data_dir(p)
    if args.path:
        print(folder)
        return 0
    try:
        if not args.source:
            try:
                check(folder)
                print(f"test data: ok ({folder})")
                return 0
            except TestDataError:
                pass
        with tempfile.TemporaryDirectory(prefix="memra-test-data-") as tmp:
            sdist = pathlib.Path(args.source) if args.source else download(p, tmp)
            n_vocab, n_templates = unpack(p, sdist, folder)
        check(folder)
    except TestDataError as e:
        print(f"fetch_test_data: error: {e}", file=sys.stderr)
        return 1
    print(f"test data: {n_vocab} vocabulary files, {n_templates} template files in {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
