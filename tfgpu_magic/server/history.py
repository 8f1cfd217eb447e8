"""The server's GPU history: every GPU's memory used and utilization over the last hour, in a bounded ring.

Pure data (no tornado, no jupyter_server). The NVML worker appends a sample per reading it is due to keep
(feed.NvmlWorker), requests read a window of it (``?history=SECONDS``), each from its own thread: one lock.
A sample is one tuple per device, so an hour at 2 s for 8 GPUs stays near a megabyte (docs/development.md, Figures).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

# The series a sample keeps per device, in this order.
FIELDS = ("memory_used_mib", "utilization_gpu_pct")


def _figure(value: Any) -> int | None:
    """A figure as the history keeps it: an int, or None where NVML gave none (NA, a lost GPU)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def devices_of(reading: dict[str, Any]) -> dict[str, tuple[int | None, int | None, int | None]]:
    """{key: (memory used, utilization, memory total)} for every GPU ("0", "1" ...) and MIG device ("MIG-...")
    of one NVML reading (``nvml.snapshot().to_dict()``). MIG devices have no utilization of their own."""
    out: dict[str, tuple[int | None, int | None, int | None]] = {}
    for gpu in reading.get("gpus") or ():
        index = gpu.get("index")
        if isinstance(index, int):
            out[str(index)] = (_figure(gpu.get("memory_used_mib")), _figure(gpu.get("utilization_gpu_pct")),
                               _figure(gpu.get("memory_total_mib")))
        for mig in gpu.get("mig_devices") or ():
            uuid = mig.get("uuid")
            if isinstance(uuid, str):
                out[uuid] = (_figure(mig.get("memory_used_mib")), None, _figure(mig.get("memory_total_mib")))
    return out


class History:
    """Samples ``(t, {device: (used, utilization, total)})``, oldest first, none older than ``kept_s``."""

    def __init__(self, interval_s: float, kept_s: float):
        self.interval_s = interval_s
        self.kept_s = kept_s
        # One more than the hour needs: a sample taken a little early (a request's reading) does not push out one
        # still inside the hour.
        self._samples: deque[tuple[float, dict[str, tuple[int | None, int | None, int | None]]]] = deque(
            maxlen=max(1, int(kept_s / interval_s) + 2) if interval_s > 0 else 1)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._samples)

    @property
    def last_t(self) -> float | None:
        with self._lock:
            return self._samples[-1][0] if self._samples else None

    def add(self, t: float, reading: dict[str, Any]) -> None:
        devices = devices_of(reading)
        with self._lock:
            if self._samples and t <= self._samples[-1][0]:
                return  # an older reading finishing late: the ring stays in time order
            self._samples.append((t, devices))
            while self._samples and self._samples[0][0] < t - self.kept_s:
                self._samples.popleft()

    def window(self, seconds: float, now: float, since: float | None = None) -> dict[str, dict[str, Any]]:
        """{device: {"t": [...], "memory_used_mib": [...], "utilization_gpu_pct": [...] | None,
        "memory_total_mib": int | None}} for samples newer than ``now - seconds`` (and than ``since``). A device
        absent from a sample (lost, not yet there) has None at that time; MIG devices' utilization is None."""
        start = now - seconds
        with self._lock:
            chosen = [s for s in self._samples if s[0] > start]
        if since is not None:  # by the times as sent (rounded): the sample sent as `since` is not sent again
            chosen = [s for s in chosen if round(s[0], 2) > since]
        keys: dict[str, None] = {}
        for _, devices in chosen:
            keys.update(dict.fromkeys(devices))
        out: dict[str, dict[str, Any]] = {}
        for key in keys:
            used, util, total = [], [], None
            for _, devices in chosen:
                figures = devices.get(key, (None, None, None))
                used.append(figures[0])
                util.append(figures[1])
                total = figures[2] if figures[2] is not None else total
            mig = key.startswith("MIG-")
            out[key] = {"t": [round(t, 2) for t, _ in chosen], "memory_used_mib": used,
                        "utilization_gpu_pct": None if mig else util, "memory_total_mib": total}
        return out
