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
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from labsession import Lab

NAMESPACE = ["unshare", "--pid", "--fork", "--mount-proc"]


def unshare_available() -> str | None:
    """Why a PID namespace cannot be made here, or None."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "needs root (unshare --pid): CI runs as root"
    if shutil.which("unshare") is None:
        return "needs unshare (util-linux)"
    probe = subprocess.run([*NAMESPACE, "true"], capture_output=True, timeout=30)
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


class ContainerServer(Lab):
    """A Lab (tests/support/labsession.py) started under ``unshare --pid``; ``isolate`` False: the same on the host
    (a benchmark's baseline). ``process`` is the outermost command's process, ``namespace`` the server's PID
    namespace inode as this (host) process sees it."""

    def __init__(self, extra_env: dict[str, str], *, host_proc: bool = False, args: list[str] | None = None,
                 start_timeout: float = 90, isolate: bool = True):
        self.isolate = isolate
        self.hostproc = Path(tempfile.mkdtemp(prefix="tfgpu-hostproc-")) if host_proc else None
        prefix = NAMESPACE if isolate else []
        args = list(args or [])
        if self.hostproc is not None:
            # A mount namespace of its own first: the bind mount is the server's, and goes with it.
            prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                      'mount --bind /proc "$0" && exec "$@"', str(self.hostproc), *NAMESPACE]
            args.append(f"--TfgpuServer.host_proc={self.hostproc}")
        super().__init__(extra_env, start_timeout=start_timeout, extra_args=args, prefix=prefix)
        self.namespace: int | None = None

    @property
    def process(self) -> subprocess.Popen | None:
        return self.server

    @property
    def runtime(self) -> Path:
        return self.tmp / "runtime"

    def _wait_until_up(self) -> None:
        super()._wait_until_up()
        self.namespace = self._namespace() if self.isolate else os.stat("/proc/self/ns/pid").st_ino

    def stop(self) -> None:
        super().stop()
        if self.hostproc is not None:
            with contextlib.suppress(OSError):
                self.hostproc.rmdir()  # empty here: the bind mount was the server's mount namespace's

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
