"""A hung driver does not hold the server's exit: a real `jupyter server` (the extension as installed, the fake NVML
library on LD_LIBRARY_PATH) whose driver takes 40 s to count its GPUs, with a GPU request in flight, stops
within 2 s of SIGTERM. Before, the NVML worker was a ThreadPoolExecutor's, joined at interpreter exit."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from fakenvml import three_gpus

pytestmark = pytest.mark.server


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_the_server_stops_within_two_seconds_of_sigterm_while_nvml_hangs(fake_nvml, tmp_path):
    fake_nvml.write({**three_gpus(), "delays": {"nvmlDeviceGetCount_v2": 40_000}})
    port, token = free_port(), "exit-test-token"
    env = {k: v for k, v in fake_nvml.env.items() if k != "PYTHONUNBUFFERED"}
    server = subprocess.Popen(
        [sys.executable, "-m", "jupyter_server", "--no-browser", "--allow-root", f"--port={port}",
         "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={tmp_path}"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:  # up and answering
            try:
                urllib.request.urlopen(f"{base}/api/status?token={token}", timeout=2)
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, server.stderr.read()
                time.sleep(0.2)

        def ask():
            with contextlib.suppress(OSError):  # the server went away: what this test wants
                urllib.request.urlopen(f"{base}/tfgpu/api/gpus?token={token}", timeout=30).read()

        threading.Thread(target=ask, daemon=True).start()
        while "nvmlDeviceGetCount_v2" not in fake_nvml.calls():  # the reading is stuck in the driver now
            assert time.monotonic() < deadline, fake_nvml.calls()
            time.sleep(0.05)
        stopped = time.monotonic()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        took = time.monotonic() - stopped
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert took < 2.0, f"the server took {took:.1f} s to stop after SIGTERM"
