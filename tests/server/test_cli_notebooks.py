"""`tfgpu status` names a GPU process by its notebook where a running Jupyter server (with tfgpu's extension) knows it
as a notebook's kernel: a real `jupyter lab`, a real kernel that NVML (the fake library) lists as holding memory on a
GPU and on a MIG device, and the command run as a user runs it, finding the server through the runtime folder."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from clipipes import ENTRY_POINTS
from fakenvml import MIB, fake_env, mig_gpu, three_gpus, write_config
from harness import user_env
from labsession import Lab, kernel_pid
from messages import problems

pytestmark = pytest.mark.server

NOTEBOOK = "work/train.ipynb"


def _attributed(lab: Lab, pid: int, timeout: float = 60) -> None:
    """Wait until the server's own answer has the kernel's process on its GPUs (its NVML reading is cached)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        document = lab.api("GET", "/tfgpu/api/gpus")
        rows = [p for g in document["gpus"] for p in [*g["processes"], *(q for m in g["mig_devices"]
                                                                           for q in m["processes"])]]
        if sum(p["pid"] == pid and bool(p.get("kernel")) for p in rows) >= 2:
            return
        time.sleep(0.3)
    raise AssertionError(f"the server never attributed pid {pid}: {document['gpus']}")


def test_a_notebooks_kernel_is_named_by_its_notebook(fake_nvml_lib, tmp_path):
    config = three_gpus()
    config["gpus"].append(mig_gpu())
    path = write_config(tmp_path / "fake_nvml.cfg", config)
    nvml_env = fake_env(fake_nvml_lib.parent, path, base={})
    with Lab(extra_env=nvml_env) as lab:
        (lab.root / "work").mkdir()
        lab.api("POST", "/api/sessions", {"path": NOTEBOOK, "name": "train.ipynb", "type": "notebook",
                                          "kernel": {"name": "python3"}})
        pid = kernel_pid(lab, NOTEBOOK)
        # The kernel holds 2 GiB on the T4 (GPU 2) and 500 MiB on the A100's 2g.10gb MIG device (GPU 3, slot 1).
        config["gpus"][2].update(memory_used=2048 * MIB, processes=[{"pid": pid, "used": 2048 * MIB}])
        config["gpus"][3]["mig"]["devices"][1]["processes"] = [{"pid": pid, "used": 500 * MIB}]
        write_config(path, config)
        _attributed(lab, pid)
        env = fake_env(fake_nvml_lib.parent, path, base=user_env())
        env["JUPYTER_RUNTIME_DIR"] = str(lab.tmp / "runtime")
        text = subprocess.run([*ENTRY_POINTS["tfgpu"], "status"], capture_output=True, text=True, env=env,
                              timeout=120)
        data = json.loads(subprocess.run([*ENTRY_POINTS["tfgpu"], "status", "--json"], capture_output=True,
                                         text=True, env=env, timeout=120, check=True).stdout)
    assert text.returncode == 0 and text.stderr == "", text.stderr
    said = " ".join(text.stdout.split())
    assert f"{pid} {NOTEBOOK} 2048 MiB" in said, text.stdout  # GPU 2's row
    assert f"{pid} {NOTEBOOK} 500 MiB" in said, text.stdout  # the MIG device's row
    assert f"Notebooks: as the Jupyter server at {lab.url}/ knows its kernels" in said, text.stdout
    assert "process_api" in said  # pid 1, no kernel: its program's name, as before
    assert problems(text.stdout) == []
    t4 = data["gpus"][2]["processes"]
    assert [(p["pid"], p["notebook"]) for p in t4] == [(pid, NOTEBOOK)]
    assert t4[0]["name"] != NOTEBOOK  # the JSON keeps NVML's name and adds the notebook beside it
    mig = data["gpus"][3]["mig_devices"][1]["processes"]
    assert [(p["pid"], p["notebook"]) for p in mig] == [(pid, NOTEBOOK)]
    assert all(p["notebook"] is None for p in data["gpus"][0]["processes"])
