"""A stand-in for ``nvidia-smi`` that prints what the real one would for a fake NVML config (tests/support/fakenvml).

``install(folder, spec)`` writes an executable ``nvidia-smi`` into ``folder`` (put the folder first on PATH)
that answers the queries benchmarks/gpu_check.py makes, from ``spec``::

    {"config": <the fake NVML config dict>, "override": {"<gpu index>": {"<query field>": "<text>"}}}

``gpu_csv``, ``apps_csv`` and ``header`` give unit tests the same text without a process. Only
``--format=csv,noheader,nounits`` is emulated, and only the fields below.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fakenvml import MIB

HERE = Path(__file__).resolve().parent
CSV_FORMAT = "--format=csv,noheader,nounits"
DEFAULT_DRIVER = "550.54.15"  # fake_nvml.c's defaults, for configs that leave them out
DEFAULT_CUDA = 12040


def gpu_values(config: dict[str, Any], index: int) -> dict[str, str]:
    """Every ``--query-gpu`` field this fake knows, as nvidia-smi prints it, for GPU ``index``."""
    gpu = config["gpus"][index]
    power = gpu.get("power_mw")
    return {
        "index": str(index),
        "name": gpu.get("name", "Fake GPU"),
        "uuid": gpu.get("uuid", f"GPU-fake-{index:04d}"),
        "pci.bus_id": gpu.get("pci_bus_id", f"00000000:{index + 1:02X}:00.0"),
        "memory.total": str(gpu.get("memory_total", 0) // MIB),
        "memory.used": str(gpu.get("memory_used", 0) // MIB),
        "utilization.gpu": str(gpu.get("utilization_gpu", 0)),
        "temperature.gpu": str(gpu.get("temperature", 0)),
        "power.draw": "[N/A]" if power is None else f"{power / 1000:.2f}",
        "driver_version": config.get("driver_version", DEFAULT_DRIVER),
    }


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return "[N/A]"


def app_values(config: dict[str, Any], self_pid: int) -> list[dict[str, str]]:
    """Every ``--query-compute-apps`` field this fake knows, one dict per process; "self" is ``self_pid``."""
    rows = []
    for index, gpu in enumerate(config.get("gpus", [])):
        uuid = gpu.get("uuid", f"GPU-fake-{index:04d}")
        for proc in gpu.get("processes", []):
            pid = self_pid if proc["pid"] == "self" else int(proc["pid"])
            used = "[N/A]" if proc["used"] == "unknown" else str(proc["used"] // MIB)
            rows.append({"pid": str(pid), "process_name": _comm(pid), "used_memory": used, "gpu_uuid": uuid})
    return rows


def _csv(rows: list[dict[str, str]], fields: Sequence[str]) -> str:
    for name in fields:
        if rows and name not in rows[0]:
            raise KeyError(name)
    return "".join(", ".join(row[name] for name in fields) + "\n" for row in rows)


def gpu_csv(config: dict[str, Any], fields: Sequence[str], override: dict[str, dict[str, str]] | None = None) -> str:
    """``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits``; ``override`` replaces printed values."""
    rows = []
    for index in range(len(config.get("gpus", []))):
        row = gpu_values(config, index)
        row.update((override or {}).get(str(index), {}))
        rows.append(row)
    return _csv(rows, fields)


def apps_csv(config: dict[str, Any], fields: Sequence[str], self_pid: int) -> str:
    """``nvidia-smi --query-compute-apps=<fields> --format=csv,noheader,nounits``."""
    return _csv(app_values(config, self_pid), fields)


def header(config: dict[str, Any]) -> str:
    """The top of plain ``nvidia-smi``'s output, where the driver and CUDA versions are."""
    driver = config.get("driver_version", DEFAULT_DRIVER)
    cuda = int(config.get("cuda_driver_version", DEFAULT_CUDA))
    return (
        "+-----------------------------------------------------------------------------------------+\n"
        f"| NVIDIA-SMI {driver}    Driver Version: {driver}    CUDA Version: {cuda // 1000}.{cuda % 1000 // 10}  |\n"
        "+-----------------------------------------------------------------------------------------+\n"
    )


def main(argv: Sequence[str], spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    config, override = spec["config"], spec.get("override", {})
    if not argv:
        sys.stdout.write(header(config))
        return 0
    query = next((a for a in argv if a.startswith("--query-")), None)
    if query is None or CSV_FORMAT not in argv:
        print(f"fake nvidia-smi: only plain output and {CSV_FORMAT} queries are emulated, not {argv}", file=sys.stderr)
        return 2
    kind, _, fields = query.partition("=")
    try:
        if kind == "--query-gpu":
            sys.stdout.write(gpu_csv(config, fields.split(","), override))
        elif kind == "--query-compute-apps":
            # The process that runs nvidia-smi is the one that reads the fake NVML: "self" is the parent.
            sys.stdout.write(apps_csv(config, fields.split(","), os.getppid()))
        else:
            print(f"fake nvidia-smi: {kind} is not emulated", file=sys.stderr)
            return 2
    except KeyError as exc:
        print(f"Field {exc.args[0]} is not a valid field to query.", file=sys.stderr)
        return 2
    return 0


def install(folder: str | os.PathLike[str], spec: dict[str, Any]) -> Path:
    """An executable ``<folder>/nvidia-smi`` answering from ``spec`` (see the module docstring)."""
    folder = Path(folder)
    spec_path = folder / "nvidia-smi.json"
    spec_path.write_text(json.dumps(spec))
    exe = folder / "nvidia-smi"
    exe.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "import fake_nvidia_smi\n"
        f"sys.exit(fake_nvidia_smi.main(sys.argv[1:], {str(spec_path)!r}))\n"
    )
    exe.chmod(0o755)
    return exe
