"""A slow or hung driver delays nothing in the kernel but its own figures: a real kernel (the user's environment)
whose NVML, the fake library, takes 3 s per reading. Opening the panel, an empty cell, closing the panel and
%unload_ext each stay within their bound, and five close/reopen cycles leave one refresher at most. Before,
every cell waited for a reading after it, the panel's opening for one, and closing for a 10 s join."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from fakenvml import three_gpus
from harness import user_env

pytestmark = pytest.mark.kernel

REGISTRY = "get_ipython().magics_manager.registry['TfgpuMagics']"


class Kernel:
    def __init__(self, env: dict[str, str], cwd: str):
        from jupyter_client.manager import start_new_kernel

        self.manager, self.client = start_new_kernel(kernel_name="python3", env=env, cwd=cwd)

    def run(self, source: str) -> tuple[float, str]:
        """Run a cell; (seconds it took, as the frontend waits for it, and its printed text)."""
        out: list[str] = []
        started = time.monotonic()
        reply = self.client.execute_interactive(
            source, timeout=120,
            output_hook=lambda m: out.append(m["content"]["text"]) if m["msg_type"] == "stream" else None)
        took = time.monotonic() - started
        assert reply["content"]["status"] == "ok", (source, reply["content"], out)
        return took, "".join(out)

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def test_with_nvml_taking_3_s_a_reading_no_cell_panel_or_unload_waits_for_it(fake_nvml, tmp_path):
    fake_nvml.write({**three_gpus(), "delays": {"nvmlDeviceGetCount_v2": 3000}})
    kernel = Kernel(user_env(**fake_nvml.env), str(tmp_path))
    try:
        kernel.run("%load_ext tfgpu_magic\nimport tfgpu_magic, threading")
        kernel.run("%tfgpu cpus 2")  # the first %tfgpu loads the subcommands and the core: not what is timed
        took, _ = kernel.run("%tfgpu panel")
        assert took < 1.0, f"%tfgpu panel took {took:.2f} s"
        for _ in range(3):
            took, _ = kernel.run("x = 1")
            assert took < 0.2, f"an empty cell took {took:.2f} s with the panel open"
        took, _ = kernel.run(f"{REGISTRY}.shown_panel().close()")
        assert took < 1.0, f"Panel.close() took {took:.2f} s"
        for _ in range(5):
            took, _ = kernel.run("p = tfgpu_magic.Panel(); p.close()")
            assert took < 1.0, f"a panel's open and close took {took:.2f} s"
        _, names = kernel.run("import json; print(json.dumps([t.name for t in threading.enumerate()]))")
        assert json.loads(names).count("tfgpu-live") <= 1, names
        # The sidebar's channel open (it subscribes to the same model): cells still do not wait.
        kernel.client.shell_channel.send(kernel.client.session.msg("comm_open", {
            "comm_id": uuid.uuid4().hex, "target_name": "tfgpu", "data": {"request": "subscribe", "version": 1}}))
        for _ in range(3):
            took, _ = kernel.run("x = 1")
            assert took < 0.2, f"an empty cell took {took:.2f} s with the sidebar's channel open"
        took, _ = kernel.run("%unload_ext tfgpu_magic")
        assert took < 1.0, f"%unload_ext took {took:.2f} s"
    finally:
        kernel.close()
