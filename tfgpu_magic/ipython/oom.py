"""Out of memory, in the notebook: a card under the cell that ran out (core/oom.py's data, render/oom.py's forms),
``%tfgpu oom`` to see it again, and ``%tfgpu free`` to let go of what the last error keeps alive.

The card is a ``post_run_cell`` callback beside the extension's others (magics.py). A cell that succeeds costs one
attribute read; one that fails for another reason costs a dictionary look-up in ``sys.modules`` and a walk over its
exception's classes' names. TensorFlow is never imported here: its ResourceExhaustedError is recognised by name, and
only once TensorFlow has loaded it. IPython's one custom-exception slot (``set_custom_exc``) stays free for others.

Loading this module (``%load_ext`` does) imports nothing of the core.
"""

from __future__ import annotations

import contextlib
import gc
import sys
import traceback
from typing import Any

MIME = "application/vnd.tfgpu.oom+json"
_ERRORS = "tensorflow.python.framework.errors_impl"  # where ResourceExhaustedError lives, once TensorFlow is loaded
NONE_YET = "tfgpu: no out-of-memory error in this kernel yet"


class OomWatch:
    """Shows the card under a cell that ran out of memory, and keeps its data (never the exception) for ``%tfgpu oom``.
    ``magics``: the loaded extension (its controller: the plan, the environment, NVML)."""

    def __init__(self, magics: Any):
        self.magics = magics
        self.last: dict | None = None
        self.failures = 0  # cards that could not be made (each said once on stderr)

    def post_run_cell(self, result: Any = None) -> None:
        error = getattr(result, "error_in_exec", None)
        if error is None or _ERRORS not in sys.modules:
            return
        from ..core.oom import oom_error

        if oom_error(error) is None:
            return
        try:
            data = self.card(error, getattr(result, "execution_count", None))
        except Exception as err:  # never into the user's cell: the traceback above already says what failed
            self.failures += 1
            print(f"tfgpu: the out-of-memory card could not be made: {type(err).__name__}: {err}", file=sys.stderr)
            return
        finally:
            del error
        self.last = data
        show(data)

    def card(self, error: BaseException, execution_count: int | None = None) -> dict:
        from ..core.oom_figures import report

        return report(error, tf=sys.modules.get("tensorflow"), controller=self.magics.controller,
                      execution_count=execution_count)


def bundle(data: dict) -> dict:
    """The display bundle: the JSON for JupyterLab's tfgpu renderer, HTML and text for every other frontend."""
    from ..render.oom import to_html, to_text

    return {MIME: data, "text/html": to_html(data), "text/plain": to_text(data)}


def show(data: dict) -> None:
    from IPython.display import display

    display(bundle(data), raw=True)


def show_last(watch: OomWatch | None) -> None:
    """``%tfgpu oom``: the last card again, or one line when there has been none."""
    if watch is None or watch.last is None:
        print(NONE_YET)
        return
    show(watch.last)


# -- %tfgpu free ------------------------------------------------------------------------------------------------
def drop_last_error(shell: Any) -> dict[str, Any]:
    """Let go of the last exception and everything its traceback keeps alive: ``sys.last_type/last_value/
    last_traceback`` (and ``sys.last_exc``), the frames of every traceback in its chain (their local variables),
    IPython's last result's ``error_in_exec`` and its traceback formatters' ``tb``. Returns what was dropped."""
    from ..core.oom import chain

    errors: list[BaseException] = []
    for name in ("last_value", "last_exc"):
        value = getattr(sys, name, None)
        if isinstance(value, BaseException):
            errors.append(value)
    result = getattr(shell, "last_execution_result", None)
    for attribute in ("error_in_exec", "error_before_exec"):
        value = getattr(result, attribute, None)
        if isinstance(value, BaseException):
            errors.append(value)
            setattr(result, attribute, None)
    tracebacks = [getattr(sys, "last_traceback", None)]
    for holder in (getattr(shell, "InteractiveTB", None), getattr(shell, "SyntaxTB", None),
                   getattr(shell, "CustomTB", None)):
        if getattr(holder, "tb", None) is not None:
            tracebacks.append(holder.tb)
            with contextlib.suppress(AttributeError, TypeError):
                holder.tb = None
    first = errors[0] if errors else None
    seen: set[int] = set()
    for error in errors:
        for current in chain(error):
            if id(current) not in seen:
                seen.add(id(current))
                tracebacks.append(current.__traceback__)
                current.__traceback__ = None
    frames = sum(_clear(tb) for tb in tracebacks)
    for name in ("last_type", "last_value", "last_traceback", "last_exc"):
        if hasattr(sys, name):
            with contextlib.suppress(AttributeError):
                delattr(sys, name)
    return {"error": type(first).__name__ if first is not None else None, "exceptions": len(seen), "frames": frames}


def _clear(tb: Any) -> int:
    """Clear every frame of a traceback (``traceback.clear_frames``: their locals go; a frame still running is left as
    it is). Returns how many frames it had."""
    frames, walk = 0, tb
    while walk is not None:
        frames += 1
        walk = walk.tb_next
    if tb is not None:
        traceback.clear_frames(tb)
    return frames


def figures(controller: Any) -> dict[str, int | None]:
    """What this kernel holds now: TensorFlow's bytes in use per logical device (once its runtime runs), this process's
    resident host memory, and NVML's figure for this process on each GPU it is listed on."""
    from ..core.oom import short_device
    from ..core.runtime import TFState, probe

    found: dict[str, int | None] = {}
    tf = sys.modules.get("tensorflow")
    if tf is not None and probe().state >= TFState.INITIALIZED:
        devices = [d for d in tf.config.list_logical_devices() if d.device_type in ("CPU", "GPU")]
        cpus = [short_device(d.name) or d.name for d in devices if d.device_type == "CPU"]
        for device in devices:
            name = short_device(device.name) or device.name
            if device.device_type == "CPU" and len(cpus) > 1:
                if name != cpus[0]:
                    continue  # the logical CPUs share one allocator: one row for them all (TF_FACTS)
                name = f"{cpus[0]}..{cpus[-1]}"
            try:
                current = tf.config.experimental.get_memory_info(name).get("current")
            except Exception:  # CPU without TF_CPU_ALLOCATOR_USE_BFC: no allocator figures
                current = None
            found[f"{name}: TensorFlow's allocator, in use"] = current
    found["host: this process's resident memory"] = _resident()
    snap = controller.nvml() if controller is not None else None
    for gpu in getattr(snap, "gpus", ()) if getattr(snap, "available", False) else ():
        processes = gpu.processes if isinstance(gpu.processes, tuple) else ()
        mine = [p for p in processes if p.is_self]
        if mine:
            used = [p.used_bytes for p in mine]
            found[f"GPU {gpu.index}: this process, as NVML counts it"] = None if None in used else sum(used)
    return found


def _resident() -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def free(shell: Any, controller: Any, keras: bool = False) -> dict[str, Any]:
    """``%tfgpu free [--keras]``: drop the last error's references, collect, optionally clear Keras' session; print the
    figures before and after and what stays reserved. Returns what it did and the figures (for tests and the API).
    The card's watch holds nothing to drop: it keeps the card's data, never the exception or its traceback."""
    from ..core.oom import size_text
    from ..render.text import fit, text_table

    before = figures(controller)
    dropped = drop_last_error(shell)
    keras_said = ""
    if keras:
        module = sys.modules.get("keras") or getattr(sys.modules.get("tensorflow"), "keras", None)
        if module is None:
            keras_said = "Keras is not loaded: no session to clear"
        else:
            module.backend.clear_session()
            keras_said = "Keras' session cleared (its models and layers are gone unless a variable holds them)"
    collected = gc.collect()
    after = figures(controller)
    head = (f"tfgpu: free: dropped the last error ({dropped['error']}) and cleared {dropped['frames']} frame(s) of its "
            "traceback; IPython's references to it are gone" if dropped["error"] else
            "tfgpu: free: no error was kept")
    lines = fit(f"{head}; the garbage collector freed {collected:,} object(s)" + (f"; {keras_said}" if keras_said
                                                                                  else ""), indent="  ")
    rows = [(name, size_text(b) if isinstance(b, int) else "n/a",
             size_text(after.get(name)) if isinstance(after.get(name), int) else "n/a") for name, b in before.items()]
    lines += text_table(("figure", "before", "after"), rows, right=(1, 2))
    gpu_rows = [name for name in after if name.startswith("GPU ") and isinstance(after[name], int) and after[name]]
    if gpu_rows:
        lines += fit("The GPU memory above stays reserved by TensorFlow's allocator: BFC keeps what it took from the "
                     "GPU for this process and reuses it for this kernel's next tensors, so NVML's figure (and "
                     "nvidia-smi's) does not fall. Only a restart returns it to the GPU; `%tfgpu growth on` or `%tfgpu "
                     "limit 60%` as the first cell keeps the reservation small.", first="  ", indent="  ")
    elif any(name.endswith("in use") for name in after):
        lines += fit("Memory TensorFlow frees goes back to its allocator, which keeps it for this kernel's next "
                     "tensors; only a restart returns all of it.", first="  ", indent="  ")
    print("\n".join(lines))
    return {"dropped": dropped, "collected": collected, "before": before, "after": after}


__all__ = ["MIME", "NONE_YET", "OomWatch", "bundle", "drop_last_error", "figures", "free", "show", "show_last"]
