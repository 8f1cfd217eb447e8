"""A saved `visible auto --min-free SIZE --wait DURATION` at kernel start: the silent apply the sidebar sends (its
own compiled code) writes each progress line as one line of stdout, and an interrupt (the sidebar's Cancel) ends
the wait at once with a result that says so and changes nothing; the kernel then runs a cell at once."""

from __future__ import annotations

import time

import pytest
from harness import frontend_code, kernel_folder, user_env
from test_shared_server import four_gpus

pytestmark = pytest.mark.kernel


def test_a_saved_wait_shows_its_progress_and_an_interrupt_ends_it(fake_nvml):
    from jupyter_client.manager import start_new_kernel

    fake_nvml.write(four_gpus())  # 16 GiB each, the freest has 14.0 GiB free: 15 GiB can come, not now
    env = user_env(**{k: v for k, v in fake_nvml.env.items() if k not in ("PYTHONPATH", "PYTHONUNBUFFERED")})
    manager, client = start_new_kernel(kernel_name="python3", env=env, cwd=kernel_folder())
    try:
        settings = {"visible": "auto --min-free 15GiB --wait 60s", "cpus": "2"}
        code, expression = frontend_code({"version": 1, "apply_on_start": True, "settings": settings})
        msg_id = client.execute(code, silent=True, store_history=False, user_expressions={"tfgpu": expression})
        lines: list[str] = []
        deadline = time.monotonic() + 30
        while len(lines) < 2 and time.monotonic() < deadline:
            msg = client.get_iopub_msg(timeout=30)
            if msg["parent_header"].get("msg_id") == msg_id and msg["msg_type"] == "stream":
                assert msg["content"]["name"] == "stdout"
                text = msg["content"]["text"]
                assert text.endswith("\n") and text.count("\n") == 1, text  # one line a message
                lines.append(text)
        assert len(lines) == 2, lines
        assert all(line.startswith("tfgpu: ") and "of 1 m" in line and "15GiB" in line for line in lines), lines
        manager.interrupt_kernel()
        started = time.monotonic()
        reply = client.get_shell_msg(timeout=30)["content"]
        assert time.monotonic() - started < 5
        assert reply["status"] == "ok", reply
        result = reply["user_expressions"]["tfgpu"]["data"]["application/json"]
        assert result["ok"] is False and "interrupted" in result["message"] and "nothing changed" in result["message"]
        out: list[str] = []
        started = time.monotonic()
        client.execute_interactive(
            "import os; print(os.environ.get('CUDA_VISIBLE_DEVICES'))", timeout=10,
            output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
        assert time.monotonic() - started < 5
        assert out == ["None\n"], out  # the wait changed nothing
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
