"""Build and configure the fake ``libnvidia-ml.so.1`` (fake_nvml.c) for tests and benchmarks.

The fake is loaded by the real pynvml in a subprocess whose ``LD_LIBRARY_PATH`` starts with the folder
holding it (pynvml does a bare ``CDLL("libnvidia-ml.so.1")``, and glibc reads ``LD_LIBRARY_PATH`` only at
process start, hence a subprocess). The GPUs it shows are described by a dict, written by
``write_config`` as the line-based text the C side parses; the C side re-reads the file when it changes.

Config dict (every key optional)::

    {
        "driver_version": "550.54.15",  # this and the GPUs' name, uuid, pci_bus_id: str, or bytes (any but NUL)
        "cuda_driver_version": 12040,
        "delays": {"nvmlDeviceGetCount_v2": 3000},  # a slow or hung driver: the call takes this many ms
        "errors": {  # error injection: function name -> code, {"gpu": i, "code": c}, or a list of those
            "nvmlInitWithFlags": "DRIVER_NOT_LOADED",
            "nvmlDeviceGetComputeRunningProcesses_v3": {"gpu": 1, "code": "NO_PERMISSION"},
            # "mig": a slot or "*": the call on that MIG device (any MIG device) of the GPU, not on its own handle
            "nvmlDeviceGetMemoryInfo_v2": {"gpu": 0, "mig": 1, "code": "UNKNOWN"},
        },
        "gpus": [{
            "name": "...", "uuid": "GPU-...", "pci_bus_id": "00000000:3B:00.0", "pci_device_id": 0x233010DE,
            "memory_total": bytes, "memory_used": bytes, "memory_reserved": bytes,
            "utilization_gpu": 35, "utilization_memory": 12, "temperature": 41,
            "power_mw": 120000,  # absent: NVML_ERROR_NOT_SUPPORTED
            "power_limit_mw": 700000,
            "lost": True,  # every call on this GPU, its handle included: NVML_ERROR_GPU_IS_LOST
            # "type": the NVML list(s) it is on, nvidia-smi's letters: "C" compute (default), "G" graphics, "C+G" both
            # "sm": its SM utilization (%) in the samples of nvmlDeviceGetProcessUtilization; absent: no sample (a
            # test changes it over time by writing the config again)
            "processes": [{"pid": 1234 or "self", "used": bytes or "unknown", "type": "G", "sm": 100}],
            "mig": {  # absent: no MIG (nvmlDeviceGetMigMode answers NOT_SUPPORTED, as a consumer GPU does)
                "mode": 1, "pending": 1,  # current / pending MIG mode, 0 or 1 ("pending" defaults to "mode")
                "slots": 7,  # nvmlDeviceGetMaxMigDeviceCount in MIG mode (default 7)
                "devices": [{  # listed only while "mode" is 1
                    "slot": 0,  # default: the position in this list; slots not listed answer NOT_FOUND
                    "uuid": "MIG-...", "name": "NVIDIA A100-SXM4-40GB MIG 3g.20gb",
                    "gpu_instance_id": 1, "compute_instance_id": 0,  # defaults: slot + 1, 0
                    "memory_total": bytes, "memory_used": bytes, "memory_reserved": bytes,
                    "processes": [{"pid": 1234 or "self", "used": bytes or "unknown"}],
                }],
            },
        }],
    }

In MIG mode the GPU's own "processes" are not listed: its process list is its MIG devices' (see fake_nvml.c).
"""

from __future__ import annotations

import contextlib
import copy
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

MIB = 1 << 20
SOURCE = Path(__file__).with_name("fake_nvml.c")
LIB_NAME = "libnvidia-ml.so.1"
CONFIG_ENV = "FAKE_NVML_CONFIG"
CALL_LOG_ENV = "FAKE_NVML_CALL_LOG"

ERROR_CODES = (
    "UNINITIALIZED",
    "INVALID_ARGUMENT",
    "NOT_SUPPORTED",
    "NO_PERMISSION",
    "NOT_FOUND",
    "DRIVER_NOT_LOADED",
    "TIMEOUT",
    "GPU_IS_LOST",
    "LIB_RM_VERSION_MISMATCH",
    "UNKNOWN",
)
_TEXT_KEYS = ("name", "uuid", "pci_bus_id")
_INT_KEYS = (
    "pci_device_id",
    "memory_total",
    "memory_used",
    "memory_reserved",
    "utilization_gpu",
    "utilization_memory",
    "temperature",
    "power_mw",
    "power_limit_mw",
)
_GPU_KEYS = {*_TEXT_KEYS, *_INT_KEYS, "lost", "processes", "mig"}
_MIG_KEYS = {"mode", "pending", "slots", "devices"}
_MIG_DEVICE_KEYS = {"slot", "uuid", "name", "gpu_instance_id", "compute_instance_id", "memory_total", "memory_used",
                    "memory_reserved", "processes"}


class FakeNvmlUnavailable(RuntimeError):
    """The fake cannot be built here (no C compiler)."""


GENERATIONS = ("r550", "r470")


def build_fake_nvml(dest_dir: str | os.PathLike[str], generation: str = "r550", lib_name: str = LIB_NAME) -> Path:
    """Compile fake_nvml.c to ``<dest_dir>/libnvidia-ml.so.1`` and return its path.

    ``generation`` picks the exported symbol set: "r550" (current drivers) or "r470" (before R510: no
    nvmlDeviceGetMemoryInfo_v2, process lists only through the _v2 call), to test the fallbacks. A
    library already there and newer than the source is reused, so a session (or a benchmark run)
    compiles once per folder. Raises FakeNvmlUnavailable without gcc, CalledProcessError if it does not
    compile. ``lib_name`` (file name and soname) other than the driver's is for loading in this process:
    see ``in_process``.
    """
    if generation not in GENERATIONS:
        raise ValueError(f"generation {generation!r}: use one of {', '.join(GENERATIONS)}")
    dest_dir = Path(dest_dir)
    dest = dest_dir / lib_name
    stamp = dest_dir / f".{lib_name}-generation"
    if (
        dest.exists()
        and dest.stat().st_mtime_ns >= SOURCE.stat().st_mtime_ns
        and stamp.exists()
        and stamp.read_text() == generation
    ):
        return dest
    gcc = shutil.which("gcc")
    if gcc is None:
        raise FakeNvmlUnavailable("gcc is not installed: cannot build the fake libnvidia-ml.so.1")
    dest_dir.mkdir(parents=True, exist_ok=True)
    # Compile to a temporary name, then rename: a half-written .so must never be loadable.
    fd, tmp = tempfile.mkstemp(dir=dest_dir, prefix=".build-", suffix=".so")
    os.close(fd)
    try:
        subprocess.run(
            [gcc, "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", f"-Wl,-soname,{lib_name}", "-o", tmp,
             f"-DFAKE_NVML_{generation.upper()}", str(SOURCE), "-lpthread"],
            check=True,
            capture_output=True,
            text=True,
        )
        os.replace(tmp, dest)
        stamp.write_text(generation)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return dest


def _error_lines(errors: dict[str, Any]) -> list[str]:
    lines = []
    for function, specs in errors.items():
        for spec in specs if isinstance(specs, list) else [specs]:
            gpu, code = ("*", spec) if not isinstance(spec, dict) else (spec.get("gpu", "*"), spec["code"])
            if code not in ERROR_CODES and not isinstance(code, int):
                raise ValueError(f"error code {code!r} for {function}: use one of {', '.join(ERROR_CODES)}")
            if isinstance(spec, dict) and "mig" in spec:
                if gpu == "*":
                    raise ValueError(f"error for {function}: a MIG slot needs a GPU index too")
                gpu = f"{gpu}:{spec['mig'] if spec['mig'] == '*' else int(spec['mig'])}"
            lines.append(f"error {function} {gpu} {code}")
    return lines


def _escape(value: str | bytes, what: str) -> str:
    """A text value as one config line's worth: UTF-8 (or the raw bytes given), with control bytes, bytes
    beyond ASCII and the backslash as \\xHH, which fake_nvml.c decodes. Bytes let a test hand out text
    that is not valid UTF-8, as a driver can."""
    raw = value if isinstance(value, bytes) else value.encode()
    if b"\0" in raw:
        raise ValueError(f"{what}: NVML strings end at NUL, so a value cannot hold one")
    return "".join(chr(b) if 0x20 <= b < 0x7F and b != 0x5C else f"\\x{b:02x}" for b in raw)


def render_config(config: dict[str, Any]) -> str:
    """The config dict as the text fake_nvml.c parses. Unknown keys are an error, not silently dropped."""
    unknown = set(config) - {"driver_version", "cuda_driver_version", "delays", "errors", "gpus"}
    if unknown:
        raise ValueError(f"unknown fake NVML config keys: {sorted(unknown)}")
    lines = ["# fake NVML config, written by tests/support/fakenvml"]
    if "driver_version" in config:
        lines.append(f"driver_version {_escape(config['driver_version'], 'driver_version')}")
    if "cuda_driver_version" in config:
        lines.append(f"cuda_driver_version {int(config['cuda_driver_version'])}")
    lines += _error_lines(config.get("errors", {}))
    lines += [f"delay {function} {int(ms)}" for function, ms in config.get("delays", {}).items()]
    for i, gpu in enumerate(config.get("gpus", [])):
        unknown = set(gpu) - _GPU_KEYS
        if unknown:
            raise ValueError(f"unknown keys for fake GPU {i}: {sorted(unknown)}")
        lines.append("gpu")
        lines += [f"{key} {_escape(gpu[key], f'GPU {i} {key}')}" for key in _TEXT_KEYS if key in gpu]
        lines += [f"{key} {int(gpu[key])}" for key in _INT_KEYS if key in gpu]
        if gpu.get("lost"):
            lines.append("lost 1")
        lines += [f"process {_process_text(proc)}" for proc in gpu.get("processes", [])]
        if "mig" in gpu:
            lines += _mig_lines(gpu["mig"], i)
    return "\n".join(lines) + "\n"


PROCESS_TYPES = ("C", "G", "C+G")


def _process_text(proc: dict[str, Any]) -> str:
    unknown = set(proc) - {"pid", "used", "type", "sm"}
    if unknown:
        raise ValueError(f"unknown keys for a fake process: {sorted(unknown)}")
    pid = proc["pid"] if proc["pid"] == "self" else int(proc["pid"])
    used = proc["used"] if proc["used"] == "unknown" else int(proc["used"])
    kind = proc.get("type", "C")
    if kind not in PROCESS_TYPES:
        raise ValueError(f"process type {kind!r}: use one of {', '.join(PROCESS_TYPES)}")
    if "sm" not in proc:
        return f"{pid} {used} {kind}"
    sm = int(proc["sm"])
    if not 0 <= sm <= 100:
        raise ValueError(f"process sm {sm!r}: a utilization from 0 to 100")
    return f"{pid} {used} {kind} {sm}"


def _mig_lines(mig: dict[str, Any], i: int) -> list[str]:
    unknown = set(mig) - _MIG_KEYS
    if unknown:
        raise ValueError(f"unknown MIG keys for fake GPU {i}: {sorted(unknown)}")
    mode = int(mig.get("mode", 0))
    lines = [f"mig_mode {mode} {int(mig.get('pending', mode))}"]
    if "slots" in mig:
        lines.append(f"mig_slots {int(mig['slots'])}")
    for position, device in enumerate(mig.get("devices", [])):
        unknown = set(device) - _MIG_DEVICE_KEYS
        if unknown:
            raise ValueError(f"unknown keys for MIG device {position} of fake GPU {i}: {sorted(unknown)}")
        slot = int(device.get("slot", position))
        lines.append(f"mig {slot} {int(device.get('gpu_instance_id', slot + 1))} "
                     f"{int(device.get('compute_instance_id', 0))}")
        lines += [f"mig_{key} {_escape(device[key], f'GPU {i} MIG {slot} {key}')}" for key in ("name", "uuid")
                  if key in device]
        lines += [f"mig_{key} {int(device[key])}" for key in ("memory_total", "memory_used", "memory_reserved")
                  if key in device]
        lines += [f"mig_process {_process_text(proc)}" for proc in device.get("processes", [])]
    return lines


def write_config(path: str | os.PathLike[str], config: dict[str, Any]) -> Path:
    """Write ``config`` for the fake at ``path``, atomically (a reader never sees half a file; the new
    inode also guarantees the fake notices the change even within one mtime tick)."""
    path = Path(path)
    text = render_config(config)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(fd, "w") as f:
        f.write(text)
    os.replace(tmp, path)
    return path


def fake_env(
    lib_dir: str | os.PathLike[str],
    config_path: str | os.PathLike[str],
    call_log: str | os.PathLike[str] | None = None,
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """An environment for a subprocess that loads the fake: ``lib_dir`` first on LD_LIBRARY_PATH."""
    env = dict(os.environ if base is None else base)
    rest = env.get("LD_LIBRARY_PATH")
    env["LD_LIBRARY_PATH"] = str(lib_dir) + (os.pathsep + rest if rest else "")
    env[CONFIG_ENV] = str(config_path)
    if call_log is not None:
        env[CALL_LOG_ENV] = str(call_log)
    else:
        env.pop(CALL_LOG_ENV, None)
    env.pop("PYTHONUNBUFFERED", None)
    return env


IN_PROCESS_LIB_NAME = "libnvidia-ml-fake-inprocess.so"


@contextlib.contextmanager
def in_process(lib_path: str | os.PathLike[str], config_path: str | os.PathLike[str]) -> Iterator[None]:
    """Make pynvml in THIS process use the fake at ``lib_path`` (built with ``IN_PROCESS_LIB_NAME``), for a
    server that pytest-jupyter runs in the test process itself.

    The fake is handed to pynvml directly instead of through LD_LIBRARY_PATH (read only at process start).
    Its soname is not the driver's, so once this is over a bare ``CDLL("libnvidia-ml.so.1")`` still finds
    nothing and later tests see the machine's real state again."""
    import ctypes

    import pynvml

    from tfgpu_magic.core import nvml

    if Path(lib_path).name == LIB_NAME:
        raise ValueError(f"{lib_path}: build it with lib_name=IN_PROCESS_LIB_NAME, not the driver's soname")
    nvml.shutdown()
    saved = os.environ.get(CONFIG_ENV)
    os.environ[CONFIG_ENV] = str(config_path)
    pynvml.nvmlLib = ctypes.CDLL(str(lib_path))
    pynvml._nvmlGetFunctionPointer_cache.clear()
    try:
        yield
    finally:
        nvml.shutdown()
        pynvml.nvmlLib = None
        pynvml._nvmlGetFunctionPointer_cache.clear()
        if saved is None:
            os.environ.pop(CONFIG_ENV, None)
        else:
            os.environ[CONFIG_ENV] = saved


# ---- ready-made configs ----

def three_gpus() -> dict[str, Any]:
    """Three different GPUs in PCI bus order. GPU 1 (H100, 81920 MiB: 25% is exactly 20480 MiB) has by
    far the most free memory; GPU 0 is nearly full; GPU 2 has no processes. GPU 1 lists this process
    ("self") and one process whose memory NVML cannot attribute; GPU 0 lists pid 1, which exists."""
    return {
        "driver_version": "550.54.15",
        "cuda_driver_version": 12040,
        "gpus": [
            {
                "name": "NVIDIA A100-SXM4-40GB",
                "uuid": "GPU-5c4e1f0a-7d2b-4e3c-9a81-0f6d2b7c1a00",
                "pci_bus_id": "00000000:07:00.0",
                "pci_device_id": 0x20B010DE,
                "memory_total": 40960 * MIB,
                "memory_used": 30000 * MIB,
                "memory_reserved": 512 * MIB,
                "utilization_gpu": 97,
                "utilization_memory": 61,
                "temperature": 66,
                "power_mw": 312500,
                "power_limit_mw": 400000,
                "processes": [
                    {"pid": 1, "used": 1000 * MIB},
                    {"pid": 3999901, "used": 29000 * MIB},
                ],
            },
            {
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": "GPU-9f3a6b21-84c0-4d5e-b7a2-3e1c0d9f8b11",
                "pci_bus_id": "00000000:3B:00.0",
                "pci_device_id": 0x233010DE,
                "memory_total": 81920 * MIB,
                "memory_used": 2048 * MIB,
                "memory_reserved": 569 * MIB,
                "utilization_gpu": 3,
                "utilization_memory": 1,
                "temperature": 34,
                "power_mw": 71250,
                "power_limit_mw": 700000,
                "processes": [
                    {"pid": "self", "used": 1024 * MIB},
                    {"pid": 3999902, "used": "unknown"},
                ],
            },
            {
                "name": "Tesla T4",
                "uuid": "GPU-2e7d9c40-1b35-4f68-8a0c-6d4b2f1e7c93",
                "pci_bus_id": "00000000:86:00.0",
                "pci_device_id": 0x1EB810DE,
                "memory_total": 15360 * MIB,
                "memory_used": 0,
                "memory_reserved": 256 * MIB,
                "utilization_gpu": 0,
                "utilization_memory": 0,
                "temperature": 29,
                "power_mw": 9800,
                "power_limit_mw": 70000,
                "processes": [],
            },
        ],
    }


def graphics_gpus() -> dict[str, Any]:
    """``three_gpus()`` with graphics processes, as nvidia-smi's Type column would show them: GPU 0 adds pid 3999911,
    graphics only ("G", 180 MiB: a desktop session), after its two compute processes; on GPU 1 this process ("self")
    is on both lists ("C+G", its 1024 MiB counted once); GPU 2 gets pid 3999912, graphics only, memory unknown."""
    config = three_gpus()
    config["gpus"][0]["processes"].append({"pid": 3999911, "used": 180 * MIB, "type": "G"})
    config["gpus"][1]["processes"][0]["type"] = "C+G"
    config["gpus"][2]["processes"] = [{"pid": 3999912, "used": "unknown", "type": "G"}]
    return config


def n_gpus(n: int, procs_per_gpu: int = 0) -> dict[str, Any]:
    """``n`` identical 80 GiB GPUs, each with ``procs_per_gpu`` processes: this process first, then
    pid 1 (a real process, so /proc lookups do real work), then pids that do not exist."""
    gpus = []
    for i in range(n):
        pids: list[int | str] = ["self", 1, *(3900000 + 100 * i + k for k in range(max(0, procs_per_gpu - 2)))]
        gpus.append(
            {
                "name": "NVIDIA H100 80GB HBM3",
                "uuid": f"GPU-00000000-0000-4000-8000-{i:012d}",
                "pci_bus_id": f"00000000:{0x10 + 0x10 * i:02X}:00.0",
                "memory_total": 81920 * MIB,
                "memory_used": (1024 + 512 * i) * MIB,
                "memory_reserved": 569 * MIB,
                "utilization_gpu": (10 * i) % 101,
                "utilization_memory": (5 * i) % 101,
                "temperature": 30 + i,
                "power_mw": 70000 + 1000 * i,
                "processes": [{"pid": pid, "used": 256 * MIB} for pid in pids[:procs_per_gpu]],
            }
        )
    return {"driver_version": "550.54.15", "cuda_driver_version": 12040, "gpus": gpus}


def mig_gpu(devices: list[dict[str, Any]] | None = None, mode: int = 1, pending: int | None = None,
            **changes: Any) -> dict[str, Any]:
    """An A100 40GB (one GPU's dict for a config's "gpus") with MIG ``mode`` on (1) or off (0) and ``pending``
    (default: ``mode``). ``devices`` default: slot 0 a 3g.20gb (GPU instance 1) where this process ("self")
    holds 1000 MiB, slot 1 a 2g.10gb (GPU instance 3) with pid 3999903 holding 500 MiB; ``[]``: MIG mode with
    no instance created. A device may give "profile" instead of "name" (the name is then the parent's
    + " MIG <profile>"). The GPU's used memory is its devices' sum; ``changes`` override the GPU's keys."""
    name = changes.get("name", "NVIDIA A100-SXM4-40GB")
    if devices is None:
        devices = [
            {"uuid": "MIG-5e8b0c1a-2f3d-5a6b-9c7d-0e1f2a3b4c5d", "profile": "3g.20gb", "gpu_instance_id": 1,
             "compute_instance_id": 0, "memory_total": 19968 * MIB, "memory_used": 1024 * MIB,
             "processes": [{"pid": "self", "used": 1000 * MIB}]},
            {"uuid": "MIG-9d2c4e6f-7a8b-5c9d-8e0f-1a2b3c4d5e6f", "profile": "2g.10gb", "gpu_instance_id": 3,
             "compute_instance_id": 0, "memory_total": 9728 * MIB, "memory_used": 512 * MIB,
             "processes": [{"pid": 3999903, "used": 500 * MIB}]},
        ]
    built = []
    for device in devices:
        device = dict(device)
        profile = device.pop("profile", None)
        if profile is not None:
            device.setdefault("name", f"{name} MIG {profile}")
        built.append(device)
    gpu = {
        "name": name,
        "uuid": "GPU-7b1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f",
        "pci_bus_id": "00000000:07:00.0",
        "pci_device_id": 0x20B010DE,
        "memory_total": 40960 * MIB,
        "memory_used": sum(d.get("memory_used", 0) for d in built) if mode else 0,
        "memory_reserved": 512 * MIB,
        "utilization_gpu": 0,  # not reported in MIG mode
        "utilization_memory": 0,
        "temperature": 41,
        "power_mw": 88000,
        "power_limit_mw": 400000,
        "mig": {"mode": mode, "pending": mode if pending is None else pending, "devices": built},
    }
    gpu.update(changes)
    return gpu


def mig_config() -> dict[str, Any]:
    """GPU 0 an A100 in MIG mode with two MIG devices (see ``mig_gpu``), GPU 1 a Tesla T4 without MIG."""
    return {"driver_version": "550.54.15", "cuda_driver_version": 12040,
            "gpus": [mig_gpu(), copy.deepcopy(three_gpus()["gpus"][2])]}


def with_changes(config: dict[str, Any], **gpu_changes: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of ``config`` with per-GPU changes, e.g. ``with_changes(cfg, gpu1={"lost": True})``;
    a value of None removes that key (``{"power_mw": None}``: power not supported)."""
    config = copy.deepcopy(config)
    for key, changes in gpu_changes.items():
        gpu = config["gpus"][int(key.removeprefix("gpu"))]
        for name, value in changes.items():
            if value is None:
                gpu.pop(name, None)
            else:
                gpu[name] = value
    return config


def expected_gpu(config: dict[str, Any], index: int, self_pid: int) -> dict[str, Any]:
    """What ``Gpu.to_dict`` form the adapter should report for GPU ``index`` of ``config`` when every
    call succeeds. Processes carry pid, used_mib, is_self and type only (name/user come from /proc)."""
    gpu = config["gpus"][index]
    total, used, reserved = gpu["memory_total"], gpu["memory_used"], gpu["memory_reserved"]
    processes = _expected_processes(gpu.get("processes", []), self_pid)
    mig = gpu.get("mig")
    mig_on = bool(mig and mig.get("mode"))
    mig_devices = []
    if mig_on:
        for position, device in enumerate(mig.get("devices", [])):
            mig_devices.append(_expected_mig_device(device, index, position, self_pid))
        mig_devices.sort(key=lambda d: d["index"])
        processes = _merged(mig_devices)
    not_in_mig = NA("not_supported", "MIG mode")
    return {
        "index": index,
        "name": gpu["name"],
        "uuid": gpu["uuid"],
        "pci_bus_id": gpu["pci_bus_id"],
        "memory_total_mib": total // MIB,
        "memory_used_mib": used // MIB,
        "memory_free_mib": (total - used - reserved) // MIB,
        "memory_reserved_mib": reserved // MIB,
        "utilization_gpu_pct": not_in_mig if mig_on else gpu["utilization_gpu"],
        "utilization_memory_pct": not_in_mig if mig_on else gpu["utilization_memory"],
        "temperature_c": gpu["temperature"],
        "power_w": gpu["power_mw"] / 1000.0 if "power_mw" in gpu else None,
        "processes": processes,
        "error": None,
        "mig_mode": None if mig is None else bool(mig.get("mode")),
        "mig_pending": None if mig is None else bool(mig.get("pending", mig.get("mode"))),
        "mig_devices": mig_devices,
        "mig_error": None,
        "memory_total_bytes": total,
        "memory_used_bytes": used,
        "memory_free_bytes": total - used - reserved,
        "memory_reserved_bytes": reserved,
    }


def _expected_processes(procs: list[dict[str, Any]], self_pid: int, per_process: bool = True) -> list[dict[str, Any]]:
    """One device's list as the adapter merges NVML's two: the compute list's processes ("C", "C+G") in order, then
    the graphics-only ones ("G"); each once, with its type, and its SM utilization (0 without a sample; None where
    the device gives none per process: ``per_process`` False, a MIG device)."""
    result = []
    for graphics_only in (False, True):
        for proc in procs:
            kind = proc.get("type", "C")
            if (kind == "G") != graphics_only:
                continue
            pid = self_pid if proc["pid"] == "self" else proc["pid"]
            used = None if proc["used"] == "unknown" else proc["used"]
            result.append({"pid": pid, "used_mib": None if used is None else used // MIB, "used_bytes": used,
                           "is_self": pid == self_pid, "type": kind,
                           "sm_pct": proc.get("sm", 0) if per_process else None})
    return result


def _expected_mig_device(device: dict[str, Any], parent: int, position: int, self_pid: int) -> dict[str, Any]:
    slot = device.get("slot", position)
    total, used = device.get("memory_total", 0), device.get("memory_used", 0)
    reserved = device.get("memory_reserved", 0)
    name = device.get("name", "Fake GPU MIG 1g.10gb")
    return {
        "parent_index": parent,
        "index": slot,
        "uuid": device.get("uuid", f"MIG-fake-{parent:04d}-{slot}"),
        "name": name,
        "profile": name.rsplit(" MIG ", 1)[1],
        "gpu_instance_id": device.get("gpu_instance_id", slot + 1),
        "compute_instance_id": device.get("compute_instance_id", 0),
        "memory_total_mib": total // MIB,
        "memory_used_mib": used // MIB,
        "memory_free_mib": max(0, total - used - reserved) // MIB,
        "memory_reserved_mib": reserved // MIB,
        "utilization_gpu_pct": NA("not_supported", "per MIG device"),
        "temperature_c": NA("not_supported", "per MIG device"),
        "processes": _expected_processes(device.get("processes", []), self_pid, per_process=False),
        "memory_total_bytes": total,
        "memory_used_bytes": used,
        "memory_free_bytes": max(0, total - used - reserved),
        "memory_reserved_bytes": reserved,
    }


def _merged(mig_devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A MIG-mode GPU's process list: its MIG devices' processes, each pid once, memory added up."""
    by_pid: dict[int, dict[str, Any]] = {}
    for device in mig_devices:
        for proc in device["processes"]:
            seen = by_pid.get(proc["pid"])
            if seen is None:
                by_pid[proc["pid"]] = dict(proc)
                continue
            if seen["used_bytes"] is not None:
                seen["used_bytes"] = None if proc["used_bytes"] is None else seen["used_bytes"] + proc["used_bytes"]
                seen["used_mib"] = None if seen["used_bytes"] is None else seen["used_bytes"] // MIB
            if seen["type"] != proc["type"]:
                seen["type"] = "C+G"
    return list(by_pid.values())


class NA:
    """Equal to an ``Unavailable.to_dict()`` with this reason whose detail holds every one of ``parts``: for
    ``expected_gpu``, where a detail's exact words are not the point."""

    __hash__ = None  # type: ignore[assignment]

    def __init__(self, reason: str, *parts: str):
        self.reason, self.parts = reason, parts

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, dict) and other.get("unavailable") == self.reason
                and all(part in other.get("detail", "") for part in self.parts))

    def __repr__(self) -> str:
        return f"NA({self.reason!r}{''.join(f', {p!r}' for p in self.parts)})"


def without_owner(gpu: dict[str, Any]) -> dict[str, Any]:
    """A GPU's (or a MIG device's) dict with process name/user dropped (they come from /proc, so tests check
    them apart)."""
    gpu = dict(gpu)
    if isinstance(gpu["processes"], list):
        gpu["processes"] = [{k: p[k] for k in ("pid", "used_mib", "used_bytes", "is_self", "type", "sm_pct")}
                            for p in gpu["processes"]]
    if gpu.get("mig_devices"):
        gpu["mig_devices"] = [without_owner(d) for d in gpu["mig_devices"]]
    return gpu


# Snapshot, swap in each staged config (atomically, as write_config does), snapshot again, and so on: all in one
# process, so NVML stays initialised and the adapter's caches are live (tests/core/test_nvml_faults.py, _mig.py).
SWAPS = """
import json, os
from tfgpu_magic.core import nvml
snaps = [nvml.snapshot().to_dict()]
for staged in {staged!r}:
    os.replace(staged, {config!r})
    snaps.append(nvml.snapshot().to_dict())
print(json.dumps({{"pid": os.getpid(), "snaps": snaps}}))
"""


def run_swaps(fake_nvml, tmp_path, first, *then):
    """(pid, [snapshot dict for ``first``, then one per config of ``then``]), read by one process."""
    fake_nvml.write(first)
    staged = [str(write_config(tmp_path / f"staged{i}.cfg", cfg)) for i, cfg in enumerate(then)]
    out = fake_nvml.run_json(SWAPS.format(staged=staged, config=str(fake_nvml.config_path)))
    return out["pid"], out["snaps"]


def assert_unavailable(value, reason, *detail_parts):
    """``value`` is an Unavailable's dict form with this reason, its detail naming each of ``detail_parts``."""
    from tfgpu_magic.core.nvml import REASONS

    assert isinstance(value, dict) and value.get("unavailable") == reason, value
    assert reason in REASONS
    for part in detail_parts:
        assert part in value["detail"], value["detail"]
