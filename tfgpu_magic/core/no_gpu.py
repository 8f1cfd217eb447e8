"""Why TensorFlow sees no GPU where NVML lists some: one sentence with the likely cause and the fix, for every view.

"My GPU is not used" is among the most asked TensorFlow questions. Three causes can be told apart without starting
TensorFlow's runtime: a CPU-only build (its build info says so: ``tensorflow-cpu``, or a wheel built without CUDA),
``CUDA_VISIBLE_DEVICES`` hiding every GPU, and otherwise CUDA failing to start in TensorFlow, which its own log at
import explains (a driver older than its CUDA, missing CUDA libraries).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .inputs import printable
from .numbering import read_entries

FIX_BUILD = "pip install 'tensorflow[and-cuda]'"
_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tf-nightly",
                  "tf-nightly-cpu", "tensorflow-macos")


def _build_info(tf: Any) -> dict:
    try:
        return dict(tf.sysconfig.get_build_info())
    except Exception:  # an old or unusual build without it: the cause is then not told from the build
        return {}


def cpu_only(tf: Any) -> bool:
    """Whether this TensorFlow was built without CUDA (and ROCm): it never lists a GPU, whatever is visible."""
    info = _build_info(tf)
    return info.get("is_cuda_build") is False and not info.get("is_rocm_build")


def distribution() -> str | None:
    """Which package installed TensorFlow, with its version: "tensorflow-cpu 2.21.0"."""
    import importlib.metadata  # with email and zipfile, ~6 ms: loaded by the view that asks, not by every import

    for name in _DISTRIBUTIONS:
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _hides_all(value: str) -> bool:
    """CUDA_VISIBLE_DEVICES values that leave CUDA no device: "", "-1", or any first entry CUDA stops at ("²", "x"),
    read as numbering.read_entries reads it (as CUDA does)."""
    return not read_entries(value).read


def reason(tf: Any, environ: Mapping[str, str], gpus_listed: int) -> str:
    """The sentence for a TensorFlow that lists no GPU while NVML lists ``gpus_listed``."""
    head = f"TensorFlow sees none of the {gpus_listed} GPU{'s' if gpus_listed != 1 else ''} NVML lists"
    info = _build_info(tf)
    if cpu_only(tf):
        package = distribution()
        which = f"this TensorFlow ({package})" if package else "this TensorFlow"
        return (f"{head}: {which} is a CPU-only build; install one with GPU support, {FIX_BUILD}, "
                "and restart the kernel")
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and _hides_all(visible):
        return (f"{head}: CUDA_VISIBLE_DEVICES={printable(visible)!r} hides them from CUDA; `%tfgpu visible all` "
                "before TensorFlow is imported (or restart the kernel without it)")
    cuda = info.get("cuda_version")
    needs = f" (this TensorFlow is built for CUDA {cuda}; `nvidia-smi` shows the newest CUDA the driver supports)" \
        if cuda else ""
    return (f"{head}: CUDA did not start in TensorFlow; its log at `import tensorflow` says why (`%tfgpu log` shows "
            f"it): often a driver too old for its CUDA{needs}, or CUDA libraries missing ({FIX_BUILD})")
