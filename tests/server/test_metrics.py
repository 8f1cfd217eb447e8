"""``GET tfgpu/api/metrics`` through a real jupyter_server in this process: Prometheus's text format as
prometheus_client's own parser reads it, equal to the fake NVML's figures, a kernel's GPU memory labelled with its
notebook, and no NVML reading of its own (the sidebar's shared answer)."""

from __future__ import annotations

import asyncio
import math
import os
import socket

import pytest
from fakenvml import MIB, graphics_gpus, mig_gpu, three_gpus
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families
from serverapi import get_gpus, get_metrics, start_notebook_session

pytestmark = pytest.mark.server


def samples(text: str, parse=text_string_to_metric_families) -> dict[str, list[tuple[dict, float]]]:
    """Each family's (labels, value) pairs; every sample's Hostname (this machine's: no NODE_NAME, no Hub here) is
    checked and left out."""
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in parse(text):
        for sample in family.samples:
            labels = dict(sample.labels)
            assert labels.pop("Hostname") == (os.environ.get("NODE_NAME") or socket.gethostname()), sample
            assert "user" not in labels or sample.name == "tfgpu_process_gpu_memory_used_bytes", sample
            out.setdefault(sample.name, []).append((labels, sample.value))
    return out


def by(found: dict, name: str, key: str) -> dict[str, float]:
    return {labels[key]: value for labels, value in found[name]}


async def test_gpu_figures_equal_the_fake_nvmls(jp_fetch, fake_gpus):
    config = three_gpus()
    config["gpus"].append(mig_gpu())
    del config["gpus"][2]["power_mw"]  # the T4 reports no power (NOT_SUPPORTED)
    fake_gpus.write(config)
    content_type, text = await get_metrics(jp_fetch)
    assert content_type.startswith("text/plain; version=0.0.4")
    found = samples(text)
    used = by(found, "tfgpu_gpu_memory_used_bytes", "gpu")
    total = by(found, "tfgpu_gpu_memory_total_bytes", "gpu")
    for index, gpu in enumerate(config["gpus"]):
        assert total[str(index)] == gpu["memory_total"], index
        assert used[str(index)] == gpu["memory_used"]  # a MIG-mode GPU's: its devices' sum (fakenvml.mig_gpu)
    labels = {labels["gpu"]: labels for labels, _ in found["tfgpu_gpu_memory_used_bytes"]}
    # DCGM's exporter's names: a PromQL join on UUID with its series needs no label_replace.
    assert labels["1"] == {"gpu": "1", "UUID": config["gpus"][1]["uuid"], "modelName": "NVIDIA H100 80GB HBM3"}
    util = by(found, "tfgpu_gpu_utilization_ratio", "gpu")
    assert util == {"0": 0.97, "1": config["gpus"][1]["utilization_gpu"] / 100, "2": 0.0}  # MIG mode: none
    temperature = by(found, "tfgpu_gpu_temperature_celsius", "gpu")
    assert temperature["0"] == config["gpus"][0]["temperature"]
    # The T4 reports no power: an absent sample, never a 0.
    assert set(by(found, "tfgpu_gpu_power_watts", "gpu")) == {"0", "1", "3"}
    mig = {labels["mig_uuid"]: (labels, value) for labels, value in found["tfgpu_mig_memory_used_bytes"]}
    devices = config["gpus"][3]["mig"]["devices"]
    assert {uuid: value for uuid, (_, value) in mig.items()} == {d["uuid"]: d["memory_used"] for d in devices}
    assert {labels["gpu"] for labels, _ in mig.values()} == {"3"}
    assert {labels["UUID"] for labels, _ in mig.values()} == {config["gpus"][3]["uuid"]}  # the parent's, as DCGM's
    assert {labels["GPU_I_PROFILE"] for labels, _ in mig.values()} == {"3g.20gb", "2g.10gb"}
    assert {labels["GPU_I_ID"] for labels, _ in mig.values()} == {str(d["gpu_instance_id"]) for d in devices}
    assert found["tfgpu_nvml_available"] == [({}, 1.0)] and found["tfgpu_reading_stale"] == [({}, 0.0)]
    info_labels = found["tfgpu_info"][0][0]
    assert info_labels["driver_version"] == "550.54.15" and info_labels["cuda_driver_version"] == "12.4"
    # Other processes: pid 1 and one that does not exist on GPU 0; this process on GPU 1 (it is no kernel).
    assert by(found, "tfgpu_other_processes", "gpu")["0"] == 2


async def test_openmetrics_when_the_scraper_asks(jp_fetch, fake_gpus):
    content_type, text = await get_metrics(jp_fetch, accept="application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text")
    assert text.endswith("# EOF\n")
    found = samples(text, openmetrics_families)
    assert by(found, "tfgpu_gpu_memory_total_bytes", "gpu")["1"] == 81920 * MIB


async def test_without_nvml_the_metrics_say_so(jp_fetch, fake_gpus):
    fake_gpus.write({"errors": {"nvmlInitWithFlags": "DRIVER_NOT_LOADED"}, "gpus": []})
    found = samples((await get_metrics(jp_fetch))[1])
    assert found["tfgpu_nvml_available"] == [({}, 0.0)]
    assert "tfgpu_gpu_memory_used_bytes" not in found


@pytest.mark.kernel
async def test_a_notebooks_gpu_memory_carries_its_path(jp_fetch, jp_serverapp, fake_gpus):
    kernel_id = await start_notebook_session(jp_fetch, "work/train.ipynb")
    pid = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": pid, "used": 2048 * MIB}, {"pid": 1, "used": 100 * MIB}]
    config["gpus"][2]["processes"] = [{"pid": pid, "used": 512 * MIB}]
    fake_gpus.write(config)
    found = samples((await get_metrics(jp_fetch))[1])
    held = {(labels["gpu"], labels["kernel_id"], labels["notebook"], labels["mig_uuid"]): value
            for labels, value in found["tfgpu_kernel_gpu_memory_used_bytes"]}
    assert held == {("1", kernel_id, "work/train.ipynb", ""): 2048 * MIB,
                    ("2", kernel_id, "work/train.ipynb", ""): 512 * MIB}
    idle = found["tfgpu_kernel_idle_seconds"]
    assert [labels for labels, _ in idle] == [{"kernel_id": kernel_id, "notebook": "work/train.ipynb"}]
    assert idle[0][1] >= 0 and math.isfinite(idle[0][1])
    others = by(found, "tfgpu_other_processes", "gpu")
    assert others["1"] == 1 and others["2"] == 0  # the kernel is not counted among the others
    # The same figures the sidebar gets.
    doc = await get_gpus(jp_fetch)
    assert doc["gpus"][1]["processes"][0]["kernel"]["id"] == kernel_id


async def test_each_process_series_says_its_type(jp_fetch, fake_gpus):
    """nvidia-smi's Type column as a label: compute, graphics, compute+graphics; graphics processes are counted among
    the other processes like compute ones, a C+G process's memory once."""
    fake_gpus.write(graphics_gpus())
    found = samples((await get_metrics(jp_fetch))[1])
    series = {labels["pid"]: (labels["type"], value) for labels, value in found["tfgpu_process_gpu_memory_used_bytes"]}
    assert series["1"] == ("compute", 1000 * MIB) and series["3999911"] == ("graphics", 180 * MIB)
    assert series[str(os.getpid())] == ("compute+graphics", 1024 * MIB)
    assert "3999912" not in series  # graphics, but NVML gives no memory figure: an absent sample
    assert by(found, "tfgpu_other_processes", "gpu") == {"0": 3, "1": 2, "2": 1}
    assert by(found, "tfgpu_other_processes_memory_used_bytes", "gpu") == {
        "0": (1000 + 29000 + 180) * MIB, "1": 1024 * MIB, "2": 0}


@pytest.mark.kernel
async def test_a_notebooks_graphics_memory_counts_as_its_gpu_memory(jp_fetch, jp_serverapp, fake_gpus):
    """A kernel on NVML's graphics list (EGL rendering): its memory is the kernel's, in the sidebar's document and in
    the kernel series, once where it is on both lists."""
    kernel_id = await start_notebook_session(jp_fetch, "work/render.ipynb")
    pid = jp_serverapp.kernel_manager.get_kernel(kernel_id).provisioner.pid
    config = three_gpus()
    config["gpus"][1]["processes"] = [{"pid": pid, "used": 2048 * MIB, "type": "C+G"}]
    config["gpus"][2]["processes"] = [{"pid": pid, "used": 300 * MIB, "type": "G"}]
    fake_gpus.write(config)
    found = samples((await get_metrics(jp_fetch))[1])
    held = {labels["gpu"]: value for labels, value in found["tfgpu_kernel_gpu_memory_used_bytes"]
            if labels["kernel_id"] == kernel_id}
    assert held == {"1": 2048 * MIB, "2": 300 * MIB}
    assert by(found, "tfgpu_other_processes", "gpu")["2"] == 0
    doc = await get_gpus(jp_fetch)
    assert [(p["type"], p["kernel"]) for p in doc["gpus"][2]["processes"]] == [
        ("G", {"id": kernel_id, "relation": "kernel", "how": "pid"})]


@pytest.mark.parametrize("jp_server_config", [{"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
                                               "TfgpuServer": {"snapshot_max_age": 60.0, "history_interval": 0.0}}])
async def test_scrapes_share_the_sidebars_answer(jp_fetch, jp_serverapp, fake_gpus):
    feed = jp_serverapp.web_app.settings["tfgpu_feed"]
    await get_gpus(jp_fetch)
    readings = feed.readings
    texts = {(await get_metrics(jp_fetch))[1] for _ in range(5)}
    assert feed.readings == readings  # no reading of their own
    assert len(texts) == 1  # rendered once per answer, then served as made


@pytest.mark.parametrize("jp_server_config", [{"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
                                               "TfgpuServer": {"snapshot_max_age": 0.0, "history_interval": 0.0,
                                                               "show_other_users": False}}])
async def test_hidden_other_users_are_counted_not_listed(jp_fetch, fake_gpus):
    config = three_gpus()
    config["gpus"][0]["processes"] = [{"pid": 3999901, "used": 700 * MIB}, {"pid": 3999902, "used": 300 * MIB}]
    fake_gpus.write(config)
    found = samples((await get_metrics(jp_fetch))[1])
    assert "tfgpu_process_gpu_memory_used_bytes" not in found or not any(
        labels["gpu"] == "0" for labels, _ in found["tfgpu_process_gpu_memory_used_bytes"])
    assert by(found, "tfgpu_other_processes", "gpu")["0"] == 2
    assert by(found, "tfgpu_other_processes_memory_used_bytes", "gpu")["0"] == 1000 * MIB


async def test_a_metrics_text_serves_scrapers_for_a_second_then_follows_the_gpus(jp_fetch, jp_serverapp, fake_gpus):
    """With snapshot_max_age 0 every sidebar request reads; scrapers share one rendered text for a second (rendering
    hundreds of processes per scrape would cost the sidebars their answers), then get the new figures."""
    feed = jp_serverapp.web_app.settings["tfgpu_feed"]
    first = (await get_metrics(jp_fetch))[1]
    config = three_gpus()
    config["gpus"][1]["memory_used"] = 4096 * MIB
    fake_gpus.write(config)
    readings = feed.readings
    assert (await get_metrics(jp_fetch))[1] == first and feed.readings == readings
    assert (await get_gpus(jp_fetch))["gpus"][1]["memory_used_mib"] == 4096  # the sidebar's answer is new
    await asyncio.sleep(1.1)
    found = samples((await get_metrics(jp_fetch))[1])
    assert by(found, "tfgpu_gpu_memory_used_bytes", "gpu")["1"] == 4096 * MIB
