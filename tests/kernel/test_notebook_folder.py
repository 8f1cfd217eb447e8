"""Opening a notebook runs nothing it brought: a `tfgpu_magic/` folder beside the notebook (a cloned repository,
an unpacked archive) is the kernel's working directory and first on its sys.path, yet the code the sidebar sends
at kernel start (built by the frontend's own constants) imports the installed package, applies the saved
settings, and never imports the folder. The kernel runs as a user's: nothing of the checkout on PYTHONPATH."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from harness import frontend_code, user_env
from labsession import SHADOW_CODE, plant_shadow

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


# Modules the start-up apply imports, or may, that a fresh kernel has not loaded yet; each planted beside the
# notebook appends its name to the marker when executed.
PLANTED = ("pynvml", "tensorflow", "numpy", "ipywidgets", "wurlitzer", "psutil", "prometheus_client")
EVERY_KIND = {"visible": "auto", "cpus": "2", "cpumem": "1GB", "growth": "on", "limit": "40%",
              "virtual": "2x1GB --gpu 0", "placement": "on"}


@pytest.mark.parametrize("settings", [{"cpus": "2"}, EVERY_KIND, {"visible": "auto --min-free 1GB --wait 5s"},
                                      {"limit": "2GB --gpu 7"}],
                         ids=["cpus", "every-kind", "wait", "refused"])
def test_a_start_apply_executes_nothing_from_the_notebooks_folder(tmp_path, fake_nvml, settings):
    """Saved settings of every kind, applied or refused, with NVML read (the fake's two GPUs): no module planted
    beside the notebook runs, nothing loaded comes from there, and sys.path is the kernel's again afterwards."""
    from jupyter_client.manager import start_new_kernel
    from test_shared_server import four_gpus

    fake_nvml.write(four_gpus())
    marker = plant_shadow(tmp_path)
    for name in PLANTED:
        (tmp_path / f"{name}.py").write_text(SHADOW_CODE.format(marker=str(marker)))
    env = user_env(**{k: v for k, v in fake_nvml.env.items() if k not in ("PYTHONPATH", "PYTHONUNBUFFERED")})
    manager, client = start_new_kernel(kernel_name="python3", env=env, cwd=str(tmp_path))
    try:
        before = _sys_path(client)
        code, expression = frontend_code({"version": 1, "apply_on_start": True, "settings": settings})
        client.execute(code, silent=True, store_history=False, user_expressions={"tfgpu": expression})
        reply = client.get_shell_msg(timeout=60)["content"]
        assert reply["status"] == "ok", reply
        result = reply["user_expressions"]["tfgpu"]["data"]["application/json"]
        assert result.get("reason") != "ran_cells" and (result["outcomes"] or result["message"]), result
        # NVML is read by the live model's refresher, a thread the apply starts: wait until it has imported pynvml.
        deadline = time.monotonic() + 20
        while "pynvml" not in (loaded := _loaded(client)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not marker.exists(), marker.read_text()
        assert "pynvml" in loaded, "the apply reads NVML"
        assert not [f"{m}: {f}" for m, f in loaded.items() if f.startswith(str(tmp_path))], loaded
        assert _sys_path(client) == before
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def _run_json(client, code: str):
    """What ``code`` printed, as JSON; run silently, so the kernel still counts as one that ran no cell."""
    out: list[str] = []
    client.execute_interactive(code, silent=True, store_history=False, timeout=60,
                               output_hook=lambda m: out.append(m["content"].get("text", ""))
                               if m["msg_type"] == "stream" else None)
    return json.loads("".join(out))


def _loaded(client) -> dict[str, str]:
    return _run_json(client, "import json, sys\nprint(json.dumps({n: str(getattr(m, '__file__', None)) "
                             "for n, m in list(sys.modules.items())}))")


def _sys_path(client) -> list[str]:
    return _run_json(client, "import json, sys\nprint(json.dumps(sys.path))")
