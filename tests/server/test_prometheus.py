"""A real Prometheus (Debian's ``prometheus``) scrapes a real ``jupyter lab``'s ``tfgpu/api/metrics`` with the
server's token, and its HTTP API then answers a GPU's memory and a notebook's GPU memory with the fake NVML's
figures. Skipped without the binary, failed instead with CI=true (``.ci/run`` installs it)."""

from __future__ import annotations

import time

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import Lab
from promsession import Prometheus, require_prometheus, value

pytestmark = pytest.mark.server

@pytest.mark.kernel
def test_prometheus_scrapes_gpu_and_notebook_memory(fake_nvml_lib, tmp_path):
    require_prometheus()
    config = three_gpus()
    path = write_config(tmp_path / "fake_nvml.cfg", config)
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, path, base={})) as lab:
        session = lab.api("POST", "/api/sessions", {"path": "work/train.ipynb", "name": "train.ipynb",
                                                    "type": "notebook", "kernel": {"name": "python3"}})
        kernel_id = session["kernel"]["id"]
        deadline = time.monotonic() + 30
        while True:  # an answer shared from just before the kernel started does not list it yet
            kernels = lab.api("GET", "/tfgpu/api/gpus")["kernels"]
            pid = next((k["pid"] for k in kernels if k["id"] == kernel_id), None)
            if pid is not None:
                break
            assert time.monotonic() < deadline, "the new kernel never appeared in tfgpu/api/gpus"
            time.sleep(0.2)
        config["gpus"][1]["processes"] = [{"pid": pid, "used": 3072 * MIB}]
        write_config(path, config)
        prometheus = Prometheus(tmp_path, lab.port, lab.token, "/tfgpu/api/metrics")
        try:
            # Two scrapes at least: the series has two samples in Prometheus's own store.
            prometheus.wait_for('count_over_time(tfgpu_nvml_available[1m])', lambda r: r and value(r) >= 2)
            assert value(prometheus.query('up{job="jupyter"}')) == 1
            used = prometheus.query('tfgpu_gpu_memory_used_bytes{gpu="1"}')
            assert value(used) == config["gpus"][1]["memory_used"]
            assert used[0]["metric"]["modelName"] == "NVIDIA H100 80GB HBM3"
            assert used[0]["metric"]["UUID"] == config["gpus"][1]["uuid"]
            total = prometheus.query('tfgpu_gpu_memory_total_bytes{gpu="0"}')
            assert value(total) == config["gpus"][0]["memory_total"]
            held = prometheus.wait_for('tfgpu_kernel_gpu_memory_used_bytes{notebook="work/train.ipynb"}',
                                       lambda r: len(r) == 1)
            assert value(held) == 3072 * MIB
            assert held[0]["metric"]["kernel_id"] == kernel_id and held[0]["metric"]["gpu"] == "1"
            # An empty label is no label in Prometheus: a whole GPU's series look like DCGM's whole-GPU ones.
            assert "GPU_I_ID" not in held[0]["metric"] and "mig_uuid" not in held[0]["metric"]
        finally:
            prometheus.stop()
