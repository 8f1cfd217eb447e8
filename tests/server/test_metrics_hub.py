"""The metrics a whole hub scrapes (issue 35): DCGM's label names, every series saying its host and, under a Hub, its
user and server; NVML's exact bytes; and the detail of the kernel series (per process, kernel or notebook), where a
notebook's series stay the same series across kernel restarts.

The first tests render hand-made documents of gpus.gpu_document's shape through metrics.renderer, as the handler
does; the last ones run a real jupyter_server in this process with the fake NVML and real kernels."""

from __future__ import annotations

import asyncio
import json

import pytest
from fakenvml import MIB, three_gpus
from prometheus_client.parser import text_string_to_metric_families
from serverapi import get_metrics, start_notebook_session

from tfgpu_magic.server import metrics
from tfgpu_magic.server.feed import METRICS_MAX_AGE
from tfgpu_magic.server.options import TfgpuServer

pytestmark = pytest.mark.server

UUID = "GPU-0e2c5f7a-1b3d-4e5f-8a9b-0c1d2e3f4a5b"


def gpu(processes: list[dict]) -> dict:
    return {"index": 0, "uuid": UUID, "name": "NVIDIA A100-SXM4-80GB", "memory_total_bytes": 85899345920,
            "memory_used_bytes": 1234567891, "memory_free_bytes": 84664778029 - 512 * MIB,
            "memory_reserved_bytes": 512 * MIB, "utilization_gpu_pct": 40, "processes": processes,
            "hidden_processes": None, "unattributed": None, "mig_devices": []}


def kernel(kid: str, notebook: str, idle_s: float | None, state: str = "idle") -> dict:
    return {"id": kid, "idle_s": idle_s, "activity": {"state": state},
            "sessions": [{"path": notebook, "type": "notebook"}]}


def row(pid: int, used: int, kid: str | None = None, user: str = "ann") -> dict:
    return {"pid": pid, "used_mib": used // MIB, "used_bytes": used, "name": "python", "user": user, "type": "C",
            "kernel": {"id": kid, "relation": "kernel", "how": "pid"} if kid else None}


def document(processes: list[dict], kernels: list[dict]) -> dict:
    return {"nvml": {"available": True}, "gpus": [gpu(processes)], "kernels": kernels, "other_users": "shown",
            "taken_at": 1796000000.5, "stale": None}


def samples(doc: dict, scope: metrics.Scope) -> dict[str, list[dict]]:
    render, _ = metrics.renderer("text/plain", scope)
    out: dict[str, list[dict]] = {}
    for family in text_string_to_metric_families(render(doc).decode()):
        for sample in family.samples:
            out.setdefault(sample.name, []).append({**sample.labels, "value": sample.value})
    return out


# Two kernels of one notebook (one idle 900 s, one 60 s), a third notebook's kernel, and another user's process.
HOLDERS = document(
    [row(101, 3 * 1024 * MIB + 1, "k1"), row(102, 1 * 1024 * MIB, "k2"), row(103, 7 * MIB + 3, "k3"),
     row(555, 2 * 1024 * MIB, user="bob")],
    [kernel("k1", "a/train.ipynb", 900.0), kernel("k2", "a/train.ipynb", 60.0), kernel("k3", "eval.ipynb", None,
                                                                                      "running")])
WHERE = {"gpu": "0", "UUID": UUID, "GPU_I_ID": "", "mig_uuid": ""}


def test_under_a_hub_every_series_says_its_host_user_and_server():
    scope = metrics.Scope("node-7", "alice", "gpu", "notebook")
    for name, rows in samples(HOLDERS, scope).items():
        for labels in rows:
            assert (labels["Hostname"], labels["user"], labels["server_name"]) == ("node-7", "alice", "gpu"), name


def test_gpu_series_carry_dcgms_names_and_exact_bytes():
    found = samples(HOLDERS, metrics.Scope("node-7"))
    [used] = found["tfgpu_gpu_memory_used_bytes"]
    assert used == {"Hostname": "node-7", "gpu": "0", "UUID": UUID, "modelName": "NVIDIA A100-SXM4-80GB",
                    "value": 1234567891.0}
    assert found["tfgpu_gpu_memory_free_bytes"][0]["value"] == 84664778029 - 512 * MIB
    assert found["tfgpu_gpu_memory_reserved_bytes"][0]["value"] == 512 * MIB
    assert found["tfgpu_reading_timestamp_seconds"][0]["value"] == 1796000000.5


def test_per_notebook_one_series_per_notebook_summed_and_its_least_idle_holder():
    found = samples(HOLDERS, metrics.Scope("node-7", "alice", "", "notebook"))
    held = {r["notebook"]: r["value"] for r in found["tfgpu_kernel_gpu_memory_used_bytes"]}
    assert held == {"a/train.ipynb": 4 * 1024 * MIB + 1, "eval.ipynb": 7 * MIB + 3}
    assert all("kernel_id" not in r and "pid" not in r for r in found["tfgpu_kernel_gpu_memory_used_bytes"])
    assert {r["notebook"]: r["value"] for r in found["tfgpu_kernel_idle_seconds"]} == {"a/train.ipynb": 60.0,
                                                                                       "eval.ipynb": 0.0}
    # Other users' processes are counted per GPU, not listed by pid (each pid would be a series of its own).
    assert "tfgpu_process_gpu_memory_used_bytes" not in found
    [others] = found["tfgpu_other_processes_memory_used_bytes"]
    assert others["value"] == 2 * 1024 * MIB


def test_per_kernel_and_per_process_tell_kernels_and_processes_apart():
    kernel_rows = samples(HOLDERS, metrics.Scope("node-7", detail="kernel"))["tfgpu_kernel_gpu_memory_used_bytes"]
    assert {(r["notebook"], r["kernel_id"]): r["value"] for r in kernel_rows} == {
        ("a/train.ipynb", "k1"): 3 * 1024 * MIB + 1, ("a/train.ipynb", "k2"): 1024 * MIB,
        ("eval.ipynb", "k3"): 7 * MIB + 3}
    found = samples(HOLDERS, metrics.Scope("node-7", detail="process"))
    assert {(r["kernel_id"], r["pid"]) for r in found["tfgpu_kernel_gpu_memory_used_bytes"]} == {
        ("k1", "101"), ("k2", "102"), ("k3", "103")}
    # Idle is a kernel's, in both.
    assert {r["kernel_id"]: r["value"] for r in found["tfgpu_kernel_idle_seconds"]} == {"k1": 900, "k2": 60, "k3": 0}
    [listed] = found["tfgpu_process_gpu_memory_used_bytes"]
    assert (listed["pid"], listed["process_user"], listed["value"]) == ("555", "bob", 2 * 1024 * MIB)
    assert {k: listed[k] for k in WHERE} == WHERE


def test_the_scope_comes_from_the_hubs_environment(monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_USER", "alice")
    monkeypatch.setenv("JUPYTERHUB_SERVER_NAME", "big")
    monkeypatch.setenv("NODE_NAME", "gpu-node-3")
    assert TfgpuServer().metrics_scope() == metrics.Scope("gpu-node-3", "alice", "big", "notebook")
    assert TfgpuServer(metrics_detail="process", hostname="h").metrics_scope() == metrics.Scope(
        "h", "alice", "big", "process")
    monkeypatch.delenv("JUPYTERHUB_USER")
    assert TfgpuServer().metrics_scope() == metrics.Scope("gpu-node-3", None, "", "kernel")


def _series(text: str) -> set[tuple]:
    return {(sample.name, tuple(sorted(sample.labels.items())))
            for family in text_string_to_metric_families(text) for sample in family.samples}


ODD = 81920 * MIB - 12345  # no whole number of MiB, as no real GPU's figures need be


async def test_memory_series_equal_nvmls_bytes_exactly(jp_fetch, fake_gpus):
    config = three_gpus()
    config["gpus"][1].update(memory_total=ODD, memory_used=ODD // 3 + 7, memory_reserved=513 * MIB + 1)
    config["gpus"][1]["processes"] = [{"pid": 3999921, "used": 5 * MIB + 77}]
    fake_gpus.write(config)
    found: dict[str, float] = {}
    for family in text_string_to_metric_families((await get_metrics(jp_fetch))[1]):
        for sample in family.samples:
            if sample.labels.get("gpu") == "1":
                found[sample.name] = sample.value
    assert found["tfgpu_gpu_memory_total_bytes"] == ODD
    assert found["tfgpu_gpu_memory_used_bytes"] == ODD // 3 + 7
    assert found["tfgpu_gpu_memory_reserved_bytes"] == 513 * MIB + 1
    assert found["tfgpu_gpu_memory_free_bytes"] == ODD - (ODD // 3 + 7) - (513 * MIB + 1)
    assert found["tfgpu_process_gpu_memory_used_bytes"] == 5 * MIB + 77
    assert found["tfgpu_other_processes_memory_used_bytes"] == 5 * MIB + 77


async def _restart_twenty_times(jp_fetch, jp_serverapp, fake_gpus) -> tuple[set, set, int]:
    """(series of the first scrape, every series seen over 20 restarts, how many kernel ids were used): a notebook's
    kernel holding GPU memory, restarted in place (same kernel id, a new process) or shut down and started again (a
    new kernel id), ten times each; each new process holds the memory again."""
    path = "lab/train.ipynb"
    kernel_id = await start_notebook_session(jp_fetch, path)
    config = three_gpus()

    async def hold_and_scrape() -> str:
        pid = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
        config["gpus"][1]["processes"] = [{"pid": pid, "used": 2048 * MIB}]
        fake_gpus.write(config)
        text = (await get_metrics(jp_fetch))[1]
        assert f'notebook="{path}"' in text, text  # the kernel's memory is there, in every scrape
        return text

    first = _series(await hold_and_scrape())
    seen = set(first)
    ids = {kernel_id}
    for restart in range(20):
        if restart % 2 == 0:
            await jp_fetch("api", "kernels", kernel_id, "restart", method="POST", body="")
        else:
            sessions = json.loads((await jp_fetch("api", "sessions")).body)
            await jp_fetch("api", "sessions", sessions[0]["id"], method="DELETE")
            kernel_id = await start_notebook_session(jp_fetch, path)
            ids.add(kernel_id)
        await asyncio.sleep(METRICS_MAX_AGE + 0.05)  # past the one rendered text scrapers share
        seen |= _series(await hold_and_scrape())
    return first, seen, len(ids)


@pytest.mark.kernel
@pytest.mark.parametrize("jp_server_config", [{"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
                                               "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0,
                                                               "metrics_detail": "notebook"}}])
async def test_per_notebook_series_count_stays_flat_across_twenty_kernel_restarts(jp_fetch, jp_serverapp,
                                                                                   fake_gpus):
    first, seen, kernels = await _restart_twenty_times(jp_fetch, jp_serverapp, fake_gpus)
    assert kernels == 11
    assert seen == first, sorted(seen - first)


@pytest.mark.kernel
@pytest.mark.parametrize("jp_server_config", [{"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
                                               "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0,
                                                               "metrics_detail": "process"}}])
async def test_per_process_every_restart_is_a_new_series(jp_fetch, jp_serverapp, fake_gpus):
    """What the per-notebook detail saves: the same restarts per process make a series per new process."""
    first, seen, _ = await _restart_twenty_times(jp_fetch, jp_serverapp, fake_gpus)
    held = {labels for name, labels in seen - first if name == "tfgpu_kernel_gpu_memory_used_bytes"}
    assert len(held) == 20


@pytest.mark.parametrize("jp_server_config", [{"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
                                               "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0,
                                                               "server_metrics": True}}])
async def test_server_metrics_publishes_the_series_on_jupyter_servers_own_metrics(jp_fetch, jp_serverapp, fake_gpus):
    """Kubernetes' usual way: pod annotations and jupyter_server's ``/metrics``. Its registry collects without waiting,
    so a scrape gets the latest shared answer and asks for the next: the second scrape has the GPUs."""
    first = (await jp_fetch("metrics")).body.decode()
    assert "process_cpu_seconds_total" in first or "http_request_duration_seconds" in first  # jupyter_server's own
    for _ in range(50):
        text = (await jp_fetch("metrics")).body.decode()
        if "tfgpu_gpu_memory_total_bytes" in text:
            break
        await asyncio.sleep(0.1)
    found = {(s.name, s.labels.get("gpu")): s.value for f in text_string_to_metric_families(text) for s in f.samples
             if s.name.startswith("tfgpu_")}
    assert found[("tfgpu_gpu_memory_total_bytes", "1")] == three_gpus()["gpus"][1]["memory_total"]
    assert found[("tfgpu_nvml_available", None)] == 1
