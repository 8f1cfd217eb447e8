"""Why TensorFlow sees no GPU where NVML lists some: one sentence with the likely cause and the fix, for every view.

"My GPU is not used" is among the most asked TensorFlow questions. Three causes can be told apart without starting
TensorFlow's runtime: a CPU-only build (its build info says so: ``tensorflow-cpu``, or a wheel built without CUDA),
``CUDA_VISIBLE_DEVICES`` hiding every GPU, and otherwise CUDA failing to start in TensorFlow, which its own log at
import explains (a driver older than its CUDA, missing CUDA libraries).
"""

from __future__ import annotations

import ast
import importlib.machinery
import os
from collections.abc import Mapping
from typing import Any

from .i18n import _, ngettext
from .inputs import printable
from .numbering import read_entries

FIX_BUILD = "pip install 'tensorflow[and-cuda]'"
_DISTRIBUTIONS = ("tensorflow", "tensorflow-cpu", "tensorflow-gpu", "tensorflow-intel", "tf-nightly",
                  "tf-nightly-cpu", "tensorflow-macos")
# Packages whose files are a CPU-only TensorFlow: pip installs tensorflow over them without removing them (they own
# the same files), so they go first, or the next reinstall of one puts the CPU-only files back.
_CPU_ONLY_DISTRIBUTIONS = ("tensorflow-cpu", "tf-nightly-cpu")


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


def _installed(name: str) -> bool:
    import importlib.metadata

    try:
        importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


def fix_build() -> str:
    """The commands that replace a CPU-only TensorFlow by one with GPU support, as they work here: with
    tensorflow-cpu installed, "pip uninstall -y tensorflow-cpu, then pip install 'tensorflow[and-cuda]'". Two
    commands, not one joined by &&: in a notebook each is a %pip line (%pip hands the rest of its line to a shell,
    where a second bare `pip` may be another Python's). Where tensorflow is installed beside tensorflow-cpu, both
    go: they share the tensorflow/ folder, so removing one breaks the other, which pip then calls satisfied."""
    first = [name for name in _CPU_ONLY_DISTRIBUTIONS if _installed(name)]
    if first and _installed("tensorflow"):
        first.append("tensorflow")
    return _("{uninstall}, then {install}").format(uninstall=f"pip uninstall -y {' '.join(first)}",
                                                   install=FIX_BUILD) if first else FIX_BUILD


def installed_build_info() -> dict | None:
    """TensorFlow's build info as its installed files say it, without importing TensorFlow (seconds) or any of its
    modules: the literal in tensorflow/python/platform/build_info.py, read as text. None: TensorFlow is not
    installed, or the file is missing or not the literal every release since 2.3 writes."""
    try:  # the path finder alone: found on sys.path, nothing imported, no import hook told of an import
        spec = importlib.machinery.PathFinder.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or ()) if spec else ():
        path = os.path.join(folder, "python", "platform", "build_info.py")
        try:
            with open(path, encoding="utf-8") as file:
                tree = ast.parse(file.read(), path)
        except (OSError, SyntaxError, ValueError):
            continue
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "build_info" for t in node.targets):
                return _literal_pairs(node.value)
    return None


def _literal_pairs(node: ast.expr) -> dict | None:
    """``collections.OrderedDict([(key, value), ...])`` or a dict literal, as a dict; None for anything else."""
    if isinstance(node, ast.Call) and len(node.args) == 1:
        node = node.args[0]
    try:
        value = ast.literal_eval(node)
        return dict(value)
    except (ValueError, TypeError, SyntaxError):
        return None


def installed_cpu_only() -> bool | None:
    """Whether the installed TensorFlow is a CPU-only build (it will list no GPU), told without importing it; None:
    not known (not installed, or its build info unreadable)."""
    info = installed_build_info()
    if info is None or "is_cuda_build" not in info:
        return None
    return info.get("is_cuda_build") is False and not info.get("is_rocm_build")


def cpu_only_words() -> str:
    """What a CPU-only build means for the user, and the commands that change it: "tensorflow-cpu 2.21.0 is a
    CPU-only build; for GPUs: pip uninstall -y tensorflow-cpu, then pip install 'tensorflow[and-cuda]', then restart
    the kernel"."""
    which = distribution() or _("this TensorFlow")
    # "then restart the kernel" as render/shell_words.py finds it, in either language.
    return _("{which} is a CPU-only build; for GPUs: {fix}, then restart the kernel").format(which=which,
                                                                                            fix=fix_build())


def _gpus(count: int) -> str:
    return ngettext("{count} GPU", "{count} GPUs", count).format(count=count)


def will_list_none(gpus_listed: int) -> str:
    """The sentence before the import for a CPU-only build beside ``gpus_listed`` GPUs NVML lists: it will name none."""
    return _("TensorFlow will list none of the {gpus} NVML lists: {why}").format(gpus=_gpus(gpus_listed),
                                                                                 why=cpu_only_words())


def _hides_all(value: str) -> bool:
    """CUDA_VISIBLE_DEVICES values that leave CUDA no device: "", "-1", or any first entry CUDA stops at ("²", "x"),
    read as numbering.read_entries reads it (as CUDA does)."""
    return not read_entries(value).read


def reason(tf: Any, environ: Mapping[str, str], gpus_listed: int) -> str:
    """The sentence for a TensorFlow that lists no GPU while NVML lists ``gpus_listed``."""
    head = _("TensorFlow sees none of the {gpus} NVML lists").format(gpus=_gpus(gpus_listed))
    info = _build_info(tf)
    if cpu_only(tf):
        return f"{head}: {cpu_only_words()}"
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and _hides_all(visible):
        return _("{head}: CUDA_VISIBLE_DEVICES={value} hides them from CUDA; `%tfgpu visible all` before TensorFlow "
                 "is imported (or restart the kernel without it)").format(head=head, value=repr(printable(visible)))
    cuda = info.get("cuda_version")
    needs = _(" (this TensorFlow is built for CUDA {cuda}; `nvidia-smi` shows the newest CUDA the driver supports)"
              ).format(cuda=cuda) if cuda else ""
    return _("{head}: CUDA did not start in TensorFlow; its log at `import tensorflow` says why (`%tfgpu log` shows "
             "it): often a driver too old for its CUDA{needs}, or CUDA libraries missing ({fix})").format(
                 head=head, needs=needs, fix=FIX_BUILD)
