"""A real Jupyter server in a PID namespace of its own, as a container gives one (no tests in here).

    with ContainerServer(fake_env, host_proc=False) as server:
        kernel = server.start_kernel("innocent.ipynb")
        server.execute(kernel, "%load_ext tfgpu_magic")
        server.host_pid(server.local_pid(kernel))

The server runs under ``unshare --pid --fork --mount-proc`` (root only: CI runs as root): inside, it and its kernels
have their own numbers, while NVML (the fake library) reports host PIDs, as the real driver does. With
``host_proc``, the host's /proc is bind-mounted at a folder first (in a mount namespace of its own, so nothing of the
test machine's mounts changes) and named by ``--TfgpuServer.host_proc``. This process stays on the host: it reads
the host /proc to find a kernel's host PID (``NSpid``), which is what the test makes the fake report.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from labsession import _NOT_A_USERS_ENV, free_port


def unshare_available() -> str | None:
    """Why a PID namespace cannot be made here, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (unshare --pid): CI runs as root"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    probe = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"], capture_output=True, timeout=30)
    if probe.returncode != 0:
        return f"unshare --pid fails here: {probe.stderr.decode(errors='replace').strip()}"
    return None


def nspid(pid: int | str, proc: str = "/proc") -> list[int]:
    try:
        with open(f"{proc}/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(word) for word in line.split()[1:]]
    except OSError:
        pass
    return []


class ContainerServer:
    def __init__(self, extra_env: dict[str, str], *, host_proc: bool = False, args: list[str] | None = None,
                 start_timeout: float = 90, isolate: bool = True):
        self.extra_env = dict(extra_env)
        self.isolate = isolate  # False: the same server in the host's namespace (a benchmark's baseline)
        self.host_proc = host_proc
        self.args = list(args or [])
        self.start_timeout = start_timeout
        self.token = secrets.token_hex(16)
        self.port = 0
        self.tmp: Path | None = None
        self.process: subprocess.Popen | None = None
        self.namespace: int | None = None  # the server's PID namespace inode, as this (host) process sees it

    def __enter__(self) -> ContainerServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def runtime(self) -> Path:
        return self.tmp / "runtime"

    @property
    def root(self) -> Path:
        return self.tmp / "root"

    def start(self) -> None:
        self.tmp = Path(tempfile.mkdtemp(prefix="tfgpu-container-"))
        for name in ("config", "data", "runtime", "ipython", "root", "hostproc"):
            (self.tmp / name).mkdir()
        env = {k: v for k, v in os.environ.items() if k not in _NOT_A_USERS_ENV}
        env.pop("PYTHONPATH", None)
        env.update(JUPYTER_CONFIG_DIR=str(self.tmp / "config"), JUPYTER_DATA_DIR=str(self.tmp / "data"),
                   JUPYTER_RUNTIME_DIR=str(self.runtime), IPYTHONDIR=str(self.tmp / "ipython"))
        env.update(self.extra_env)
        self.port = free_port()
        server = [sys.executable, "-m", "jupyter", "server", "--no-browser", "--allow-root", "--ServerApp.ip=127.0.0.1",
                  f"--ServerApp.port={self.port}", f"--IdentityProvider.token={self.token}",
                  f"--ServerApp.root_dir={self.root}", *self.args]
        inner = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *server]
        if self.host_proc:
            hostproc = self.tmp / "hostproc"
            server.append(f"--TfgpuServer.host_proc={hostproc}")
            inner = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *server]
            # A mount namespace of its own first: the bind mount is the server's, and goes with it.
            command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                       'mount --bind /proc "$0" && exec "$@"', str(hostproc), *inner]
        else:
            command = inner if self.isolate else server
        with open(self.tmp / "server.log", "wb") as log:
            self.process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        try:
            self._wait_until_up()
        except BaseException:
            self.stop()
            raise

    def _wait_until_up(self) -> None:
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited ({self.process.returncode}):\n{self.log_tail()}")
            with contextlib.suppress(OSError, ValueError):
                if self.api("GET", "/api/status") is not None:
                    self.namespace = self._namespace() if self.isolate else os.stat("/proc/self/ns/pid").st_ino
                    return
            time.sleep(0.3)
        raise RuntimeError(f"the server did not answer within {self.start_timeout:.0f} s:\n{self.log_tail()}")

    def _namespace(self) -> int:
        """The inode of the namespace whose PID 1 is the server (the first process with a second NSpid of 1)."""
        for entry in os.listdir("/proc"):
            if entry.isdigit() and nspid(entry)[1:] == [1]:
                with contextlib.suppress(OSError):
                    ino = os.stat(f"/proc/{entry}/ns/pid").st_ino
                    if self._is_ours(int(entry)):
                        return ino
        raise RuntimeError("the server's PID namespace was not found")

    def _is_ours(self, pid: int) -> bool:
        """Whether ``pid`` (a host PID) descends from our unshare process."""
        current = pid
        for _ in range(16):
            if current == self.process.pid:
                return True
            try:
                with open(f"/proc/{current}/stat") as f:
                    stat = f.read()
                current = int(stat[stat.rfind(")") + 2:].split()[1])
            except (OSError, ValueError, IndexError):
                return False
            if current <= 1:
                return False
        return False

    def host_pid(self, local_pid: int) -> int:
        """The host PID of the server's namespace's process ``local_pid``."""
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            numbers = nspid(entry)
            if len(numbers) == 2 and numbers[1] == local_pid:
                with contextlib.suppress(OSError):
                    if os.stat(f"/proc/{entry}/ns/pid").st_ino == self.namespace:
                        return numbers[0]
        raise AssertionError(f"no process {local_pid} in the server's namespace")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            # unshare blocks SIGTERM: the group's, the server's included (it shuts its kernels down); when PID 1
            # ends, every process of the namespace goes with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def log_tail(self, chars: int = 4000) -> str:
        with contextlib.suppress(OSError, TypeError):
            return (self.tmp / "server.log").read_text(errors="replace")[-chars:]
        return "(no server log)"

    def api(self, method: str, path: str, body: dict | None = None):
        request = urllib.request.Request(f"{self.url}{path}", method=method,
                                         data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read() or b"null")

    def gpus(self) -> dict:
        return self.api("GET", "/tfgpu/api/gpus")

    def start_kernel(self, notebook: str) -> str:
        """A notebook session (a real kernel, with JPY_SESSION_NAME set): its kernel id."""
        body = {"path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": "python3"}}
        return self.api("POST", "/api/sessions", body)["kernel"]["id"]

    def kernel_ids(self) -> set[str]:
        return {k["id"] for k in self.api("GET", "/api/kernels")}

    def local_pid(self, kernel: str, timeout: float = 60) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for k in self.gpus()["kernels"]:
                if k["id"] == kernel and k["pid"]:
                    return k["pid"]
            time.sleep(0.3)
        raise AssertionError(f"no PID for kernel {kernel}")

    def client(self, kernel: str):
        from jupyter_client import BlockingKernelClient

        client = BlockingKernelClient(connection_file=str(self.runtime / f"kernel-{kernel}.json"))
        client.load_connection_file()
        client.start_channels()
        client.wait_for_ready(timeout=120)
        return client

    def execute(self, kernel: str, code: str, timeout: float = 240) -> str:
        """Run ``code`` as a cell of the kernel; its stdout and results as text. Raises on an error."""
        client = self.client(kernel)
        try:
            return execute(client, code, timeout)
        finally:
            client.stop_channels()


def execute(client, code: str, timeout: float = 240) -> str:
    msg_id = client.execute(code)
    out: list[str] = []
    deadline = time.monotonic() + timeout
    while True:
        msg = client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind, content = msg["msg_type"], msg["content"]
        if kind == "stream":
            out.append(content["text"])
        elif kind in ("execute_result", "display_data"):
            out.append(content["data"].get("text/plain", ""))
        elif kind == "error":
            raise AssertionError(f"the cell failed: {content['ename']}: {content['evalue']}\n{''.join(out)}")
        elif kind == "status" and content["execution_state"] == "idle":
            return "".join(out)
