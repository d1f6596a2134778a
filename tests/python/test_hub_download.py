"""First-run downloads of hf: sources (src/hub) against a local fake hub (fake_hub.py) named by
HF_ENDPOINT: the cache layout huggingface_hub reads (and the reverse), cache hits without the
network, resume, hash checks, tokens, offline mode, concurrent downloads, sharded files, the
errors, and a server that stays unready while its model downloads. Nothing leaves the machine."""
import os
import pathlib
import shutil
import socket
import subprocess
import time

import httpx
import pytest

from fake_hub import FakeHub, git_sha1, sha256
from server_harness import Server, free_port, real_server_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "models" / "llama"
GGUF = os.urandom(3 << 19)  # 1.5 MiB: several chunks, so cuts and concurrency show
REPO = "org/m-GGUF"


@pytest.fixture
def hub():
    h = FakeHub()
    h.add_repo(REPO, {"m-Q4_K_M.gguf": GGUF, "m-Q8_0.gguf": b"q8" * 1000,
                      "BF16/m-bf16.gguf": b"bf16" * 100, "README.md": b"# a model\n"})
    yield h
    h.close()


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "hub"


def hub_env(hub, cache, **extra):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("HF_", "HUGGING")) and k != "TRANSFORMERS_OFFLINE"}
    env.update(HF_ENDPOINT=hub.url if hub else f"http://127.0.0.1:{free_port()}",
               HF_HUB_CACHE=str(cache), HF_HOME=str(cache.parent / "hf-home"),
               NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
    env.update(extra)
    return env


def pull(memra_bin, source, env, timeout=60):
    return subprocess.run([str(memra_bin), "pull", source], env=env, capture_output=True,
                          text=True, timeout=timeout)


def repo_dir(cache, repo=REPO):
    return cache / ("models--" + repo.replace("/", "--"))


def leftovers(cache):
    return sorted(p.name for p in cache.rglob("*") if p.name.endswith((".incomplete", ".tmp")))


def test_fresh_download_is_the_hub_cache_layout(memra_bin, hub, cache):
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr
    commit = hub.repos[REPO].commit
    snap = repo_dir(cache) / "snapshots" / commit
    assert r.stdout.strip() == str(snap / "m-Q4_K_M.gguf")
    link = snap / "m-Q4_K_M.gguf"
    assert os.readlink(link) == f"../../blobs/{sha256(GGUF)}"
    assert link.read_bytes() == GGUF
    assert (repo_dir(cache) / "refs" / "main").read_text() == commit
    assert (cache / ".locks" / f"models--org--m-GGUF" / f"{sha256(GGUF)}.lock").exists()
    assert sorted(p.name for p in snap.iterdir()) == ["m-Q4_K_M.gguf"]  # only the quant asked for
    assert leftovers(cache) == []
    assert [q.authorization for q in hub.requests] == [""] * len(hub.requests)

    # huggingface_hub finds the file memra wrote, and its cache scan sees a well-formed repo.
    import huggingface_hub
    path = huggingface_hub.hf_hub_download(REPO, "m-Q4_K_M.gguf", cache_dir=cache,
                                           local_files_only=True)
    assert pathlib.Path(path) == link
    info = huggingface_hub.scan_cache_dir(cache)
    assert info.warnings == []
    (repo,) = info.repos
    assert repo.repo_id == REPO and repo.size_on_disk == len(GGUF)
    assert [rev.commit_hash for rev in repo.revisions] == [commit]


def test_memra_reads_what_huggingface_hub_wrote(memra_bin, hub, cache):
    import huggingface_hub
    path = huggingface_hub.hf_hub_download(REPO, "m-Q8_0.gguf", cache_dir=cache,
                                           endpoint=hub.url)
    n = len(hub.requests)
    offline = pull(memra_bin, f"hf:{REPO}:Q8_0", hub_env(None, cache, HF_HUB_OFFLINE="1"))
    assert offline.returncode == 0, offline.stderr
    assert offline.stdout.strip() == path
    online = pull(memra_bin, f"hf:{REPO}:Q8_0", hub_env(hub, cache))
    assert online.returncode == 0, online.stderr
    assert online.stdout.strip() == path
    assert "0.0 MiB downloaded" in online.stderr
    assert not any(q.path.startswith("/cdn/") for q in hub.requests[n:])  # the blob was reused


def test_cached_model_needs_no_network(memra_bin, build_dir, hub, cache):
    hub.add_repo("org/tiny", {p.name: p.read_bytes() for p in FIXTURE.iterdir()
                              if p.name != "reference.json"})
    tokenize = [str(build_dir / "tools" / "memra"), "tokenize", "-m", "hf:org/tiny", "--text", "hi"]
    first = subprocess.run(tokenize, env=hub_env(hub, cache), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    hub.close()
    again = subprocess.run(tokenize, env=hub_env(hub, cache), capture_output=True, text=True)
    assert again.returncode == 0, again.stderr  # the hub is gone: the cache alone served it
    assert again.stdout == first.stdout
    gone = pull(memra_bin, "hf:org/tiny", hub_env(hub, cache))  # pull asks the hub: unreachable
    assert gone.returncode == 1 and "hub_unreachable" in gone.stderr, gone.stderr


def test_resume_after_a_cut_connection(memra_bin, hub, cache):
    hub.cut_after[sha256(GGUF)] = [600000, 1]
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr
    gets = hub.blob_requests(GGUF)
    assert [g.range for g in gets] == ["", "bytes=600000-"]
    assert pathlib.Path(r.stdout.strip()).read_bytes() == GGUF
    assert leftovers(cache) == []


def test_resume_a_partial_from_an_earlier_run(memra_bin, hub, cache):
    blobs = repo_dir(cache) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{sha256(GGUF)}.incomplete").write_bytes(GGUF[:123456])
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr
    assert [g.range for g in hub.blob_requests(GGUF)] == ["bytes=123456-"]
    assert pathlib.Path(r.stdout.strip()).read_bytes() == GGUF


def test_a_bad_partial_from_an_earlier_run_is_downloaded_again(memra_bin, hub, cache):
    blobs = repo_dir(cache) / "blobs"
    blobs.mkdir(parents=True)
    (blobs / f"{sha256(GGUF)}.incomplete").write_bytes(b"\0" * 1000)
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr
    assert "downloading it again" in r.stderr
    assert [g.range for g in hub.blob_requests(GGUF)] == ["bytes=1000-", ""]
    assert pathlib.Path(r.stdout.strip()).read_bytes() == GGUF
    assert leftovers(cache) == []


def test_hash_mismatch_removes_the_partial(memra_bin, hub, cache):
    hub.corrupt.add(sha256(GGUF))
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache))
    assert r.returncode == 1
    assert "hub_hash_mismatch" in r.stderr and "partial file was removed" in r.stderr, r.stderr
    assert sha256(GGUF) in r.stderr
    blobs = repo_dir(cache) / "blobs"
    assert list(blobs.iterdir()) == []
    assert not (repo_dir(cache) / "snapshots").exists()
    assert not (repo_dir(cache) / "refs" / "main").exists()


def test_token_for_private_and_gated_repos(memra_bin, hub, cache, tmp_path):
    hub.add_repo("org/private", {"p-Q4_0.gguf": b"private" * 100}, access="private")
    hub.add_repo("org/gated", {"g-Q4_0.gguf": b"gated" * 100}, access="gated")
    r = pull(memra_bin, "hf:org/private", hub_env(hub, cache))
    assert r.returncode == 2 and "hub_unauthorized" in r.stderr and "HF_TOKEN" in r.stderr, r.stderr
    r = pull(memra_bin, "hf:org/gated", hub_env(hub, cache))
    assert r.returncode == 2 and "hub_gated" in r.stderr and "license" in r.stderr, r.stderr
    r = pull(memra_bin, "hf:org/gated", hub_env(hub, cache, HF_TOKEN="hf_wrong"))
    assert r.returncode == 2 and "hub_gated" in r.stderr and "HTTP 403" in r.stderr, r.stderr
    assert not repo_dir(cache, "org/gated").joinpath("snapshots").exists()

    n = len(hub.requests)
    r = pull(memra_bin, "hf:org/private", hub_env(hub, cache, HF_TOKEN=hub.token))
    assert r.returncode == 0, r.stderr
    for q in hub.requests[n:]:  # the token goes to the hub, never to the CDN host
        assert q.authorization == ("" if q.path.startswith("/cdn/") else f"Bearer {hub.token}")
    token_file = tmp_path / "hf-home" / "token"  # `hf auth login` stores it there
    token_file.parent.mkdir(parents=True, exist_ok=True)
    token_file.write_text(hub.token + "\n")
    r = pull(memra_bin, "hf:org/gated", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr


def test_offline_mode_never_touches_the_network(memra_bin, hub, cache):
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache, HF_HUB_OFFLINE="1"))
    assert r.returncode == 2 and "hub_offline" in r.stderr and "HF_HUB_OFFLINE" in r.stderr
    assert hub.requests == []
    assert pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache)).returncode == 0
    n = len(hub.requests)
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache, HF_HUB_OFFLINE="true"))
    assert r.returncode == 0, r.stderr
    assert len(hub.requests) == n
    r = pull(memra_bin, f"hf:{REPO}:Q8_0", hub_env(hub, cache, HF_HUB_OFFLINE="1"))
    assert r.returncode == 2 and "hub_offline" in r.stderr and "m-Q4_K_M.gguf" in r.stderr


def test_two_concurrent_downloads_share_one_transfer(memra_bin, hub, cache):
    hub.chunk_delay = 0.05  # 24 chunks: about 1.2 s, so the second process finds the lock held
    env = hub_env(hub, cache)
    procs = [subprocess.Popen([str(memra_bin), "pull", f"hf:{REPO}:Q4_K_M"], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert outs[0][0] == outs[1][0]
    assert pathlib.Path(outs[0][0].strip()).read_bytes() == GGUF
    assert len(hub.blob_requests(GGUF)) == 1
    assert leftovers(cache) == []


def test_disk_full_is_refused_before_downloading(memra_bin, hub, cache):
    hub.announced_size["m-Q4_K_M.gguf"] = 1 << 49  # 512 TiB: more than any test disk holds
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache))
    assert r.returncode == 1 and "hub_disk_full" in r.stderr and "HF_HUB_CACHE" in r.stderr, r.stderr
    assert hub.blob_requests(GGUF) == []
    assert not (repo_dir(cache) / "snapshots").exists()


def test_sharded_gguf_and_safetensors(memra_bin, hub, cache):
    shards = {f"Q4_K_M/big-Q4_K_M-0000{i}-of-00003.gguf": os.urandom(1000 + i) for i in (1, 2, 3)}
    hub.add_repo("org/big-GGUF", {**shards, "big-Q8_0.gguf": b"x"})
    r = pull(memra_bin, "hf:org/big-GGUF:Q4_K_M", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr
    first = pathlib.Path(r.stdout.strip())
    assert first.name == "big-Q4_K_M-00001-of-00003.gguf"
    for name, data in shards.items():
        assert (first.parent.parent / name).read_bytes() == data
    assert os.readlink(first) == f"../../../blobs/{sha256(shards[next(iter(shards))])}"

    index = b'{"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors", ' \
            b'"b": "model-00002-of-00002.safetensors"}}'
    files = {"config.json": b"{}", "tokenizer.json": b"{}", "model.safetensors.index.json": index,
             "model-00001-of-00002.safetensors": b"s1" * 500,
             "model-00002-of-00002.safetensors": b"s2" * 500, "pytorch_model.bin": b"never"}
    hub.add_repo("org/sharded", files)
    r = pull(memra_bin, "hf:org/sharded", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr
    snap = pathlib.Path(r.stdout.strip())
    assert sorted(p.name for p in snap.iterdir()) == sorted(set(files) - {"pytorch_model.bin"})
    assert os.readlink(snap / "config.json") == f"../../blobs/{git_sha1(b'{}')}"

    hub.add_repo("org/escape", {"config.json": b"{}", "model.safetensors.index.json":
                                b'{"weight_map": {"a": "../../x.safetensors"}}'})
    r = pull(memra_bin, "hf:org/escape", hub_env(hub, cache))
    assert r.returncode == 2 and "hub_bad_response" in r.stderr and "plain" in r.stderr, r.stderr


def test_not_found_names_what_exists(memra_bin, hub, cache):
    r = pull(memra_bin, f"hf:{REPO}:Q3_K_S", hub_env(hub, cache))
    assert r.returncode == 2 and "hub_not_found" in r.stderr
    assert "available quants: BF16, Q4_K_M, Q8_0" in r.stderr, r.stderr
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M@v9", hub_env(hub, cache))
    assert r.returncode == 2 and "hub_not_found" in r.stderr and "revision 'v9'" in r.stderr
    r = pull(memra_bin, f"hf:{REPO}", hub_env(hub, cache))
    assert r.returncode == 2 and "pick a quant with hf:org/m-GGUF:QUANT" in r.stderr
    r = pull(memra_bin, "hf:org/nothing-here", hub_env(hub, cache))
    assert r.returncode == 2 and "hub_unauthorized" in r.stderr and "does not exist" in r.stderr
    r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(None, cache))
    assert r.returncode == 1 and "hub_unreachable" in r.stderr, r.stderr
    assert "hub_bad_source" in pull(memra_bin, "hf:../x:Q4", hub_env(hub, cache)).stderr


def test_broken_hub_answers_are_named(memra_bin, hub, cache):
    commit = hub.repos[REPO].commit
    info = f"/api/models/{REPO}/"
    resolve = f"/{REPO}/resolve/{commit}/m-Q4_K_M.gguf"
    cases = [
        ({info: (503, [("X-Error-Message", "maintenance")], b"")}, 1, "hub_http_error",
         "HTTP 503"),
        ({info: (200, [], b"<html>a captive portal</html>")}, 2, "hub_bad_response",
         "is HF_ENDPOINT"),
        ({info: (200, [], b'{"sha": "../../etc", "siblings": []}')}, 2, "hub_bad_response",
         "40-hex"),
        ({info: (302, [("Location", "/loop" + info)], b""), "/loop": (302, [("Location", info)],
                                                                     b"")},
         2, "hub_bad_response", "redirects"),
        ({info: (302, [("Location", "file:///etc/passwd")], b"")}, 2, "hub_bad_response",
         "not an http(s) URL"),
        ({resolve: (200, [("X-Repo-Commit", commit)], b"")}, 2, "hub_bad_response", "no usable ETag"),
        ({resolve: (200, [("X-Repo-Commit", commit), ("ETag", '"../../x"')], b"")}, 2,
         "hub_bad_response", "no usable ETag"),
        ({resolve: (200, [("X-Repo-Commit", "f" * 40), ("ETag", f'"{sha256(GGUF)}"')], b"")}, 2,
         "hub_bad_response", "answered for"),
        ({resolve: (200, [("X-Repo-Commit", commit), ("ETag", '"abc"')], b"")}, 2,
         "hub_bad_response", "the listing says"),
    ]
    for override, code, name, text in cases:
        hub.override = override
        r = pull(memra_bin, f"hf:{REPO}:Q4_K_M", hub_env(hub, cache))
        assert r.returncode == code and name in r.stderr and text in r.stderr, (override, r.stderr)
    assert not (repo_dir(cache) / "snapshots").exists() and leftovers(cache) == []


def test_hostile_file_names_never_leave_the_cache(memra_bin, hub, cache, tmp_path):
    hub.add_repo("org/evil", {"../../../escaped-Q4_0.gguf": b"evil", "/abs-Q4_0.gguf": b"evil",
                              "ok\nline-Q4_0.gguf": b"evil"})
    r = pull(memra_bin, "hf:org/evil:Q4_0", hub_env(hub, cache))
    assert r.returncode == 2 and "hub_not_found" in r.stderr, r.stderr
    assert not list(tmp_path.rglob("escaped*")) and not list(tmp_path.rglob("abs*"))
    assert not any(q.path.startswith(("/cdn", "/org/evil/resolve")) for q in hub.requests)


def test_server_is_unready_while_its_model_downloads(build_dir, hub, cache):
    hub.add_repo("org/tiny", {p.name: p.read_bytes() for p in FIXTURE.iterdir()
                              if p.name != "reference.json"})
    hub.chunk_delay = 0.5  # model.safetensors is 4 chunks: about 2 s of download
    env = hub_env(hub, cache, MEMRA_MODELS="tiny=hf:org/tiny", MEMRA_LOG_LEVEL="info")
    server = Server(real_server_binary(build_dir), ["--ctx-size", "256"], env=env,
                    wait_ready=False)
    try:
        assert httpx.get(server.url + "/readyz", timeout=5).status_code == 503
        server.wait_ready(60)
        assert httpx.get(server.url + "/readyz", timeout=5).status_code == 200
        models = httpx.get(server.url + "/v1/models", timeout=5).json()
        assert [m["id"] for m in models["data"]] == ["tiny"]
    finally:
        server.stop()
    log = server.log_path.read_text()
    assert "downloading org/tiny/model.safetensors" in log, log[-3000:]


def test_server_stops_during_a_download_and_the_next_start_resumes(build_dir, hub, cache):
    hub.add_repo("org/tiny", {p.name: p.read_bytes() for p in FIXTURE.iterdir()
                              if p.name != "reference.json"})
    weights = (FIXTURE / "model.safetensors").read_bytes()
    hub.chunk_delay = 2.0  # the first 64 KiB chunk arrives, then the server is stopped
    env = hub_env(hub, cache, MEMRA_MODELS="tiny=hf:org/tiny")
    server = Server(real_server_binary(build_dir), ["--ctx-size", "256"], env=env,
                    wait_ready=False)
    partial = repo_dir(cache, "org/tiny") / "blobs" / f"{sha256(weights)}.incomplete"
    deadline = time.time() + 30
    while not (partial.exists() and partial.stat().st_size > 0) and time.time() < deadline:
        time.sleep(0.05)
    assert partial.exists(), server.log_text()
    start = time.time()
    assert server.stop(timeout=10) == 0
    assert time.time() - start < 5  # SIGTERM is not held until the download ends
    have = partial.stat().st_size
    assert 0 < have < len(weights)

    hub.chunk_delay = 0
    server = Server(real_server_binary(build_dir), ["--ctx-size", "256"], env=env)
    try:
        assert httpx.get(server.url + "/readyz", timeout=5).status_code == 200
    finally:
        assert server.stop() == 0
    assert [g.range for g in hub.blob_requests(weights)] == ["", f"bytes={have}-"]


def test_progress_bar_on_a_terminal_and_lines_in_a_log(memra_bin, hub, cache):
    import pty
    big = os.urandom(17 << 20)  # from 16 MiB on, a log gets progress lines
    hub.add_repo("org/big", {"big-Q4_0.gguf": big})
    r = pull(memra_bin, "hf:org/big", hub_env(hub, cache))
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if "downloading org/big/big-Q4_0.gguf: " in l]
    assert len(lines) == 10 and lines[-1].split(": ")[-1].startswith("100% (17.0/17.0 MiB"), lines
    assert "\r" not in r.stderr

    shutil.rmtree(cache)
    controller, terminal = pty.openpty()
    proc = subprocess.Popen([str(memra_bin), "pull", "hf:org/big"], env=hub_env(hub, cache),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal)
    os.close(terminal)
    shown = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        shown += chunk
    proc.wait(timeout=60)
    os.close(controller)
    assert proc.returncode == 0, shown
    assert b"\r\x1b[Korg/big/big-Q4_0.gguf [" in shown and b"] 100% 17.0/17.0 MiB" in shown, shown
    assert b"downloading org/big/big-Q4_0.gguf: " not in shown
