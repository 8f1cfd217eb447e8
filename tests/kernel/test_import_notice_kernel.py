"""`import tensorflow` in a kernel with tfgpu loaded says so before TensorFlow loads (issue 37, item 9): the 4-15 s
are not silent. In a real kernel with a user's environment (no PYTHONUNBUFFERED, no TF_CPP_MIN_LOG_LEVEL), the line
reaches the cell in a stream message of its own, before the message that carries the line the import hook prints
when the import has finished."""

from __future__ import annotations

import pytest
from harness import kernel_folder, user_env
from jupyter_client.manager import start_new_kernel

from tfgpu_magic.ipython.import_notice import NOTICE


def run(client, code: str) -> list[dict]:
    """Execute ``code``; its iopub messages in the order the kernel sent them, until the kernel is idle again."""
    msg_id = client.execute(code)
    seen = []
    while True:
        msg = client.get_iopub_msg(timeout=180)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        seen.append(msg)
        if msg["msg_type"] == "status" and msg["content"]["execution_state"] == "idle":
            return seen


@pytest.mark.tf
def test_the_import_says_it_has_started_before_it_ends():
    manager, client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder())
    try:
        run(client, "%load_ext tfgpu_magic\n%tfgpu growth on")
        streams = [m["content"] for m in run(client, "import tensorflow") if m["msg_type"] == "stream"]
        again = [m["content"] for m in run(client, "import tensorflow") if m["msg_type"] == "stream"]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    stdout = [s["text"] for s in streams if s["name"] == "stdout"]
    notice = next(i for i, text in enumerate(stdout) if NOTICE in text)
    done = next(i for i, text in enumerate(stdout) if "tfgpu: at `import tensorflow`:" in text)
    assert stdout[notice].startswith(NOTICE) and notice < done, stdout  # a message sent before the import ended
    assert "".join(stdout).count(NOTICE) == 1, stdout
    assert not any(NOTICE in s["text"] for s in again)  # imported already: nothing to wait for
