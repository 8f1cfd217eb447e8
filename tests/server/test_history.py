"""The server's own GPU history: the ring as pure data, and a real ``jupyter lab`` that samples with no sidebar open
(``?history=SECONDS`` then holds the samples and follows a change the test makes)."""

from __future__ import annotations

import time

import pytest
from fakenvml import MIB, fake_env, mig_gpu, three_gpus, write_config
from labsession import Lab

from tfgpu_magic.server.history import History, devices_of

pytestmark = pytest.mark.server


def reading(used: list[int | None], util: int | None = 5) -> dict:
    return {"available": True, "gpus": [{"index": i, "memory_used_mib": u if u is not None else
                                         {"unavailable": "gpu_lost", "detail": ""},
                                         "utilization_gpu_pct": util, "memory_total_mib": 1000}
                                        for i, u in enumerate(used)]}


def test_the_ring_keeps_the_last_hour_and_no_more():
    history = History(interval_s=2.0, kept_s=60.0)
    for k in range(100):
        history.add(1000.0 + 2 * k, reading([k]))
    assert len(history) <= 32  # bounded by kept_s / interval_s (+2), whatever is added
    window = history.window(3600, now=1000.0 + 198)
    assert window["0"]["t"][0] >= 1000.0 + 198 - 60  # nothing older than kept_s
    assert window["0"]["memory_used_mib"][-1] == 99


def test_a_window_since_a_time_and_gaps_for_lost_gpus():
    history = History(interval_s=1.0, kept_s=3600.0)
    history.add(10.0, reading([100, 200]))
    history.add(11.0, reading([110, None]))  # GPU 1 lost: a gap, not a 0
    history.add(12.0, reading([120]))  # GPU 1 gone from the list
    history.add(11.5, reading([999, 999]))  # older than the last: ignored
    window = history.window(60, now=12.0)
    assert window["0"] == {"t": [10.0, 11.0, 12.0], "memory_used_mib": [100, 110, 120],
                           "utilization_gpu_pct": [5, 5, 5], "memory_total_mib": 1000}
    assert window["1"]["memory_used_mib"] == [200, None, None]
    assert history.window(60, now=12.0, since=10.0)["0"]["t"] == [11.0, 12.0]
    assert history.window(1.5, now=12.0)["0"]["t"] == [11.0, 12.0]
    history.add(12.004, reading([121]))  # sent as 12.0: asking since 12.0 must not send it again
    assert history.window(60, now=13.0, since=11.0)["0"]["t"] == [12.0, 12.0]
    assert history.window(60, now=13.0, since=12.0) == {}


def test_mig_devices_keep_memory_and_no_utilization():
    snap = {"gpus": [{"index": 0, "memory_used_mib": 1536, "utilization_gpu_pct": {"unavailable": "not_supported"},
                      "memory_total_mib": 40960,
                      "mig_devices": [{"uuid": "MIG-a", "memory_used_mib": 1024, "memory_total_mib": 19968}]}]}
    assert devices_of(snap) == {"0": (1536, None, 40960), "MIG-a": (1024, None, 19968)}
    history = History(1.0, 60.0)
    history.add(1.0, snap)
    assert history.window(60, now=1.0)["MIG-a"]["utilization_gpu_pct"] is None


def test_a_server_samples_with_no_sidebar_open(fake_nvml_lib, tmp_path):
    """As installed, default interval (2 s): 30 s with nobody asking, then one request holds at least 15 samples
    per GPU and MIG device, and the samples follow a change of memory the test made half way."""
    config = three_gpus()
    config["gpus"].append(mig_gpu())
    path = write_config(tmp_path / "fake_nvml.cfg", config)
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, path, base={})) as lab:
        started = time.time()
        time.sleep(16)
        config["gpus"][1]["memory_used"] = 20000 * MIB
        write_config(path, config)
        changed = time.time()
        time.sleep(15)
        doc = lab.api("GET", "/tfgpu/api/gpus?history=3600")
        since = doc["history"]["gpus"]["1"]["t"][-3]
        newer = lab.api("GET", f"/tfgpu/api/gpus?history=3600&since={since}")["history"]["gpus"]["1"]["t"]
    history = doc["history"]
    assert history["sampling"] is True and history["interval_s"] == 2.0, history
    keys = {"0", "1", "2", "3", *(d["uuid"] for d in config["gpus"][3]["mig"]["devices"])}
    assert set(history["gpus"]) == keys
    for key, series in history["gpus"].items():
        assert len(series["t"]) >= 15, (key, len(series["t"]))
        assert all(started - 1 <= t <= time.time() for t in series["t"]), key
    h100 = history["gpus"]["1"]
    before = [m for t, m in zip(h100["t"], h100["memory_used_mib"], strict=True) if t < changed - 0.5]
    after = [m for t, m in zip(h100["t"], h100["memory_used_mib"], strict=True) if t > changed + 2.5]
    assert set(before) == {2048} and set(after) == {20000} and len(after) >= 5, h100
    assert history["gpus"]["0"]["utilization_gpu_pct"][-1] == 97
    # Only what is newer than a given time, for a sidebar that already has the rest (a sample may have come since).
    assert newer[:2] == h100["t"][-2:] and all(t > since for t in newer)  # times as sent: never `since` again


def test_no_sampling_without_nvml(fake_nvml_lib, tmp_path):
    """The driver is not loaded: the sampler stops after its first reading (no thread spinning on a missing
    driver), and the history says why."""
    path = write_config(tmp_path / "fake_nvml.cfg", {"errors": {"nvmlInitWithFlags": "DRIVER_NOT_LOADED"},
                                                    "gpus": []})
    calls = tmp_path / "calls.log"
    with Lab(extra_env=fake_env(fake_nvml_lib.parent, path, call_log=calls, base={})) as lab:
        time.sleep(6)  # three intervals
        inits = calls.read_text().count("nvmlInitWithFlags") if calls.exists() else 0
        doc = lab.api("GET", "/tfgpu/api/gpus?history=600")
    assert inits == 1, calls.read_text()
    assert doc["history"]["sampling"] is False
    assert doc["history"]["note"].startswith("no history: NVML is unavailable"), doc["history"]
    assert doc["history"]["gpus"] == {}
