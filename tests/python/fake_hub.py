"""A local stand-in for the Hugging Face Hub, for tests of `hf:` downloads (memra and
huggingface_hub both pointed at it with HF_ENDPOINT). It speaks the endpoints these clients use:

  GET  /api/models/{org}/{name}[/revision/{rev}]  commit + siblings (rfilename, size, blobId, lfs)
  HEAD|GET /{org}/{name}/resolve/{rev}/{path}      X-Repo-Commit, ETag (git sha1) for regular
       files; LFS files (.gguf, .safetensors) answer 302 to the "CDN" with X-Linked-Etag (sha256)
       and X-Linked-Size, as the real hub does
  HEAD|GET /cdn/{sha256}                          the bytes, with Range requests (206)

The CDN is the same server reached as "localhost" while the hub is "127.0.0.1", so clients see a
different host (and must not send the token there). Faults for tests: access rules (private,
gated), announcing a size other than the file's, cutting a transfer after N bytes, corrupting
bytes, slowing transfers, any canned answer for a path. Every request is recorded (method, path, Range, Authorization).
"""
import hashlib
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LFS_SUFFIXES = (".gguf", ".safetensors", ".bin")


def git_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class Repo:
    files: dict  # path -> bytes
    commit: str
    access: str = "public"  # public | private | gated
    branches: dict = field(default_factory=dict)


@dataclass
class Record:
    method: str
    path: str
    range: str
    authorization: str


class FakeHub:
    def __init__(self, token="hf_testtoken"):
        self.repos = {}
        self.token = token
        self.requests = []
        self.cut_after = {}  # sha256 -> [bytes to send before cutting, times left]
        self.corrupt = set()  # sha256 of blobs served with a flipped byte
        self.chunk_delay = 0.0  # seconds slept per 64 KiB chunk of a blob
        self.announced_size = {}  # file name -> the size the listing and headers claim
        self.override = {}  # path prefix -> (status, headers, body): a broken or hostile hub
        self.lock = threading.Lock()
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_HEAD(self):
                hub._handle(self, head=True)

            def do_GET(self):
                hub._handle(self, head=False)

        class Server(ThreadingHTTPServer):
            def handle_error(self, request, client_address):
                pass  # a client that went away mid-transfer (the tests cut and stop on purpose)

        self.server = Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.cdn = f"http://localhost:{self.port}/cdn"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

    def add_repo(self, repo_id, files, access="public", commit=None):
        commit = commit or hashlib.sha1(repo_id.encode() + json.dumps(sorted(files)).encode()).hexdigest()
        self.repos[repo_id] = Repo(files=dict(files), commit=commit, access=access,
                                   branches={"main": commit})
        return commit

    def blob_requests(self, data: bytes):
        return [r for r in self.requests if r.method == "GET" and r.path == f"/cdn/{sha256(data)}"]

    # --- request handling -------------------------------------------------------------------

    def _send(self, h, status, headers=(), body=b"", head=False):
        h.send_response(status)
        for k, v in headers:
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        if not head and body:
            h.wfile.write(body)

    def _error(self, h, status, code, message, head, extra=()):
        self._send(h, status, [("X-Error-Code", code), ("X-Error-Message", message), *extra],
                   json.dumps({"error": message}).encode(), head)

    def _access_denied(self, h, repo, head):
        """Answers 401/403 when the request may not see the repo; False when it may."""
        if repo.access == "public":
            return False
        auth = h.headers.get("Authorization", "")
        if auth == f"Bearer {self.token}":
            return False
        if repo.access == "private":
            self._error(h, 401, "RepoNotFound", "Repository not found", head)
        elif auth:
            self._error(h, 403, "GatedRepo", "Access to this model is restricted", head)
        else:
            self._error(h, 401, "GatedRepo", "Access to this model is restricted", head)
        return True

    def _handle(self, h, head):
        url = urllib.parse.urlsplit(h.path)
        path = urllib.parse.unquote(url.path)
        with self.lock:
            self.requests.append(Record("HEAD" if head else "GET", path, h.headers.get("Range", ""),
                                        h.headers.get("Authorization", "")))
        for prefix, (status, headers, body) in self.override.items():
            if path.startswith(prefix):
                return self._send(h, status, headers, body, head)
        if path.startswith("/cdn/"):
            return self._blob(h, path[len("/cdn/"):], head)
        if path.startswith("/api/models/"):
            return self._info(h, path[len("/api/models/"):], head)
        parts = path.lstrip("/").split("/", 4)
        if len(parts) == 5 and parts[2] == "resolve":
            return self._resolve(h, f"{parts[0]}/{parts[1]}", parts[3], parts[4], head)
        self._error(h, 404, "NotFound", "no such endpoint", head)

    def _commit_of(self, repo, rev):
        return repo.commit if rev == repo.commit else repo.branches.get(rev)

    def _info(self, h, rest, head):
        repo_id, _, rev = rest.partition("/revision/")
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(h, 401, "RepoNotFound", "Repository not found", head)
        if repo.access == "private" and self._access_denied(h, repo, head):
            return
        commit = self._commit_of(repo, rev or "main")
        if commit is None:
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        siblings = []
        for name, data in sorted(repo.files.items()):
            size = self.announced_size.get(name, len(data))
            s = {"rfilename": name, "size": size, "blobId": git_sha1(data)}
            if name.endswith(LFS_SUFFIXES):
                s["lfs"] = {"sha256": sha256(data), "size": size, "pointerSize": 134}
            siblings.append(s)
        body = json.dumps({"id": repo_id, "modelId": repo_id, "sha": commit, "private":
                           repo.access == "private", "gated": repo.access == "gated" and "auto",
                           "siblings": siblings}).encode()
        self._send(h, 200, [("Content-Type", "application/json")], body, head)

    def _resolve(self, h, repo_id, rev, name, head):
        repo = self.repos.get(repo_id)
        if repo is None:
            return self._error(h, 401, "RepoNotFound", "Repository not found", head)
        if self._access_denied(h, repo, head):
            return
        commit = self._commit_of(repo, urllib.parse.unquote(rev))
        if commit is None:
            return self._error(h, 404, "RevisionNotFound", f"Invalid rev id: {rev}", head)
        data = repo.files.get(name)
        if data is None:
            return self._error(h, 404, "EntryNotFound", f"{name} does not exist", head,
                               [("X-Repo-Commit", commit)])
        common = [("X-Repo-Commit", commit), ("Accept-Ranges", "bytes")]
        if name.endswith(LFS_SUFFIXES):
            digest = sha256(data)
            return self._send(h, 302, [*common, ("Location", f"{self.cdn}/{digest}"),
                                       ("X-Linked-Etag", f'"{digest}"'),
                                       ("X-Linked-Size",
                                        str(self.announced_size.get(name, len(data)))),
                                       ("ETag", f'"{git_sha1(b"pointer " + data[:16])}"')],
                              b"", head)
        self._send(h, 200, [*common, ("ETag", f'"{git_sha1(data)}"')], data, head)

    def _find_blob(self, digest):
        for repo in self.repos.values():
            for data in repo.files.values():
                if sha256(data) == digest:
                    return data
        return None

    def _blob(self, h, digest, head):
        data = self._find_blob(digest)
        if data is None:
            return self._error(h, 404, "NotFound", "no such blob", head)
        if digest in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        start = 0
        rng = h.headers.get("Range", "")
        if rng.startswith("bytes=") and rng.endswith("-"):
            start = int(rng[len("bytes="):-1])
            if start >= len(data) and len(data) > 0:
                return self._send(h, 416, [("Content-Range", f"bytes */{len(data)}")], b"", head)
        body = data[start:]
        h.send_response(206 if start else 200)
        if start:
            h.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        h.send_header("Content-Length", str(len(body)))
        h.send_header("Accept-Ranges", "bytes")
        h.send_header("ETag", f'"{digest}"')
        h.end_headers()
        if head:
            return
        limit = len(body)
        with self.lock:
            cut = self.cut_after.get(digest)
            if cut and cut[1] > 0:
                cut[1] -= 1
                limit = max(0, cut[0] - start)
        for i in range(0, min(limit, len(body)), 65536):
            h.wfile.write(body[i:min(i + 65536, limit)])
            h.wfile.flush()
            if self.chunk_delay:
                time.sleep(self.chunk_delay)
        if limit < len(body):
            h.close_connection = True
            h.connection.shutdown(2)
