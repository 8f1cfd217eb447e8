"""Tab completion in a real kernel: the complete_request JupyterLab sends (the completer itself, through IPython's
own calls, is tests/ipython/test_completion.py)."""

from __future__ import annotations

import os

import pytest
from harness import kernel_folder

from tfgpu_magic.ipython.syntax import SUBCOMMANDS

LINE_SUBCOMMANDS = [s for s in SUBCOMMANDS if s != "device"]


def test_complete_request_in_a_real_kernel():
    jupyter_client = pytest.importorskip("jupyter_client")
    # Like a notebook server's kernel (see test_placement_kernel.py): no PYTHONUNBUFFERED, no pytest marker.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTEST_CURRENT_TEST")}
    km, kc = jupyter_client.manager.start_new_kernel(kernel_name="python3", env=env, cwd=kernel_folder(),
                                                     startup_timeout=60)
    try:
        reply = kc.execute_interactive("%load_ext tfgpu_magic", timeout=60)
        assert reply["content"]["status"] == "ok"
        reply = kc.complete("%tfgpu vi", 9, reply=True, timeout=30)
        assert reply["content"]["matches"] == ["visible", "virtual"]
        assert (reply["content"]["cursor_start"], reply["content"]["cursor_end"]) == (7, 9)
        reply = kc.complete("%tfgpu ", 7, reply=True, timeout=30)
        assert reply["content"]["matches"] == LINE_SUBCOMMANDS
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)
