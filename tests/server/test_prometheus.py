"""A real Prometheus (Debian's ``prometheus``) scrapes a real ``jupyter lab``'s ``tfgpu/api/metrics`` with the
server's token, and its HTTP API then answers a GPU's memory and a notebook's GPU memory with the fake NVML's
figures. Skipped without the binary, failed instead with CI=true (``.ci/run`` installs it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
from fakenvml import MIB, fake_env, three_gpus, write_config
from labsession import Lab, free_port

pytestmark = pytest.mark.server

PROMETHEUS = "/usr/bin/prometheus"


def require_prometheus() -> None:
    if shutil.which(PROMETHEUS):
        return
    reason = f"needs Prometheus at {PROMETHEUS}: apt-get install prometheus"
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true, so the Prometheus test must run: {reason}", pytrace=False)
    pytest.skip(reason)


class Prometheus:
    def __init__(self, folder, target_port: int, token: str, metrics_path: str):
        self.port = free_port()
        self.folder = folder
        config = folder / "prometheus.yml"
        # Written as JSON, which is YAML too.
        config.write_text(json.dumps({
            "global": {"scrape_interval": "1s", "scrape_timeout": "1s"},
            "scrape_configs": [{
                "job_name": "jupyter", "metrics_path": metrics_path,
                "authorization": {"type": "token", "credentials": token},  # sends "Authorization: token ..."
                "static_configs": [{"targets": [f"127.0.0.1:{target_port}"]}],
            }],
        }))
        self.log = open(folder / "prometheus.log", "wb")  # noqa: SIM115 (closed in stop)
        self.process = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"], stdout=self.log, stderr=subprocess.STDOUT)

    def query(self, expression: str) -> list[dict]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expression})
        with urllib.request.urlopen(url, timeout=5) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]["result"]

    def wait_for(self, expression: str, ready, timeout: float = 60) -> list[dict]:
        deadline = time.monotonic() + timeout
        result: list[dict] | str = []
        while time.monotonic() < deadline:
            assert self.process.poll() is None, self.tail()
            try:
                result = self.query(expression)
                if ready(result):
                    return result
            except OSError as exc:  # not listening yet
                result = str(exc)
            time.sleep(0.5)
        raise AssertionError(f"{expression}: {result}\n{self.targets()}\n{self.tail()}")

    def targets(self) -> str:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/api/v1/targets", timeout=5) as answer:
                return answer.read().decode()[:2000]
        except OSError as exc:
            return str(exc)

    def tail(self) -> str:
        return (self.folder / "prometheus.log").read_text(errors="replace")[-2000:]

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.log.close()


def value(result: list[dict]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


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
            used = prometheus.query('tfgpu_gpu_memory_used_bytes{index="1"}')
            assert value(used) == config["gpus"][1]["memory_used"]
            assert used[0]["metric"]["name"] == "NVIDIA H100 80GB HBM3"
            assert used[0]["metric"]["uuid"] == config["gpus"][1]["uuid"]
            total = prometheus.query('tfgpu_gpu_memory_total_bytes{index="0"}')
            assert value(total) == config["gpus"][0]["memory_total"]
            held = prometheus.wait_for('tfgpu_kernel_gpu_memory_used_bytes{notebook="work/train.ipynb"}',
                                       lambda r: len(r) == 1)
            assert value(held) == 3072 * MIB
            assert held[0]["metric"]["kernel_id"] == kernel_id and held[0]["metric"]["gpu_index"] == "1"
        finally:
            prometheus.stop()
