"""The kernel's settings: what was asked, what took effect, and the one path every face goes through.

A change is validated whole before anything moves: the plan, the environment variables and
TensorFlow's configuration change together or not at all. A change refused because TensorFlow's runtime
has started is remembered (``refused``) and told to the listeners (the live model, the sidebar's channel),
whichever face asked: the magic, ``configure()``, a panel control or a notebook's saved settings.

This is the transaction only: what a setting means, how it is checked, chosen and applied is its own file's
(core/settings/), asked through the registry; nothing here depends on which setting it is.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, replace

from . import no_gpu
from . import nvml as nvml_module
from . import settings as registry
from .assignment import Assignment, Given, start_environment
from .i18n import _
from .importguard import importing_tensorflow_elsewhere
from .numbering import cuda_order
from .plan import FIRST_LINE, Plan, PlanError
from .runtime import Adapter, Outcome, Probe, Status, TFState, add_import_hook, probe, remove_import_hook
from .settings.base import Change, RefusedError, joined, no_such_gpu, too_late
from .settings.base import nvml_why as why
from .waiting import Claims
from .warn import warn

IMPORT_WAIT_S = 300.0  # how long a change waits for another thread's `import tensorflow` to finish
__all__ = ["Change", "Controller", "Refusal", "RefusedError", "default_controller"]


def env_vars() -> tuple[str, ...]:
    """Every environment variable a setting sets: what change_all puts back when a change in it is refused."""
    return tuple(name for s in registry.settings() for name in s.env_vars)


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

    rehearses = False  # a Rehearsal: checks a kernel start's settings, applies nothing

    def __init__(self, environ: MutableMapping[str, str] | None = None,
                 nvml_snapshot: Callable[[], nvml_module.NvmlSnapshot] | None = None,
                 tensorflow: Callable[[], object] | None = None, prober: Callable[[], Probe] | None = None,
                 hooks_import: bool = True, assignment: Assignment | None = None,
                 installed_cpu_only: Callable[[], bool | None] | None = None):
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
        # Whether the installed TensorFlow is a CPU-only build, told before it is imported (no_gpu.py); a seam for
        # tests whose in-memory GPUs stand beside this venv's tensorflow-cpu.
        self.installed_cpu_only = installed_cpu_only or no_gpu.installed_cpu_only
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
        setting = registry.setting_of(change)
        asked = change
        claimed: tuple[str, ...] = ()
        chose_note = ""  # how a choice by the moment went, when not by its rule
        choice = None
        if self.claims is not None and setting.chooses(change) and self.probe().state < TFState.INITIALIZED:
            choice = setting.choose(self, change)  # may wait: outside the lock
        if choice is not None:
            change, claimed, chose_note = choice
        self.read_back()  # what the notebook set itself is the record a change starts from
        before = self.outcomes.get(change.setting)
        try:
            with self._lock:
                outcome, resolved_note = self._change(setting, change)
                chose_note = chose_note or resolved_note
        except RefusedError as err:
            self._release(claimed)
            with self._lock:  # the sidebar's requests read it from another thread (a kernel subshell)
                self.refused[change.setting] = Refusal(change.setting, change.asked, str(err))
            self._tell_listeners()
            raise
        except BaseException:
            self._release(claimed)
            raise
        if setting.holds_claims and self.claims is not None:  # a new choice replaces an older one
            self._release(tuple(k for k in self.claims.held() if k not in claimed))
        with self._lock:
            was_refused = self.refused.pop(change.setting, None) is not None
            if before is not None and before.status is Status.NOTEBOOK and outcome.status is Status.APPLIED:
                outcome = replace(outcome, detail=joined(
                    outcome.detail, f"replacing the notebook's own {before.detail.partition(':')[0]}"))
            off = self.claims.why_off(claimed) if choice is not None and self.claims is not None else None
            outcome = self.outcomes[change.setting] = setting.settle(self, asked, outcome, chose_note, off)
        if was_refused:  # asked again and accepted: nothing to restart for
            self._tell_listeners()
        return outcome

    def _change(self, setting, change: Change) -> tuple[Outcome, str]:
        state = self.probe().state
        snap = self.nvml() if setting.needs_inventory(change) else None
        given = self.given(snap) if snap is not None else Given()
        value, note = setting.resolve(self, change, change.value, snap, given)
        setting.check_environment(change, value, self.environ)
        self.check_given(change, value, given, setting)
        unchecked = self._check_inventory(setting, change, value, snap, self.plan) if snap is not None else ""
        new_plan = setting.planned(self.plan, value, change.gpu)
        said = joined(unchecked, setting.environment_note(value, self.environ))
        env = setting.env(self, value, new_plan, state, given, snap)
        if state is TFState.NOT_INSTALLED and setting.without_tensorflow:
            self._commit(new_plan, env)
            return self._record(Outcome(change.setting, Status.APPLIED, joined(
                setting.without_tensorflow_detail(env), said))), note
        if state < TFState.IMPORTED:
            self._commit(new_plan, env)
            waits = (_("applied when TensorFlow is imported (it is not installed)") if state is TFState.NOT_INSTALLED
                     else _("applied when TensorFlow is imported"))
            return self._record(Outcome(change.setting, Status.PENDING, joined(waits, said))), note
        read = {name: self.environ.get(name) for name in env}
        wanted = env
        if env and setting.read_at is not None and state >= setting.read_at:
            env = {}  # read already: TensorFlow's own call does the work, or nothing can
        tf = self._tensorflow()
        changed = {k: v for k, v in env.items() if self.environ.get(k) != v}
        old_env = self._apply_env(changed)
        outcome = self.adapter(tf, state, snap).apply(setting, new_plan)
        try:
            outcome = setting.after_apply(change, value, outcome, wanted, changed, read, state)
        except RefusedError:
            self.restore_env(old_env)
            raise
        if outcome.status in (Status.REFUSED, Status.FAILED, Status.NO_DEVICE):
            self.restore_env(old_env)
            raise self._error(change, outcome)
        if said:
            outcome = replace(outcome, detail=joined(outcome.detail, said))
        self._commit(new_plan, {})
        return self._record(outcome), note

    def _record(self, outcome: Outcome) -> Outcome:
        self.outcomes[outcome.setting] = outcome
        return outcome

    def change_all(self, changes: list[Change]) -> tuple[Outcome, ...]:
        """Several changes as one: before TensorFlow is imported they touch only the plan and the environment,
        so a bad one puts both back and none is kept (after import, TensorFlow took the earlier ones already:
        the PlanError raised then carries them as ``applied``, their Changes and Outcomes). Raises the first
        PlanError. (Not under the lock: a change may wait for an import in another thread, whose hook takes
        the lock.)"""
        saved_plan, saved_outcomes = self.plan, dict(self.outcomes)
        saved_env = {name: self.environ.get(name) for name in env_vars()}
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

    def _release(self, keys: tuple[str, ...]) -> None:
        if self.claims is not None and keys:
            self.claims.release(keys)

    def _wait_for_import(self) -> None:
        """Another thread is running `import tensorflow`: the module is half made, so wait for it
        (its import hook then applies whatever was pending) instead of touching it."""
        deadline = time.monotonic() + IMPORT_WAIT_S
        while self.probe().state is TFState.IMPORTING and importing_tensorflow_elsewhere():
            if time.monotonic() > deadline:
                raise PlanError(_("TensorFlow's import in another thread has not finished after {seconds} s; try "
                                  "again once `import tensorflow` has returned").format(seconds=f"{IMPORT_WAIT_S:.0f}"))
            time.sleep(0.01)

    def _error(self, change: Change, outcome: Outcome) -> PlanError:
        command = change.command or f"%tfgpu {change.setting} ..."
        if outcome.status is Status.REFUSED:
            return too_late(command, _("TensorFlow's runtime has started"))
        if outcome.status is Status.NO_DEVICE:
            return PlanError(_("{detail}; pick a GPU TensorFlow can see (`%tfgpu devices` lists them)").format(
                detail=outcome.detail))
        return PlanError(_("TensorFlow refused `{command}`: {detail}").format(command=command, detail=outcome.detail))

    # -- GPUs: inventory, the given set ---------------------------------------------------------
    def _check_inventory(self, setting, change: Change, value, snap: nvml_module.NvmlSnapshot, plan: Plan) -> str:
        """Refuse GPU indices that do not exist, and what the setting's own check refuses (sizes larger than the
        GPU). Where NVML cannot list the GPUs the indices are taken as given; the returned note says so."""
        named = setting.named_gpus(change, value)
        if not snap.available or snap.error is not None:
            setting.check_unlisted(change, value, why(snap.error))
            return f"GPU {', '.join(map(str, named))} not checked: {why(snap.error)}" if named else ""
        known = {g.index for g in snap.gpus}
        for index in named:
            if index not in known:
                raise no_such_gpu(index, snap)
        setting.check(change, value, snap, plan)
        return ""

    def check_given(self, change: Change, value, given: Given, setting=None) -> None:
        """Refuse GPUs outside the set this kernel was given at start (or any, when that set cannot be matched)."""
        if not given.restricted:
            return
        setting = setting or registry.setting_of(change)
        named = setting.named_gpus(change, value)
        if given.error is not None and (named or setting.needs_given):
            raise PlanError(_("`{command}` refused: {why}").format(command=change.command, why=given.error))
        for index in named:
            if not given.allows(index):
                raise PlanError(_("`{command}` refused: {why}").format(command=change.command,
                                                                       why=given.refusal(f"GPU {index}")))

    # -- environment -----------------------------------------------------------------------------
    def saved_env_has(self, name: str) -> bool:
        """Whether this controller changed ``name`` before (and keeps its first value to put back)."""
        return name in self._saved_env

    def env_before(self, name: str) -> str | None:
        """The value ``name`` had before this controller first changed it (its value now where it never did): what a
        setting's `off` puts back."""
        return self._saved_env[name] if name in self._saved_env else self.environ.get(name)

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
            for setting in registry.asked(plan):
                outcome = self._record(adapter.apply(setting, plan))
                if outcome.status in (Status.FAILED, Status.NO_DEVICE, Status.REFUSED):
                    warn(f"tfgpu: {setting.name} did not take effect at TensorFlow import: {outcome.detail}")
            report = self.on_import_report
        if report is not None:
            report(self.import_summary(plan, tf))

    def import_summary(self, plan: Plan, tf=None) -> str:
        """What became of each setting that waited for `import tensorflow`: one line where it fits in
        ``FIRST_LINE`` (every answer's first line), else a head and a line per setting; then, once, why no GPU took a
        GPU setting when this build is CPU-only (with the fix)."""
        asked = dict(registry.describe(plan))
        parts = []
        no_gpu_said = False
        for setting in (s.name for s in registry.asked(plan)):
            outcome = self.outcomes[setting]
            values = [v for k, v in asked.items() if k.partition("[")[0] == setting]
            # "no GPU to apply to" and "already in force" say it all; what was applied, or why not, needs its detail.
            said = outcome.detail and outcome.status not in (Status.NO_GPU, Status.UNCHANGED)
            detail = f" ({outcome.detail})" if said else ""
            no_gpu_said = no_gpu_said or outcome.status is Status.NO_GPU
            parts.append(f"{setting} {' '.join(values)}: {outcome.status.said}{detail}")
        head = "tfgpu: at `import tensorflow`:"
        line = f"{head} {'; '.join(parts)}"
        lines = [line] if len(line) <= FIRST_LINE else [head, *(f"  {part}" for part in parts)]
        tf = tf if tf is not None else sys.modules.get("tensorflow")
        if no_gpu_said and tf is not None and no_gpu.cpu_only(tf):
            lines.append(f"  {no_gpu.cpu_only_words()}")
        return "\n".join(lines)

    # -- reset -------------------------------------------------------------------------------------
    def reset(self) -> list[str]:
        """Drop the settings that have not taken effect; returns their names."""
        self._wait_for_import()
        with self._lock:
            return self._reset()

    def _reset(self) -> list[str]:
        state = self.probe().state
        if state < TFState.IMPORTED:
            dropped = [name for name, _value in registry.describe(self.plan)]
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
        for setting in registry.settings():
            if setting.read_at is None:
                continue
            saved = {n: self._saved_env.pop(n) for n in setting.env_vars if n in self._saved_env}
            if state < setting.read_at and setting.name in self.outcomes and saved:
                if setting.name not in dropped:  # one that never landed is dropped above already
                    dropped.append(setting.name)
                self.restore_env(saved)
            else:
                self._saved_env.update(saved)
        plan = self.plan
        for name in dropped:
            plan = registry.get(name).reset(plan)
            del self.outcomes[name]
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
        """Take into the record what TensorFlow has where the notebook changed it with its own tf.config call (each
        setting's read_back: a CPU split the notebook made reads as the notebook's in status, export and the panel,
        and a later change says it replaces it). Runs on the main thread, after each cell and before a change;
        reads TensorFlow only once it is imported (reading its configuration starts nothing)."""
        tf = sys.modules.get("tensorflow")
        if tf is None:  # before probing: without TensorFlow a probe looks for it on disk (~100 µs a cell)
            return
        state = self.probe().state
        if state < TFState.IMPORTED or importing_tensorflow_elsewhere():
            return
        with self._lock:
            for setting in registry.settings():
                found = setting.read_back(tf, state, self.plan, self.outcomes.get(setting.name))
                if found is not None:
                    self.plan, self.outcomes[setting.name] = found

    def settings(self) -> list[dict]:
        """One row per asked setting: what was asked and what happened to it."""
        rows = []
        with self._lock:
            for name, asked in registry.describe(self.plan):
                key, _sep, gpu = name.partition("[")
                outcome = self.outcomes.get(key)
                gpu = gpu.rstrip("]")
                detail = "" if outcome is None else outcome.detail_for(int(gpu)) if gpu.isdigit() else outcome.detail
                rows.append({"setting": name, "asked": asked,
                             "status": outcome.status.name.lower() if outcome else "pending", "detail": detail})
        return rows


class Rehearsal(Controller):
    """A controller that applies nothing: it runs the rules of a kernel start that do not depend on the moment
    (conflicts such as growth with a limit on one GPU, a limit on a GPU that `visible` hides, GPU indices and
    sizes against NVML's totals where NVML knows them) on its own plan, as if TensorFlow were not imported yet,
    never touching the real environment or the import hook. `visible auto` takes the first GPUs by index:
    which are free is the moment's, not the document's."""

    rehearses = True

    def __init__(self, environ, nvml_snapshot: nvml_module.NvmlSnapshot, assignment: Assignment | None = None):
        super().__init__(environ=dict(environ), nvml_snapshot=lambda: nvml_snapshot,
                         prober=lambda: Probe(TFState.NOT_IMPORTED), hooks_import=False, assignment=assignment)


_default: Controller | None = None


def default_controller() -> Controller:
    """The process-wide controller: one kernel, one TensorFlow, one plan."""
    global _default
    if _default is None:
        _default = Controller()
    return _default
