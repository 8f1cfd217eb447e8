"""Opening a notebook runs nothing it brought: a `tfgpu_magic/` folder beside the notebook (a cloned repository,
an unpacked archive) is the kernel's working directory and first on its sys.path, yet the code the sidebar sends
at kernel start (built by the frontend's own constants) imports the installed package, applies the saved
settings, and never imports the folder. The kernel runs as a user's: nothing of the checkout on PYTHONPATH."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from harness import frontend_code, user_env
from labsession import plant_shadow

pytestmark = pytest.mark.kernel


def test_the_sidebars_apply_never_imports_a_tfgpu_magic_folder_beside_the_notebook(tmp_path):
    from jupyter_client.manager import start_new_kernel

    marker = plant_shadow(tmp_path)
    env = user_env()
    assert "PYTHONPATH" not in env
    manager, client = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        code, expression = frontend_code({"version": 1, "apply_on_start": True, "settings": {"cpus": "2"}})
        client.execute(code, silent=True, store_history=False, user_expressions={"tfgpu": expression})
        reply = client.get_shell_msg(timeout=60)["content"]
        assert reply["status"] == "ok", reply
        result = reply["user_expressions"]["tfgpu"]["data"]["application/json"]
        assert result["ok"] is True and result["outcomes"][0]["setting"] == "cpus", result
        assert not marker.exists(), marker.read_text()
        out = []
        client.execute_interactive(
            "import json, sys, tfgpu_magic\nprint(json.dumps([tfgpu_magic.__file__, sys.path]))", timeout=60,
            output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
        where, path = json.loads("".join(out))
        assert not Path(where).is_relative_to(tmp_path), where  # the installed package, also for the user's cells
        # The notebook's folder ('') is on sys.path ahead of site-packages, as in any kernel: the shadow's chance.
        site = next(k for k, entry in enumerate(path) if "site-packages" in entry)
        assert "" in path[:site], path
        assert not marker.exists(), marker.read_text()
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
