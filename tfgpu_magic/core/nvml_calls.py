"""One NVML call and what its failure means: NVML's return codes, the one mapping of an NVML error to an
``Unavailable``, the per-field call (a lost GPU aborts its whole reading), and the memory figures, read alike
for a GPU and a MIG device.

The reading modules (nvml.py, nvml_processes.py, nvml_mig.py) call through here; none imports pynvml itself:
``nv`` is the pynvml module nvml.py initialised.
"""

from __future__ import annotations

from typing import Any

from .nvml_values import IntOrNA, Unavailable

MIB = 1 << 20
# NVML return codes from nvml.h. They are C ABI, fixed across drivers, so the mapping below needs no
# pynvml import (and can run where pynvml is missing).
NVML_UNINITIALIZED = 1
NVML_NOT_SUPPORTED = 3
NVML_NO_PERMISSION = 4
NVML_NOT_FOUND = 6
NVML_DRIVER_NOT_LOADED = 9
NVML_LIBRARY_NOT_FOUND = 12
NVML_FUNCTION_NOT_FOUND = 13
NVML_GPU_IS_LOST = 15
NVML_LIB_RM_VERSION_MISMATCH = 18
NVML_ARGUMENT_VERSION_MISMATCH = 25

_REASON_BY_CODE = {
    NVML_NOT_SUPPORTED: "not_supported",
    NVML_NO_PERMISSION: "no_permission",
    NVML_GPU_IS_LOST: "gpu_lost",
    NVML_FUNCTION_NOT_FOUND: "function_not_found",
}

_memory_v2 = True  # False once the driver lacks nvmlDeviceGetMemoryInfo_v2 (before R510)


def forget() -> None:
    """Drop what was learnt of the driver (nvml.shutdown: the next init may meet another)."""
    global _memory_v2
    _memory_v2 = True


def unavailable_from_error(exc: BaseException, what: str = "") -> Unavailable:
    """The one mapping of an error raised while reading NVML to an ``Unavailable`` (reason in REASONS).

    ``exc`` is normally a ``pynvml.NVMLError`` (its ``value`` is the NVML return code), or the
    ``UnicodeDecodeError`` pynvml raises when the driver hands back text that is not UTF-8; anything else
    is reason "error". ``what`` prefixes the detail, e.g. "power".
    """
    code = getattr(exc, "value", None)
    if type(exc).__name__ == "NVMLLibraryMismatchError":  # pynvml's FunctionNotFound for unversioned calls
        reason, message = "function_not_found", str(exc)
    elif isinstance(exc, UnicodeDecodeError):
        reason, message = "error", f"the driver returned bytes that are not valid UTF-8: {_short_repr(exc.object)}"
    elif isinstance(code, int) and not isinstance(code, bool):
        reason = _REASON_BY_CODE.get(code, "error")
        try:
            message = str(exc)  # pynvml asks nvmlErrorString; fine once the library is loaded
        except Exception:
            message = f"NVML error {code}"
    else:
        reason, message = "error", f"{type(exc).__name__}: {exc}"
    return Unavailable(reason, f"{what}: {message}" if what else message)


def _short_repr(raw: bytes, limit: int = 48) -> str:
    """The bytes as Python writes them, cut to ``limit`` bytes: enough to quote in a bug report."""
    return repr(bytes(raw[:limit])) + ("..." if len(raw) > limit else "")


class GpuLost(Exception):
    """Raised inside one GPU's reading when a call says the GPU is gone: the whole GPU is reported lost."""

    def __init__(self, unavailable: Unavailable):
        super().__init__(unavailable.detail)
        self.unavailable = unavailable


def call(nv: Any, what: str, fn: Any, *args: Any) -> Any:
    """``fn(*args)``, or the Unavailable it maps to; a lost GPU aborts the whole GPU's reading. pynvml
    decodes NVML's strings as UTF-8, so one bad byte from the driver is this field's error, not the GPU's."""
    try:
        return fn(*args)
    except (nv.NVMLError, UnicodeDecodeError) as exc:
        return field_error(exc, what)


def field_error(exc: BaseException, what: str) -> Unavailable:
    unavailable = unavailable_from_error(exc, what)
    if unavailable.reason == "gpu_lost":
        raise GpuLost(unavailable) from None
    return unavailable


def mib(value: IntOrNA) -> IntOrNA:
    """Bytes to whole MiB (rounded down, as nvidia-smi shows them); a missing figure stays missing."""
    return value // MIB if isinstance(value, int) else value


def memory(nv: Any, handle: Any) -> tuple[IntOrNA, IntOrNA, IntOrNA, IntOrNA]:
    """(total, used, free, reserved) bytes, exactly as NVML gives them. v2 reports reserved apart from used; v1
    (drivers before R510) counts it in used and has no reserved figure."""
    global _memory_v2
    if _memory_v2:
        try:
            mem = nv.nvmlDeviceGetMemoryInfo(handle, version=nv.nvmlMemory_v2)
            return mem.total, mem.used, mem.free, mem.reserved
        except nv.NVMLError as exc:
            if getattr(exc, "value", None) not in (NVML_FUNCTION_NOT_FOUND, NVML_ARGUMENT_VERSION_MISMATCH):
                u = field_error(exc, "memory")
                return u, u, u, u
            _memory_v2 = False
    mem = call(nv, "memory", nv.nvmlDeviceGetMemoryInfo, handle)
    if isinstance(mem, Unavailable):
        return mem, mem, mem, mem
    no_reserved = Unavailable("function_not_found", "reserved memory: needs nvmlDeviceGetMemoryInfo_v2 (driver R510+)")
    return mem.total, mem.used, mem.free, no_reserved
