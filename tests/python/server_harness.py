"""Start/stop memra-server (or the fake-engine memra-fake-server) on a free port for tests."""
import os
import pathlib
import signal
import socket
import subprocess
import time

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, binary: pathlib.Path, args=(), env=None, wait_ready=True, timeout=180):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        full_env = dict(os.environ)
        full_env.update(env or {})
        self.log_path = pathlib.Path(f"/tmp/memra-test-server-{self.port}.log")
        self.log = open(self.log_path, "w")
        self.proc = subprocess.Popen([str(binary), "--port", str(self.port), *args],
                                     stdout=self.log, stderr=subprocess.STDOUT, env=full_env)
        self.first_status = self._wait_listening()
        if wait_ready:
            self.wait_ready(timeout)

    def _wait_listening(self):
        for _ in range(600):
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_text()}")
            try:
                return httpx.get(self.url + "/health", timeout=2).status_code
            except httpx.TransportError:
                time.sleep(0.05)
        raise RuntimeError("server did not start listening: " + self.log_text())

    def wait_ready(self, timeout):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.log_text()}")
            if httpx.get(self.url + "/health", timeout=5).status_code == 200:
                return
            time.sleep(0.1)
        raise RuntimeError("server not ready in time: " + self.log_text())

    def log_text(self) -> str:
        self.log.flush()
        return self.log_path.read_text()[-4000:]

    def metrics(self, headers=None) -> dict:
        """Prometheus text -> {'name{labels}': value}."""
        text = httpx.get(self.url + "/metrics", headers=headers or {}, timeout=10).text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                key, _, value = line.rpartition(" ")
                out[key] = float(value)
        return out

    def stop(self, sig=signal.SIGTERM, timeout=60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def real_server_binary(build_dir) -> pathlib.Path:
    path = build_dir / "tools" / "server" / "memra-server"
    assert path.exists(), f"{path} is missing: build the cpu preset first"
    return path


def fake_server_binary(build_dir) -> pathlib.Path:
    path = build_dir / "tests" / "server" / "memra-fake-server"
    assert path.exists(), f"{path} is missing: build the cpu preset first"
    return path


# Flags for the real model in tests: a short context keeps the KV cache small and start-up fast.
REAL_ARGS = ["--ctx-size", "1024", "--max-sequences", "64", "--kv-blocks", "1024", "--log-level", "warn"]
API_KEY = "sk-memra-test"


def real_server_with_template(build_dir, test_data, template: str) -> Server:
    """memra-server on the real default model, API key required, rendering chat with the named
    template from the test data's chat-templates folder."""
    args = REAL_ARGS + ["--chat-template", str(test_data / "chat-templates" / template)]
    return Server(real_server_binary(build_dir), args, env={"MEMRA_API_KEYS": API_KEY})


def openai_client(server: Server, timeout: float = 300):
    """The real `openai` client pointed at `server` (no retries: every failure is visible)."""
    import openai
    return openai.OpenAI(base_url=server.url + "/v1", api_key=API_KEY, max_retries=0,
                         timeout=timeout)
