"""The metrics of memory this server cannot attribute (issue 33): in a container NVML's PIDs are the host's, and the
GPU document says each device's unattributed processes in one entry; the metrics carry it as
tfgpu_unattributed_gpu_processes and tfgpu_unattributed_gpu_memory_used_bytes with the per-process series' where
labels, and tfgpu_pid_namespace_comparable says which view applies. Hand-made documents of gpus.gpu_document's
shape, rendered through metrics.renderer as the handler does; no server."""

from __future__ import annotations

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from tfgpu_magic.core import words
from tfgpu_magic.server import metrics

MIB = 1 << 20
HOST = {"comparable": True, "view": "host", "note": ""}
CONTAINER = {"comparable": False, "view": "none", "note": "this process's PID namespace differs from the driver's"}


def lost(count: int, used_mib: int | None) -> dict:
    return {"count": count, "used_mib": used_mib, "used_bytes": None if used_mib is None else used_mib * MIB,
            "text": words.unattributed_line(count, used_mib, "this server", "none")}


def gpu(index: int, processes=(), unattributed=None, mig_devices=()) -> dict:
    return {"index": index, "uuid": f"GPU-{index:08d}", "name": "NVIDIA A100-SXM4-40GB", "memory_total_mib": 40960,
            "memory_used_mib": 14000, "utilization_gpu_pct": 10, "temperature_c": 40, "power_w": None,
            "error": None, "processes": list(processes), "hidden_processes": None, "kernel_note": "",
            "unattributed": unattributed, "mig_mode": bool(mig_devices) or None, "mig_devices": list(mig_devices)}


def mig(slot: int, uuid: str, unattributed=None, processes=()) -> dict:
    return {"uuid": uuid, "index": slot, "name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb", "profile": "3g.20gb",
            "memory_total_mib": 19968, "memory_used_mib": 3000, "processes": list(processes),
            "hidden_processes": None, "kernel_note": "", "unattributed": unattributed}


def document(gpus: list[dict], pids: dict | None = CONTAINER) -> dict:
    doc = {"nvml": {"available": True, "error": None, "driver_version": "550.54.15", "cuda_driver_version": "12.4"},
           "gpus": gpus, "kernels": [], "kernel_note": "", "other_users": "shown", "own_processes": "user",
           "server_user": "ann", "stale": None}
    if pids is not None:
        doc["pids"] = pids
    return doc


SCOPE = metrics.Scope("node-7", detail="kernel")


def samples(doc: dict, accept: str = "text/plain") -> dict[str, list[tuple[dict, float]]]:
    """Each family's (labels, value) pairs, the scope's Hostname checked on every sample and left out."""
    render, content_type = metrics.renderer(accept, SCOPE)
    parse = openmetrics_families if content_type.startswith("application/openmetrics-text") \
        else text_string_to_metric_families
    out: dict[str, list[tuple[dict, float]]] = {}
    for family in parse(render(doc).decode()):
        for sample in family.samples:
            labels = dict(sample.labels)
            assert labels.pop("Hostname") == "node-7", sample
            out.setdefault(sample.name, []).append((labels, sample.value))
    return out


WHERE = {"gpu": "0", "UUID": "GPU-00000000", "GPU_I_ID": "", "mig_uuid": ""}


@pytest.mark.parametrize("accept", ["text/plain", "application/openmetrics-text; version=1.0.0"])
def test_a_gpus_unattributed_memory_in_bytes_with_the_where_labels(accept):
    found = samples(document([gpu(0, unattributed=lost(2, 12288)), gpu(1)]), accept)
    assert found["tfgpu_unattributed_gpu_processes"] == [(WHERE, 2.0)]
    assert found["tfgpu_unattributed_gpu_memory_used_bytes"] == [(WHERE, 12288 * MIB)]
    assert found["tfgpu_pid_namespace_comparable"] == [({"view": "none"}, 0.0)]
    # Not counted as anybody's: the other processes are the ones this server can name (none here).
    assert found["tfgpu_other_processes"] == [(WHERE, 0.0), ({**WHERE, "gpu": "1", "UUID": "GPU-00000001"}, 0.0)]


def test_no_figure_from_nvml_is_an_absent_sample_not_a_zero():
    found = samples(document([gpu(0, unattributed=lost(1, None))]))
    assert found["tfgpu_unattributed_gpu_processes"] == [(WHERE, 1.0)]
    assert "tfgpu_unattributed_gpu_memory_used_bytes" not in found


def test_mig_devices_carry_their_own_and_their_gpu_none():
    uuid_a, uuid_b = "MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d", "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f"
    parent = gpu(0, unattributed=lost(2, 5000),  # the union: the devices' entries say it, counted once
                 mig_devices=[mig(0, uuid_a, lost(1, 3000)), mig(1, uuid_b, lost(1, 2000))])
    found = samples(document([parent]))
    memory = {labels["mig_uuid"]: value for labels, value in found["tfgpu_unattributed_gpu_memory_used_bytes"]}
    assert memory == {uuid_a: 3000 * MIB, uuid_b: 2000 * MIB}
    assert {labels["gpu"] for labels, _ in found["tfgpu_unattributed_gpu_processes"]} == {"0"}
    assert sum(value for _, value in found["tfgpu_unattributed_gpu_processes"]) == 2


def test_on_the_host_no_unattributed_series_and_the_namespace_comparable():
    found = samples(document([gpu(0, processes=[{"pid": 4242, "used_mib": 1000, "name": "python", "user": "bob",
                                                 "type": "C", "kernel": None}])], pids=HOST))
    assert "tfgpu_unattributed_gpu_processes" not in found
    assert "tfgpu_unattributed_gpu_memory_used_bytes" not in found
    assert found["tfgpu_pid_namespace_comparable"] == [({"view": "host"}, 1.0)]
    assert found["tfgpu_other_processes"] == [(WHERE, 1.0)]


def test_a_document_without_pids_has_no_namespace_sample():
    """An older document (before issue 33): nothing said is nothing made up."""
    found = samples(document([gpu(0)], pids=None))
    assert "tfgpu_pid_namespace_comparable" not in found and "tfgpu_unattributed_gpu_processes" not in found
