"""The kernel's settings: what was asked, what took effect, and the one path every face goes through.

A change is validated whole before anything moves: the plan, the environment variables and
TensorFlow's configuration change together or not at all. A change refused because TensorFlow's runtime
has started is remembered (``refused``) and told to the listeners (the live model, the sidebar's channel),
whichever face asked: the magic, ``configure()``, a panel control or a notebook's saved settings.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, replace

from . import nvml as nvml_module
from .assignment import Assignment, Given, start_environment
from .changes import Change
from .importguard import importing_tensorflow_elsewhere
from .inputs import printable
from .numbering import cuda_order
from .plan import ALL, Percent, Plan, PlanError, VisibleSpec, format_mib, has_percent
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
from .waiting import Claims, gpu_key, live_claims, wait_until
from .warn import warn

CPU_FIGURES_VAR = "TF_CPU_ALLOCATOR_USE_BFC"
ENV_VARS = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER", CPU_FIGURES_VAR)
IMPORT_WAIT_S = 300.0  # how long a change waits for another thread's `import tensorflow` to finish


class RefusedError(PlanError):
    """The runtime is initialized and the setting would change: nothing was changed."""


@dataclass(frozen=True)
class Refusal:
    """A setting refused as too late: what a restart of the kernel would apply."""

    setting: str
    asked: str  # the argument text, as saved in a notebook: "2GB --gpu 1"
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"setting": self.setting, "asked": self.asked, "message": self.message}


class Controller:
    """Holds the plan of one Python process (one kernel) and applies it to TensorFlow."""

    def __init__(self, environ: MutableMapping[str, str] | None = None,
                 nvml_snapshot: Callable[[], nvml_module.NvmlSnapshot] | None = None,
                 tensorflow: Callable[[], object] | None = None, prober: Callable[[], Probe] | None = None,
                 hooks_import: bool = True, assignment: Assignment | None = None):
        # The last three are seams for tests of the GPU paths on machines without a GPU: an
        # in-memory NVML and a recording stand-in for TensorFlow in a chosen state. hooks_import=False: a
        # controller that never applies anything at `import tensorflow` (a rehearsal, core/saved.py).
        self.hooks_import = hooks_import
        self.environ = os.environ if environ is None else environ
        # The GPUs a scheduler gave this kernel: CUDA_VISIBLE_DEVICES as the process started with it (assignment.py).
        self.assignment = assignment or Assignment.from_environ(start_environment() if environ is None else environ)
        self._nvml_snapshot = nvml_snapshot
        self._tensorflow = tensorflow or (lambda: sys.modules["tensorflow"])
        self.probe = prober or probe
        self.plan = Plan()
        self.outcomes: dict[str, Outcome] = {}
        self._saved_env: dict[str, str | None] = {}
        self._hooked = False
        # One plan, changed from the magics, the API, a panel or the import hook, maybe in different threads.
        self._lock = threading.RLock()
        # Told what became of the pending settings when TensorFlow is imported (the magics print it).
        self.on_import_report: Callable[[str], None] | None = None
        # setting -> its last refusal as too late, until a later change of it is accepted.
        self.refused: dict[str, Refusal] = {}
        self._listeners: list[Callable[[], None]] = []
        # GPUs this kernel chose by free memory and holds until it allocates there (waiting.py); None: no claims.
        self.claims: Claims | None = Claims() if hooks_import else None
        # Told a line now and then while `visible ... --wait` waits (the magics show it in place).
        self.on_progress: Callable[[str], None] | None = None
        self._picked_note = ""  # _pick_auto's word on a choice outside its rule, for change() to add

    # -- listeners -------------------------------------------------------------------------------
    def listen(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` whenever ``refused`` changes, in the thread that made the change."""
        if callback not in self._listeners:
            self._listeners.append(callback)

    def unlisten(self, callback: Callable[[], None]) -> None:
        if callback in self._listeners:
            self._listeners.remove(callback)

    def _tell_listeners(self) -> None:
        for callback in list(self._listeners):  # a listener may add another (a view made on the first call)
            try:
                callback()
            except Exception as err:  # a view's fault must not turn into the user's refusal
                warn(f"tfgpu: a view failed to take a refused setting: {type(err).__name__}: {err}")

    # -- inputs ----------------------------------------------------------------------------------
    def nvml(self) -> nvml_module.NvmlSnapshot:
        return (self._nvml_snapshot or nvml_module.snapshot)()

    def given(self, snap: nvml_module.NvmlSnapshot | None) -> Given:
        """The inherited assignment matched to this snapshot's GPUs."""
        return self.assignment.resolve(snap)

    def adapter(self, tf, state: TFState, snap: nvml_module.NvmlSnapshot | None = None) -> Adapter:
        snap = snap if snap is not None else self.nvml()
        return Adapter(tf, state, cuda_order(self.environ, snap), snap.memory_totals_mib(), self.environ)

    # -- the one way in --------------------------------------------------------------------------
    def change(self, change: Change) -> Outcome:
        """Validate and apply one change. Raises PlanError (bad input) or RefusedError (too late);
        in both cases nothing changed."""
        self._wait_for_import()
        claimed: tuple[str, ...] = ()
        auto = change.setting == "visible" and isinstance(change.value, VisibleSpec) and change.value.auto is not None
        chooses = self._chooses(change)
        chose_note = ""  # how auto chose, when not by its rule (none qualified: the freest)
        if chooses:
            change, claimed, chose_note = self._choose(change)  # may wait: outside the lock
        self.read_back()  # a split the notebook made itself is the record a change starts from
        before = self.outcomes.get(change.setting)
        try:
            with self._lock:
                self._picked_note = ""
                outcome = self._change(change)
                chose_note = chose_note or self._picked_note
        except RefusedError as err:
            self._release(claimed)
            with self._lock:  # the sidebar's requests read it from another thread (a kernel subshell)
                self.refused[change.setting] = Refusal(change.setting, change.asked, str(err))
            self._tell_listeners()
            raise
        except BaseException:
            self._release(claimed)
            raise
        if change.setting == "visible" and self.claims is not None:  # the new choice replaces an older one
            self._release(tuple(k for k in self.claims.held() if k not in claimed))
        with self._lock:
            was_refused = self.refused.pop(change.setting, None) is not None
            if before is not None and before.status is Status.NOTEBOOK and outcome.status is Status.APPLIED:
                outcome = self.outcomes[change.setting] = replace(outcome, detail=_joined(
                    outcome.detail, f"replacing the notebook's own {before.detail.partition(':')[0]}"))
            if auto and self.plan.visible is not None:  # which GPU it took is the point of asking for auto
                chose = _joined(f"auto chose {_chosen_words(self.plan.visible)}", chose_note)
                outcome = self.outcomes[change.setting] = replace(outcome, detail=_joined(chose, outcome.detail))
            off = self.claims.why_off(claimed) if chooses and self.claims is not None else None
            if off:  # chosen all the same: say that another kernel may choose the same GPU meanwhile
                outcome = self.outcomes[change.setting] = replace(outcome, detail=_joined(
                    outcome.detail, f"GPU claims are off: {off}; two kernels choosing at once may take the same GPU"))
        if was_refused:  # asked again and accepted: nothing to restart for
            self._tell_listeners()
        return outcome

    def _change(self, change: Change) -> Outcome:
        state = self.probe().state
        snap = self.nvml() if _needs_inventory(change) else None
        value = change.value
        given = self.given(snap) if snap is not None else Given()
        if change.setting == "visible" and isinstance(value, VisibleSpec) and value.auto is not None:
            value = self._pick_auto(value, snap, given)
        if change.setting == "visible" and isinstance(value, VisibleSpec) and value.mig:
            value = self._resolve_mig(change, value, snap, given)
        self._check_environment(change, value)
        self._check_given(change, value, given)
        unchecked = self._check_inventory(change, value, snap, self.plan) if snap is not None else ""
        new_plan = self._planned(change.setting, value, change.gpu)
        note = "; ".join(n for n in (unchecked, self._environment_note(change.setting, value)) if n)
        env = self._visible_env(new_plan.visible, given, snap) if change.setting == "visible" else {}
        if change.setting == "cpumem":
            # Read when the runtime starts: after that, the variable would only mislead.
            env = {CPU_FIGURES_VAR: "true" if value else None} if state < TFState.INITIALIZED else {}
        if state is TFState.NOT_INSTALLED and change.setting == "visible":
            # A PyTorch, JAX or CuPy kernel: the variable is the whole setting, read when CUDA first starts here.
            self._commit(new_plan, env)
            value_text = env.get("CUDA_VISIBLE_DEVICES")
            outcome = Outcome("visible", Status.APPLIED, _joined(
                f"CUDA_VISIBLE_DEVICES={value_text if value_text is not None else '(unset: all)'}; read when a "
                "framework (PyTorch, JAX, CuPy) first starts CUDA in this kernel", note))
            self.outcomes["visible"] = outcome
            return outcome
        if state < TFState.IMPORTED:
            self._commit(new_plan, env)
            waits = "applied when TensorFlow is imported" + (
                " (it is not installed)" if state is TFState.NOT_INSTALLED else "")
            outcome = Outcome(change.setting, Status.PENDING, _joined(waits, note))
            self.outcomes[change.setting] = outcome
            return outcome
        read_by_cuda = self.environ.get("CUDA_VISIBLE_DEVICES")
        moved = change.setting == "visible" and "CUDA_VISIBLE_DEVICES" in env and env["CUDA_VISIBLE_DEVICES"] != \
            read_by_cuda
        if change.setting == "visible" and env and state >= TFState.ENUMERATED:
            env = {}  # CUDA has read its variables already; tf.config.set_visible_devices does the work
        tf = self._tensorflow()
        env_changes = {k: v for k, v in env.items() if self.environ.get(k) != v}
        old_env = self._apply_env(env_changes)
        outcome = self.adapter(tf, state, snap).apply(change.setting, new_plan)
        if outcome.status is Status.NO_GPU and moved and state >= TFState.ENUMERATED:
            # A CPU-only build: no GPU to narrow, and the variable was read when TensorFlow listed its devices.
            # Recorded, it would show a visible set this process does not have: too late, as on any build.
            command = change.command or f"%tfgpu visible {value}"
            shown_var = f"CUDA_VISIBLE_DEVICES={read_by_cuda}" if read_by_cuda is not None else \
                "CUDA_VISIBLE_DEVICES unset (every GPU)"
            self.restore_env(old_env)
            raise RefusedError(f"`{command}` is too late: TensorFlow has listed its devices, and {shown_var} was "
                               f"read then, once; restart the kernel and run `{command}` before TensorFlow lists "
                               "its devices")
        if outcome.status in (Status.REFUSED, Status.FAILED, Status.NO_DEVICE):
            self.restore_env(old_env)
            raise self._error(change, outcome)
        if env and change.setting == "visible":  # before enumeration the variables are the whole setting: say which
            value_text = env["CUDA_VISIBLE_DEVICES"] if env["CUDA_VISIBLE_DEVICES"] is not None else "(unset: all)"
            outcome = replace(outcome, status=Status.APPLIED if env_changes else Status.UNCHANGED,
                              detail=f"CUDA_VISIBLE_DEVICES={value_text}; CUDA reads it when TensorFlow first "
                                     "lists its devices")
        if note:
            outcome = replace(outcome, detail=_joined(outcome.detail, note))
        self._commit(new_plan, {})
        self.outcomes[change.setting] = outcome
        return outcome

    def change_all(self, changes: list[Change]) -> tuple[Outcome, ...]:
        """Several changes as one: before TensorFlow is imported they touch only the plan and the environment,
        so a bad one puts both back and none is kept (after import, TensorFlow took the earlier ones already:
        the PlanError raised then carries them as ``applied``, their Changes and Outcomes). Raises the first
        PlanError. (Not under the lock: a change may wait for an import in another thread, whose hook takes
        the lock.)"""
        saved_plan, saved_outcomes = self.plan, dict(self.outcomes)
        saved_env = {name: self.environ.get(name) for name in ENV_VARS}
        outcomes = []
        try:
            for change in changes:
                outcomes.append(self.change(change))
        except PlanError as err:
            if self.probe().state < TFState.IMPORTED:
                with self._lock:
                    self.plan, self.outcomes = saved_plan, saved_outcomes
                    self.restore_env(saved_env)
                if saved_plan.is_empty():
                    self.unhook()
            else:
                err.applied = tuple(zip(changes, outcomes, strict=False))  # those before the refused one
            raise
        return tuple(outcomes)

    # -- choosing GPUs by free memory, maybe waiting -----------------------------------------------------
    def _chooses(self, change: Change) -> bool:
        value = change.value
        return (self.claims is not None and change.setting == "visible" and isinstance(value, VisibleSpec)
                and value.chooses and self.probe().state < TFState.INITIALIZED)

    def _release(self, keys: tuple[str, ...]) -> None:
        if self.claims is not None and keys:
            self.claims.release(keys)

    def _choose(self, change: Change) -> tuple[Change, tuple[str, ...], str]:
        """``visible auto[:N]`` or ``visible I --min-free SIZE``, with ``--wait`` or not: the GPUs that qualify
        now (or, waiting, as soon as they do), claimed so another kernel choosing at the same time takes others.
        ``auto`` takes devices that qualify by AUTO_RULE (``--min-free`` replaces its memory half); plain
        ``auto`` without ``--wait``, none qualifying, takes the freest and says so. ``auto`` weighs MIG devices as
        devices of their own and never a parent in MIG mode; a CUDA process uses one MIG device, so only ``auto``
        (one device) may end on one. Returns the change with the devices named, the claims taken for it, and
        the note on a choice outside the rule ("" when it kept to it)."""
        spec: VisibleSpec = change.value  # type: ignore[assignment]
        want = spec.auto if spec.auto is not None else len(spec.indices)
        claims = self.claims
        assert claims is not None
        state: dict = {}

        def pick() -> tuple[VisibleSpec | None, str]:
            snap = self.nvml()
            if not snap.available or snap.error is not None:  # auto, or indices with --min-free
                raise _needs_nvml(f"`{change.command}`", snap.error)
            given = self.given(snap)
            if given.error is not None:
                raise PlanError(f"`{change.command}` refused: {given.error}")
            self._check_given(change, VisibleSpec(indices=spec.indices), given)
            _check_reachable(change, spec, snap, given)
            taken = live_claims(claims, snap)
            units = _candidates(snap, given, spec.indices, mig=spec.auto == 1)
            for unit in units:
                if isinstance(unit.ident, int) and snap.gpu(unit.ident) is None:
                    raise PlanError(f"GPU {unit.ident} does not exist: this machine's GPUs are "
                                    f"{self._gpu_list(snap)} (physical indices, as nvidia-smi numbers them)")
            line = _waiting_line(want, spec, units, taken)
            chosen, note = _select(units, want, spec, taken)
            if chosen is None:
                return None, line
            keys = tuple(u.key for u in chosen)
            got = [k for k in keys if claims.claim(k)]
            if len(got) < len(keys):  # another kernel was quicker: give back what we took, wait on
                claims.release(got)
                return None, line
            state["keys"], state["note"] = keys, note
            if isinstance(chosen[0].ident, str):
                return VisibleSpec(mig=(chosen[0].ident,)), line
            return VisibleSpec(indices=tuple(sorted(u.ident for u in chosen))), line  # type: ignore[type-var]

        if spec.wait_s is None:
            result, line = pick()
            if result is None:
                target, _, have = line.removeprefix("waiting for ").partition(": ")
                raise PlanError(f"`{change.command}` needs {target}, and not enough qualify now ({have or 'no GPU'}); "
                                "ask for fewer, lower --min-free, name GPUs, or wait with --wait 10m")
        else:
            result = wait_until(pick, spec.wait_s, f"`{change.command}`", self.on_progress)
        return replace(change, value=result), tuple(state.get("keys", ())), state.get("note", "")

    def _wait_for_import(self) -> None:
        """Another thread is running `import tensorflow`: the module is half made, so wait for it
        (its import hook then applies whatever was pending) instead of touching it."""
        deadline = time.monotonic() + IMPORT_WAIT_S
        while self.probe().state is TFState.IMPORTING and importing_tensorflow_elsewhere():
            if time.monotonic() > deadline:
                raise PlanError(f"TensorFlow's import in another thread has not finished after {IMPORT_WAIT_S:.0f} s; "
                                "try again once `import tensorflow` has returned")
            time.sleep(0.01)

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
        if setting == "cpumem":
            return plan.with_cpumem(value)
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
        names = [f"{g.index} ({printable(g.name)})" for g in snap.gpus]  # a message may reach a terminal
        return ", ".join(names) if names else "none"

    def _check_inventory(self, change: Change, value, snap: nvml_module.NvmlSnapshot, plan: Plan) -> str:
        """Refuse GPU indices that do not exist and sizes larger than the GPU they apply to. Where NVML
        cannot list the GPUs the indices are taken as given; the returned note says so."""
        if not snap.available or snap.error is not None:
            if has_percent(value):
                raise PlanError(
                    f"`{change.command}` needs the GPU's total memory to turn a percentage into MiB, and NVML cannot "
                    f"tell it ({_why(snap.error)}); give an absolute size such as 4GB")
            named = list(value.indices) if isinstance(value, VisibleSpec) else []
            named += [change.gpu] if change.gpu != ALL else []
            if not named:
                return ""
            return f"GPU {', '.join(map(str, named))} not checked: {_why(snap.error)}"
        known = {g.index for g in snap.gpus}
        wanted = list(value.indices) if isinstance(value, VisibleSpec) else []
        if change.gpu != ALL:
            wanted.append(change.gpu)
        for index in wanted:
            if index not in known:
                raise PlanError(f"GPU {index} does not exist: this machine's GPUs are {self._gpu_list(snap)} "
                                "(physical indices, as nvidia-smi numbers them)")
        if change.setting not in ("limit", "virtual") or value is None:
            return ""
        sizes = value if isinstance(value, tuple) else (value,)
        if change.gpu != ALL:
            targets = [change.gpu]
        elif plan.visible is not None and not plan.visible.every:
            targets = list(plan.visible.indices)
        else:
            targets = sorted(known)
        for index in targets:
            gpu = snap.gpu(index)
            total = gpu.memory_total_mib if gpu is not None else None
            if not isinstance(total, int):
                if has_percent(value):
                    raise PlanError(f"`{change.command}` needs GPU {index}'s total memory, which NVML does not report "
                                    f"({total}); give an absolute size such as 4GB")
                continue
            asked = sum(s for s in sizes if not isinstance(s, Percent))
            share = sum(s.value for s in sizes if isinstance(s, Percent))
            if asked + total * share / 100 > total:
                which = "" if change.gpu != ALL else " (it applies to every visible GPU; give --gpu for the others)"
                raise PlanError(f"`{change.command}` asks {format_mib(asked)} of GPU {index} ({printable(gpu.name)}), "
                                f"which has {format_mib(total)} in all{which}; give at most {format_mib(total)}, or a "
                                "percentage such as 90%")
        return ""

    # -- TensorFlow's own environment switches -----------------------------------------------------
    def _check_environment(self, change: Change, value) -> None:
        """TF_FORCE_GPU_ALLOW_GROWTH=true|false overrides tf.config's memory growth when TensorFlow builds
        its GPU allocators (gpu_bfc_allocator.cc, GetAllowGrowthValue): a growth setting that says the
        opposite could never take effect."""
        forced = _forced_growth(self.environ)
        if change.setting == "growth" and isinstance(forced, bool) and value is not None and value != forced:
            word = "true" if forced else "false"
            raise PlanError(
                f"`{change.command}` would not take effect: TF_FORCE_GPU_ALLOW_GROWTH={word} in this kernel's "
                f"environment makes TensorFlow {'grow' if forced else 'not grow'} GPU memory whatever tf.config says; "
                "remove it first (`del os.environ['TF_FORCE_GPU_ALLOW_GROWTH']`, before TensorFlow's first "
                "operation) or leave growth as the variable says")

    def _environment_note(self, setting: str, value) -> str:
        forced = _forced_growth(self.environ)
        if setting in ("limit", "virtual") and value is not None and forced is True:
            return ("TF_FORCE_GPU_ALLOW_GROWTH=true: TensorFlow grows memory on demand up to this size instead of "
                    "reserving it at start")
        if setting == "growth" and forced == "ignored":
            return _ignored_growth_note(self.environ)
        return ""

    def _check_given(self, change: Change, value, given: Given) -> None:
        """Refuse GPUs outside the set this kernel was given at start (or any, when that set cannot be matched)."""
        if not given.restricted:
            return
        named = list(value.indices) if change.setting == "visible" and isinstance(value, VisibleSpec) else []
        named += [change.gpu] if change.gpu != ALL else []
        if given.error is not None and (named or change.setting == "visible"):
            raise PlanError(f"`{change.command}` refused: {given.error}")
        for index in named:
            if not given.allows(index):
                raise PlanError(f"`{change.command}` refused: {given.refusal(f'GPU {index}')}")

    def _resolve_mig(self, change: Change, spec: VisibleSpec, snap: nvml_module.NvmlSnapshot | None,
                     given: Given) -> VisibleSpec:
        """A MIG UUID or unique prefix -> the MIG device's full UUID, checked against NVML and the given set."""
        asked = spec.mig[0]
        if snap is None or not snap.available or snap.error is not None:
            raise PlanError(f"`{change.command}` needs NVML to find MIG device {asked}, and it is unavailable "
                            f"({_why(snap.error if snap else None)})")
        found = snap.mig_device(asked)
        if found is None:
            listed = ", ".join(f"{m.uuid} ({m.profile} on GPU {g.index})" for g, m in snap.mig_devices()) or "none"
            several = sum(isinstance(m.uuid, str) and m.uuid.lower().startswith(asked.lower())
                          for _, m in snap.mig_devices()) > 1
            what = "is a prefix of several MIG devices" if several else "matches no MIG device NVML lists"
            raise PlanError(f"`{change.command}` refused: {asked} {what} (MIG devices: {printable(listed)}); give "
                            "more of its UUID, as `%tfgpu devices` shows it")
        parent, mig = found
        if not given.allows_mig(mig.uuid, parent.index):
            raise PlanError(f"`{change.command}` refused: {given.refusal(f'MIG device {mig.uuid}')}")
        return VisibleSpec(mig=(mig.uuid,))

    def _pick_auto(self, spec: VisibleSpec, snap: nvml_module.NvmlSnapshot | None,
                   given: Given | None = None) -> VisibleSpec:
        """``visible auto[:N]`` chosen once, without claims or a wait (a controller without claims, or TensorFlow's
        runtime already started): the same devices and the same rule as _choose (_select)."""
        if snap is None or not snap.available or snap.error is not None:
            raise _needs_nvml(f"`%tfgpu visible {spec}`", snap.error if snap else None)
        given = given or Given()
        if given.error is not None:
            raise PlanError(f"`%tfgpu visible {spec}` refused: {given.error}")
        units = _candidates(snap, given, (), mig=spec.auto == 1)
        chosen, self._picked_note = _select(units, spec.auto or 1, spec, {})
        if chosen is None:
            floor = f" with at least {format_mib(spec.min_free_mib)} free" if spec.min_free_mib else ""
            fit = [u for u in units if u.free is not None and (_fallback(spec) or _qualifies(u, spec.min_free_mib))]
            have = ", ".join(f"{u.label.removeprefix('GPU ')} ({format_mib(u.free)} free)"  # type: ignore[arg-type]
                             for u in sorted(fit, key=_freest)) or "none"
            among = f" (among {given.describe()}, this kernel's: {given.source})" if given.restricted else ""
            rule = "" if floor or _fallback(spec) else f" ({AUTO_RULE})"
            raise PlanError(f"visible {spec} needs {spec.auto} GPU(s){floor}, and only these qualify{among}{rule}: "
                            f"{have}; ask for fewer, lower --min-free, or name GPUs")
        if isinstance(chosen[0].ident, str):
            return VisibleSpec(mig=(chosen[0].ident,))
        return VisibleSpec(indices=tuple(sorted(u.ident for u in chosen)))  # type: ignore[type-var]

    # -- environment -----------------------------------------------------------------------------
    def _visible_env(self, spec: VisibleSpec, given: Given | None = None,
                     snap: nvml_module.NvmlSnapshot | None = None) -> dict[str, str | None]:
        order = self.environ.get("CUDA_DEVICE_ORDER")
        if order not in (None, "PCI_BUS_ID") and "CUDA_DEVICE_ORDER" not in self._saved_env:
            warn(f"tfgpu: CUDA_DEVICE_ORDER={order} numbers GPUs differently from nvidia-smi; "
                 "setting it to PCI_BUS_ID so the indices you give are nvidia-smi's")
        given = given or Given()
        if spec.every:
            visible = given.raw if given.restricted else None  # every GPU this kernel was given: the value it got
        elif spec.mig:
            visible = spec.mig[0]
        else:
            visible = self.assignment.value_for(given, spec.indices, (), snap)
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
        if self.hooks_import and not plan.is_empty() and self.probe().state < TFState.IMPORTED and not self._hooked:
            add_import_hook(self._on_import)
            self._hooked = True

    # -- at import ---------------------------------------------------------------------------------
    def _on_import(self, tf) -> None:
        with self._lock:
            self._hooked = False
            plan = self.plan
            if plan.is_empty():
                return
            adapter = self.adapter(tf, self.probe().state)
            for setting in asked_settings(plan):
                outcome = adapter.apply(setting, plan)
                self.outcomes[setting] = outcome
                if outcome.status in (Status.FAILED, Status.NO_DEVICE, Status.REFUSED):
                    warn(f"tfgpu: {setting} did not take effect at TensorFlow import: {outcome.detail}")
            report = self.on_import_report
        if report is not None:
            report(self.import_summary(plan))

    def import_summary(self, plan: Plan) -> str:
        """One line: each setting that waited for `import tensorflow`, and what became of it."""
        asked = dict(plan.describe())
        parts = []
        for setting in asked_settings(plan):
            outcome = self.outcomes[setting]
            values = [v for k, v in asked.items() if k.partition("[")[0] == setting]
            # "no GPU to apply to" and "already in force" say it all; what was applied, or why not, needs its detail.
            said = outcome.detail and outcome.status not in (Status.NO_GPU, Status.UNCHANGED)
            detail = f" ({outcome.detail})" if said else ""
            parts.append(f"{setting} {' '.join(values)}: {outcome.status.value}{detail}")
        return "tfgpu: at `import tensorflow`: " + "; ".join(parts)

    # -- reset -------------------------------------------------------------------------------------
    def reset(self) -> list[str]:
        """Drop the settings that have not taken effect; returns their names."""
        self._wait_for_import()
        with self._lock:
            return self._reset()

    def _reset(self) -> list[str]:
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
        # Settings made through a variable that TensorFlow has not read yet can still be put back: CUDA reads
        # CUDA_VISIBLE_DEVICES at enumeration, TensorFlow TF_CPU_ALLOCATOR_USE_BFC when its runtime starts.
        unread = {"visible": (state < TFState.ENUMERATED, ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")),
                  "cpumem": (state < TFState.INITIALIZED, (CPU_FIGURES_VAR,))}
        for setting, (still_unread, names) in unread.items():
            saved = {n: self._saved_env.pop(n) for n in names if n in self._saved_env}
            if still_unread and setting in self.outcomes and saved:
                if setting not in dropped:  # one that never landed is dropped above already
                    dropped.append(setting)
                self.restore_env(saved)
            else:
                self._saved_env.update(saved)
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
    def refusals(self) -> list[Refusal]:
        """The settings refused for the moment, as one consistent read (any thread)."""
        with self._lock:
            return list(self.refused.values())

    def rehearsal(self, nvml: nvml_module.NvmlSnapshot | None = None) -> Rehearsal:
        """A Rehearsal of a kernel start in this controller's environment, copied in one consistent read: the
        sidebar asks from a kernel subshell while a cell may be changing settings. NVML is read first, never
        under the lock (a hung driver would hold every setting)."""
        snap = nvml if nvml is not None else self.nvml()
        with self._lock:
            return Rehearsal(dict(self.environ), snap, getattr(self, "assignment", None))

    def read_back(self) -> None:
        """Take into the record what TensorFlow has where the notebook changed it with its own tf.config call: a
        CPU split it made (before or after a `%tfgpu cpus`) reads as the notebook's in status, export and the
        panel, and a later `%tfgpu cpus` says it replaces it. Runs on the main thread, after each cell and before
        a change; reads TensorFlow only once it is imported (reading its configuration starts nothing)."""
        tf = sys.modules.get("tensorflow")
        state = self.probe().state
        if tf is None or state < TFState.IMPORTED or importing_tensorflow_elsewhere():
            return
        has = Adapter(tf, state).cpus_in_force()
        with self._lock:
            ours = self.outcomes.get("cpus")
            if ours is not None and ours.status not in (Status.APPLIED, Status.UNCHANGED, Status.NOTEBOOK):
                return  # ours failed or is still to come: the record says so already
            if has == (self.plan.cpus or 1):
                return
            self.plan = self.plan.with_cpus(has)
            self.outcomes["cpus"] = Outcome("cpus", Status.NOTEBOOK, f"{has} logical CPU{'s' if has > 1 else ''}: "
                                            "the notebook's own tf.config.set_logical_device_configuration")

    def settings(self) -> list[dict]:
        """One row per asked setting: what was asked and what happened to it."""
        rows = []
        with self._lock:
            for name, asked in self.plan.describe():
                key, _, gpu = name.partition("[")
                outcome = self.outcomes.get(key)
                gpu = gpu.rstrip("]")
                detail = "" if outcome is None else outcome.detail_for(int(gpu)) if gpu.isdigit() else outcome.detail
                rows.append({"setting": name, "asked": asked,
                             "status": outcome.status.name.lower() if outcome else "pending", "detail": detail})
        return rows


# Which devices plain `visible auto` chooses among (README, "On a shared server"): `--min-free SIZE` replaces
# the memory half; with `--wait` it waits for one; without, none qualifying, it takes the freest and says so.
AUTO_RULE = "no other process computing on it and at least half its memory free"


@dataclass(frozen=True)
class _Unit:
    """A device `visible` can choose: a whole GPU (ident: its index) or a MIG device (ident: its UUID)."""

    ident: int | str
    label: str  # "GPU 2", "MIG 3g.20gb on GPU 0"
    free: int | None
    key: str  # its claim's key: the UUID
    order: tuple[int, int]
    total: int | None = None
    others: tuple[int, ...] | None = ()  # PIDs of other processes computing on it; None: NVML did not say


def _candidates(snap: nvml_module.NvmlSnapshot, given: Given, indices: tuple[int, ...], mig: bool) -> list[_Unit]:
    """The devices to choose among: the named GPUs, or every GPU this kernel was given, MIG devices instead of
    a parent in MIG mode (only when ``mig``: a choice of one device)."""
    if indices:
        return [_unit(i, f"GPU {i}", snap.gpu(i), gpu_key(snap.gpu(i)) if snap.gpu(i) else f"gpu-{i}", (i, -1))
                for i in indices]
    units = []
    for gpu in snap.gpus:
        if gpu.mig_mode is True:
            usable = [m for m in gpu.mig_devices if isinstance(m.uuid, str) and given.allows_mig(m.uuid, gpu.index)]
            units += [_unit(m.uuid, f"MIG {m.profile} on GPU {gpu.index}", m, m.uuid, (gpu.index, m.index))
                      for m in usable if mig]
        elif given.allows(gpu.index):
            units.append(_unit(gpu.index, f"GPU {gpu.index}", gpu, gpu_key(gpu), (gpu.index, -1)))
    return units


def _unit(ident: int | str, label: str, device, key: str, order: tuple[int, int]) -> _Unit:
    total = getattr(device, "memory_total_mib", None)
    return _Unit(ident, label, _free(device), key, order, total if isinstance(total, int) else None, _others(device))


def _free(device) -> int | None:
    free = getattr(device, "memory_free_mib", None)
    return free if isinstance(free, int) else None


def _others(device) -> tuple[int, ...] | None:
    """The PIDs of other processes computing on ``device``; None when NVML could not list its processes."""
    processes = getattr(device, "processes", ())
    if not isinstance(processes, tuple):
        return None
    me = os.getpid()
    return tuple(sorted({p.pid for p in processes if not p.is_self and p.pid != me and _computes(p)}))


def _computes(process) -> bool:
    """Whether a process of NVML's lists computes (CUDA, TensorFlow) rather than only draws. NVML lists compute
    and graphics processes; core/nvml.py marks each with nvidia-smi's letters ("C", "G", "C+G") in its ``type``
    field. A graphics-only process (a desktop session, an OpenGL viewer) does not keep auto off a GPU; one from a
    snapshot without the field (every process listed was a compute process then) counts as computing."""
    return "C" in str(getattr(process, "type", "C"))


def _qualifies(unit: _Unit, floor: int | None) -> bool:
    """AUTO_RULE, with ``floor`` (--min-free) in place of its memory half. Processes NVML did not list do not
    disqualify (free memory says what it can)."""
    if unit.free is None or unit.others:
        return False
    if floor is not None:
        return unit.free >= floor
    return unit.total is not None and unit.free * 2 >= unit.total


def _fallback(spec: VisibleSpec) -> bool:
    """Plain auto (no --min-free, no --wait) takes the freest when too few devices qualify."""
    return spec.auto is not None and spec.min_free_mib is None and spec.wait_s is None


def _freest(unit: _Unit) -> tuple:
    return (-(unit.free or 0), unit.order)


def _select(units: list[_Unit], want: int, spec: VisibleSpec, taken) -> tuple[list[_Unit] | None, str]:
    """The devices to take now, and a note when they are not all by the rule; (None, "") when too few qualify.
    Named GPUs (``visible I --min-free``) all need their free memory; ``auto`` takes the freest ``want`` of the
    devices that qualify (_qualifies), never one another kernel claimed; plain ``auto`` takes the freest of the
    rest when too few qualify, and the note says which and why."""
    open_ = [u for u in units if u.free is not None and u.key not in taken]
    if spec.auto is None:
        floor = spec.min_free_mib or 0
        return (units, "") if sum(u.free >= floor for u in open_) >= want else (None, "")  # type: ignore[operator]
    ok = sorted((u for u in open_ if _qualifies(u, spec.min_free_mib)), key=_freest)
    if len(ok) >= want:
        return ok[:want], ""
    rest = sorted((u for u in open_ if u not in ok), key=_freest)[: want - len(ok)]
    if not _fallback(spec) or len(ok) + len(rest) < want:
        return None, ""
    which = "none qualified" if not ok else f"only {len(ok)} qualified"
    took = ", ".join(_unit_words(u, spec) for u in rest)
    return ok + rest, (f"{which} ({AUTO_RULE}), so it took the freest{' of the rest too' if ok else ''}: {took}; "
                       "`--wait 10m` waits for one that qualifies")


def _unit_words(unit: _Unit, spec: VisibleSpec, claim=None) -> str:
    """"GPU 2 has 0.5 GiB free of 40.0 GiB (pid 4242 computes there)": what the rule looks at, for auto."""
    if unit.free is None:
        has = "free memory unknown"
    else:
        plain = spec.auto is not None and spec.min_free_mib is None and unit.total is not None
        has = f"has {unit.free / 1024:.1f} GiB free" + (f" of {unit.total / 1024:.1f} GiB" if plain else "")
    notes = []
    if spec.auto is not None:  # named GPUs are taken by free memory alone
        if unit.others is None:
            notes.append("its processes unknown")
        elif unit.others:
            pids = unit.others
            notes.append(f"pid {pids[0]} computes there" if len(pids) == 1 else
                         f"pids {', '.join(map(str, pids))} compute there" if len(pids) <= 3 else
                         f"{len(pids)} other processes compute there")
    if claim is not None:
        notes.append(claim.describe())
    return f"{unit.label} {has}" + (f" ({'; '.join(notes)})" if notes else "")


def _waiting_line(want: int, spec: VisibleSpec, units: list[_Unit], taken) -> str:
    """"waiting for a GPU with 20GiB free and no other process computing on it: GPU 2 has 0.5 GiB free (pid 4242
    computes there), GPU 3 has 4.1 GiB free (claimed by kernel 4f2c...)"."""
    floor = spec.min_free_mib
    if spec.auto is None:
        target = f"GPU{'s' if want > 1 else ''} {','.join(map(str, spec.indices))} to have {format_mib(floor)} free"
    else:
        rule = f"{format_mib(floor)} free and no other process computing on it" if floor is not None else AUTO_RULE
        target = f"a GPU with {rule}" if want == 1 else f"{want} GPUs, each with {rule}"
    parts = [_unit_words(unit, spec, taken.get(unit.key)) for unit in units]
    return f"waiting for {target}: " + (", ".join(parts) or "no GPU")


def _chosen_words(spec: VisibleSpec) -> str:
    if spec.mig:
        return f"MIG device {', '.join(spec.mig)}"
    if not spec.indices:
        return "no GPU"
    return ("GPU " if len(spec.indices) == 1 else "GPUs ") + ", ".join(str(i) for i in spec.indices)


def _joined(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


def _forced_growth(environ) -> bool | str | None:
    """What TF_FORCE_GPU_ALLOW_GROWTH makes of memory growth: True, False, "ignored" (TensorFlow logs an
    error and keeps tf.config's value for anything but the exact words), or None when unset."""
    value = environ.get("TF_FORCE_GPU_ALLOW_GROWTH")
    if value is None:
        return None
    return {"true": True, "false": False}.get(value, "ignored")


def _ignored_growth_note(environ) -> str:
    return (f"TF_FORCE_GPU_ALLOW_GROWTH={environ['TF_FORCE_GPU_ALLOW_GROWTH']} is ignored by TensorFlow "
            "(only true or false count)")


def environment_notes(environ) -> list[str]:
    """Sentences on the environment variables that change what the settings do, for every view."""
    notes = []
    forced = _forced_growth(environ)
    if forced is True:
        notes.append("TF_FORCE_GPU_ALLOW_GROWTH=true: TensorFlow grows GPU memory on demand whatever `growth` says "
                     "(with a limit: up to the limit)")
    elif forced is False:
        notes.append("TF_FORCE_GPU_ALLOW_GROWTH=false: TensorFlow reserves GPU memory at start whatever `growth` says")
    elif forced == "ignored":
        notes.append(_ignored_growth_note(environ))
    if environ.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async":
        notes.append("TF_GPU_ALLOCATOR=cuda_malloc_async: CUDA's allocator replaces TensorFlow's, so `growth` no "
                     "longer applies and a limit becomes the pool size")
    return notes


def _needs_nvml(what: str, error) -> PlanError:
    """The one refusal of a choice by free memory without NVML, whichever path (now, or waiting) met it."""
    return PlanError(f"{what} needs NVML to see free memory, and it is unavailable ({_why(error)}); name the GPUs "
                     "instead, like `%tfgpu visible 0`")


def _why(error) -> str:
    if error is None:
        return "NVML was not asked"
    return getattr(error, "detail", "") or getattr(error, "reason", str(error))


# The Plan field behind each setting, for dropping one back to its default.
_PLAN_FIELDS = {"visible": "visible", "growth": "growth", "cpus": "cpus", "limit": "limits", "virtual": "virtual",
                "cpumem": "cpumem"}


def _needs_inventory(change: Change) -> bool:
    """Whether a change is checked against NVML's GPUs: indices, percentages and sizes (against totals)."""
    sized = change.setting in ("limit", "virtual") and change.value is not None
    return change.setting == "visible" or change.gpu != ALL or sized


def _check_reachable(change: Change, spec: VisibleSpec, snap: nvml_module.NvmlSnapshot, given: Given) -> None:
    """Refuse a ``--min-free`` that no moment could meet: fewer GPUs than wanted have that much memory in all
    (a MIG device has no more than its parent), so waiting would only wait its whole time."""
    floor = spec.min_free_mib
    if floor is None:
        return
    named = set(spec.indices)
    gpus = [g for g in snap.gpus if isinstance(g.memory_total_mib, int) and given.allows(g.index)
            and (not named or g.index in named)]
    want = spec.auto if spec.auto is not None else len(named)
    if sum(g.memory_total_mib >= floor for g in gpus) >= want or not gpus:
        return
    largest = max(gpus, key=lambda g: (g.memory_total_mib, -g.index))
    scope = "the GPUs named" if named else "this kernel's GPUs" if given.restricted else "this machine's GPUs"
    raise PlanError(f"`{change.command}` can never be met: --min-free {format_mib(floor)} is more than "
                    f"{'any' if want == 1 else want} of {scope} {'has' if want == 1 else 'have'} in all (the largest, "
                    f"GPU {largest.index}, has {format_mib(largest.memory_total_mib)}); lower --min-free")


class Rehearsal(Controller):
    """A controller that applies nothing: it runs the rules of a kernel start that do not depend on the moment
    (conflicts such as growth with a limit on one GPU, a limit on a GPU that `visible` hides, GPU indices and
    sizes against NVML's totals where NVML knows them) on its own plan, as if TensorFlow were not imported yet,
    never touching the real environment or the import hook. `visible auto` takes the first GPUs by index:
    which are free is the moment's, not the document's."""

    def __init__(self, environ, nvml_snapshot: nvml_module.NvmlSnapshot, assignment: Assignment | None = None):
        super().__init__(environ=dict(environ), nvml_snapshot=lambda: nvml_snapshot,
                         prober=lambda: Probe(TFState.NOT_IMPORTED), hooks_import=False, assignment=assignment)

    def _change(self, change: Change) -> Outcome:
        value = change.value
        if change.setting == "visible" and isinstance(value, VisibleSpec) and value.min_free_mib is not None:
            snap = self.nvml()
            given = self.given(snap)
            if snap.available and snap.error is None and given.error is None:
                _check_reachable(change, value, snap, given)  # a saved 15TiB --wait 7d would hold every start
        return super()._change(change)

    def _pick_auto(self, spec: VisibleSpec, snap: nvml_module.NvmlSnapshot | None,
                   given: Given | None = None) -> VisibleSpec:
        if snap is None or not snap.available or snap.error is not None or (given and given.error):
            return super()._pick_auto(spec, snap, given)  # auto cannot work without NVML, at any moment
        indices = sorted(g.index for g in snap.gpus if given is None or given.allows(g.index))
        if len(indices) < spec.auto:
            raise PlanError(f"visible {spec} needs {spec.auto} GPU(s), and this machine has {len(indices)}: "
                            f"{self._gpu_list(snap)}; ask for fewer, or name GPUs")
        return VisibleSpec(indices=tuple(indices[: spec.auto]))


_default: Controller | None = None


def default_controller() -> Controller:
    """The process-wide controller: one kernel, one TensorFlow, one plan."""
    global _default
    if _default is None:
        _default = Controller()
    return _default
