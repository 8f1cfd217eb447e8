"""The kernel's settings: what was asked, what took effect, and the one path every face goes through.

A change is validated whole before anything moves: the plan, the environment variables and
TensorFlow's configuration change together or not at all.
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, replace

from . import TfgpuWarning
from . import nvml as nvml_module
from .numbering import cuda_order
from .plan import ALL, Plan, PlanError, VisibleSpec, format_mib, has_percent
from .runtime import (
    Adapter,
    Outcome,
    Probe,
    Status,
    TFState,
    add_import_hook,
    asked_settings,
    probe,
    remove_import_hook,
)

ENV_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")


class RefusedError(PlanError):
    """The runtime is initialized and the setting would change: nothing was changed."""


@dataclass(frozen=True)
class Change:
    """One requested change, as the faces describe it."""

    setting: str  # visible | growth | limit | virtual | cpus
    value: object  # VisibleSpec, bool, size, sizes tuple, int, or None for off
    gpu: int | str = ALL
    command: str = ""  # how the user would type it, for messages: "%tfgpu growth on"


class Controller:
    """Holds the plan of one Python process (one kernel) and applies it to TensorFlow."""

    def __init__(self, environ: MutableMapping[str, str] | None = None,
                 nvml_snapshot: Callable[[], nvml_module.NvmlSnapshot] | None = None,
                 tensorflow: Callable[[], object] | None = None, prober: Callable[[], Probe] | None = None):
        # The last three are seams for tests of the GPU paths on machines without a GPU: an
        # in-memory NVML and a recording stand-in for TensorFlow in a chosen state.
        self.environ = os.environ if environ is None else environ
        self._nvml_snapshot = nvml_snapshot
        self._tensorflow = tensorflow or (lambda: sys.modules["tensorflow"])
        self.probe = prober or probe
        self.plan = Plan()
        self.outcomes: dict[str, Outcome] = {}
        self._saved_env: dict[str, str | None] = {}
        self._hooked = False

    # -- inputs ----------------------------------------------------------------------------------
    def nvml(self) -> nvml_module.NvmlSnapshot:
        return (self._nvml_snapshot or nvml_module.snapshot)()

    def adapter(self, tf, state: TFState, snap: nvml_module.NvmlSnapshot | None = None) -> Adapter:
        snap = snap if snap is not None else self.nvml()
        return Adapter(tf, state, cuda_order(self.environ, snap), snap.memory_totals_mib())

    # -- the one way in --------------------------------------------------------------------------
    def change(self, change: Change) -> Outcome:
        """Validate and apply one change. Raises PlanError (bad input) or RefusedError (too late);
        in both cases nothing changed."""
        state = self.probe().state
        snap = self.nvml() if _needs_inventory(change) else None
        value = change.value
        if change.setting == "visible" and isinstance(value, VisibleSpec) and value.auto is not None:
            value = self._pick_auto(value, snap)
        if snap is not None:
            self._check_indices(change, value, snap)
        new_plan = self._planned(change.setting, value, change.gpu)
        env = self._visible_env(new_plan.visible) if change.setting == "visible" else {}
        if state < TFState.IMPORTED:
            self._commit(new_plan, env)
            outcome = Outcome(change.setting, Status.PENDING, "applied when TensorFlow is imported")
            self.outcomes[change.setting] = outcome
            return outcome
        if env and state >= TFState.ENUMERATED:
            env = {}  # CUDA has read its variables already; tf.config.set_visible_devices does the work
        tf = self._tensorflow()
        if env:
            old_env = self._apply_env(env)
        outcome = self.adapter(tf, state, snap).apply(change.setting, new_plan)
        if outcome.status in (Status.REFUSED, Status.FAILED, Status.NO_DEVICE):
            if env:
                self.restore_env(old_env)
            raise self._error(change, outcome)
        self._commit(new_plan, {})
        self.outcomes[change.setting] = outcome
        return outcome

    def _planned(self, setting: str, value, gpu) -> Plan:
        plan = self.plan
        if setting == "visible":
            return plan.with_visible(value)
        if setting == "growth":
            return plan.with_growth(value)
        if setting == "limit":
            return plan.with_limit(gpu, value)
        if setting == "virtual":
            return plan.with_virtual(gpu, value)
        if setting == "cpus":
            return plan.with_cpus(value)
        raise ValueError(f"unknown setting {setting!r}")  # a bug in a face, not a user mistake

    def _error(self, change: Change, outcome: Outcome) -> PlanError:
        command = change.command or f"%tfgpu {change.setting} ..."
        if outcome.status is Status.REFUSED:
            return RefusedError(
                f"`{command}` is too late: TensorFlow's runtime is already initialized and {change.setting} "
                f"can no longer change (it would need {outcome.calls[0]}); restart the kernel and run "
                f"`{command}` before the first TensorFlow operation")
        if outcome.status is Status.NO_DEVICE:
            return PlanError(f"{outcome.detail}; pick a GPU TensorFlow can see (`%tfgpu devices` lists them)")
        return PlanError(f"TensorFlow refused `{command}`: {outcome.detail}")

    # -- GPUs: inventory, auto, percentages ------------------------------------------------------
    @staticmethod
    def _gpu_list(snap: nvml_module.NvmlSnapshot) -> str:
        names = [f"{g.index} ({g.name})" for g in snap.gpus]
        return ", ".join(names) if names else "none"

    def _check_indices(self, change: Change, value, snap: nvml_module.NvmlSnapshot) -> None:
        if not snap.available:
            if has_percent(value):
                raise PlanError(
                    f"`{change.command}` needs the GPU's total memory to turn a percentage into MiB, and NVML cannot "
                    f"tell it ({_why(snap.error)}); give an absolute size such as 4GB")
            return
        known = {g.index for g in snap.gpus}
        wanted = list(value.indices) if isinstance(value, VisibleSpec) else []
        if change.gpu != ALL:
            wanted.append(change.gpu)
        for index in wanted:
            if index not in known:
                raise PlanError(f"GPU {index} does not exist: this machine's GPUs are {self._gpu_list(snap)} "
                                "(physical indices, as nvidia-smi numbers them)")
        if has_percent(value):
            targets = [change.gpu] if change.gpu != ALL else sorted(known)
            for index in targets:
                total = snap.gpu(index).memory_total_mib if snap.gpu(index) else None
                if not isinstance(total, int):
                    raise PlanError(f"`{change.command}` needs GPU {index}'s total memory, which NVML does not report "
                                    f"({total}); give an absolute size such as 4GB")

    def _pick_auto(self, spec: VisibleSpec, snap: nvml_module.NvmlSnapshot | None) -> VisibleSpec:
        if snap is None or not snap.available:
            why = _why(snap.error if snap else None)
            raise PlanError(f"visible {spec} needs NVML to see free memory, and it is unavailable ({why}); "
                            "name the GPUs instead, like `%tfgpu visible 0`")
        free = [(g.memory_free_mib, g.index) for g in snap.gpus if isinstance(g.memory_free_mib, int)]
        if spec.min_free_mib is not None:
            free = [(f, i) for f, i in free if f >= spec.min_free_mib]
        free.sort(key=lambda fi: (-fi[0], fi[1]))
        if len(free) < spec.auto:
            floor = f" with at least {format_mib(spec.min_free_mib)} free" if spec.min_free_mib else ""
            have = ", ".join(f"{i} ({format_mib(f)} free)" for f, i in free) or "none"
            raise PlanError(f"visible {spec} needs {spec.auto} GPU(s){floor}, and only these qualify: {have}; "
                            "ask for fewer, lower --min-free, or name GPUs")
        return VisibleSpec(indices=tuple(sorted(i for _, i in free[: spec.auto])))

    # -- environment -----------------------------------------------------------------------------
    def _visible_env(self, spec: VisibleSpec) -> dict[str, str | None]:
        order = self.environ.get("CUDA_DEVICE_ORDER")
        if order not in (None, "PCI_BUS_ID") and "CUDA_DEVICE_ORDER" not in self._saved_env:
            warnings.warn(f"tfgpu: CUDA_DEVICE_ORDER={order} numbers GPUs differently from nvidia-smi; "
                          "setting it to PCI_BUS_ID so the indices you give are nvidia-smi's", TfgpuWarning,
                          stacklevel=4)
        visible = None if spec.every else ",".join(map(str, spec.indices))
        return {"CUDA_VISIBLE_DEVICES": visible, "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}

    def _apply_env(self, env: dict[str, str | None]) -> dict[str, str | None]:
        old = {}
        for name, value in env.items():
            old[name] = self.environ.get(name)
            self._saved_env.setdefault(name, old[name])
            if value is None:
                self.environ.pop(name, None)
            else:
                self.environ[name] = value
        return old

    def restore_env(self, old: dict[str, str | None]) -> None:
        for name, value in old.items():
            if value is None:
                self.environ.pop(name, None)
            else:
                self.environ[name] = value

    def _commit(self, plan: Plan, env: dict[str, str | None]) -> None:
        if env:
            self._apply_env(env)
        self.plan = plan
        if not plan.is_empty() and self.probe().state < TFState.IMPORTED and not self._hooked:
            add_import_hook(self._on_import)
            self._hooked = True

    # -- at import ---------------------------------------------------------------------------------
    def _on_import(self, tf) -> None:
        self._hooked = False
        plan = self.plan
        if plan.is_empty():
            return
        adapter = self.adapter(tf, self.probe().state)
        for setting in asked_settings(plan):
            outcome = adapter.apply(setting, plan)
            self.outcomes[setting] = outcome
            if outcome.status in (Status.FAILED, Status.NO_DEVICE, Status.REFUSED):
                warnings.warn(f"tfgpu: {setting} did not take effect at TensorFlow import: {outcome.detail}",
                              TfgpuWarning, stacklevel=2)

    # -- reset -------------------------------------------------------------------------------------
    def reset(self) -> list[str]:
        """Drop the settings that have not taken effect; returns their names."""
        state = self.probe().state
        if state < TFState.IMPORTED:
            dropped = [name for name, _ in self.plan.describe()]
            self.plan = Plan()
            self.outcomes.clear()
            self.restore_env(self._saved_env)
            self._saved_env.clear()
            self.unhook()
            return dropped
        keep = {Status.APPLIED, Status.UNCHANGED}
        dropped = [s for s, o in self.outcomes.items() if o.status not in keep]
        plan = self.plan
        for setting in dropped:
            name = _PLAN_FIELDS[setting]
            plan = replace(plan, **{name: getattr(Plan(), name)})
            del self.outcomes[setting]
        self.plan = plan
        return dropped

    def unhook(self) -> None:
        if self._hooked:
            remove_import_hook(self._on_import)
            self._hooked = False

    # -- views -------------------------------------------------------------------------------------
    def settings(self) -> list[dict]:
        """One row per asked setting: what was asked and what happened to it."""
        rows = []
        for name, asked in self.plan.describe():
            key = name.split("[")[0]
            outcome = self.outcomes.get(key)
            rows.append({"setting": name, "asked": asked,
                         "status": outcome.status.name.lower() if outcome else "pending",
                         "detail": outcome.detail if outcome else ""})
        return rows


def _why(error) -> str:
    if error is None:
        return "NVML was not asked"
    return getattr(error, "detail", "") or getattr(error, "reason", str(error))


# The Plan field behind each setting, for dropping one back to its default.
_PLAN_FIELDS = {"visible": "visible", "growth": "growth", "cpus": "cpus", "limit": "limits", "virtual": "virtual"}


def _needs_inventory(change: Change) -> bool:
    return change.setting == "visible" or change.gpu != ALL or has_percent(change.value)


_default: Controller | None = None


def default_controller() -> Controller:
    """The process-wide controller: one kernel, one TensorFlow, one plan."""
    global _default
    if _default is None:
        _default = Controller()
    return _default
