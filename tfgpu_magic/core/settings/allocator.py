"""``%tfgpu allocator async|bfc|off``: which allocator TensorFlow builds for each GPU. ``async`` sets
TF_GPU_ALLOCATOR=cuda_malloc_async (CUDA's stream-ordered allocator, what TensorFlow's own out-of-memory hint
suggests); ``bfc`` makes sure the variable is unset (TensorFlow's default, its BFC allocator); ``off`` forgets the
setting and leaves the variable as the kernel's environment had it.

TensorFlow reads the variable when it builds its GPU allocators, when its runtime starts (gpu_process_state.cc): the
exact word ``cuda_malloc_async`` replaces the BFC allocator, ``cuda_malloc`` and ``memory_guard`` are debugging
allocators, and anything else is ignored. With the async allocator memory growth no longer applies (CUDA's pool
takes memory as it is needed) and a memory limit becomes the pool's size: TensorFlow accepts both, so tfgpu does too,
and every view says so in the note on the variable (growth.py's, for whoever set it)."""

from __future__ import annotations

import os

from ..i18n import N_, _
from ..inputs import printable, shown
from ..no_gpu import cpu_only
from ..plan import Plan, PlanError
from ..runtime import Call, Outcome, Status, Step, TFState
from .base import Control, Setting, Words

ALLOCATOR_VAR = "TF_GPU_ALLOCATOR"
ASYNC_WORD = "cuda_malloc_async"
KINDS = ("async", "bfc")
DEBUG_WORDS = ("cuda_malloc", "memory_guard")  # TensorFlow's debugging allocators: neither kind


def allocator_in(value: str | None) -> str | None:
    """The allocator TensorFlow builds for this value of TF_GPU_ALLOCATOR: "async", "bfc" (unset, or a word it
    ignores), or None for one of its debugging allocators."""
    if value == ASYNC_WORD:
        return "async"
    return None if value in DEBUG_WORDS else "bfc"


def _variable(value: str | None) -> str:
    return f"{ALLOCATOR_VAR}={printable(value)}" if value is not None else f"{ALLOCATOR_VAR} unset"


def _wanted(kind: str) -> str | None:
    """The variable's value for an allocator kind (None: unset)."""
    return ASYNC_WORD if kind == "async" else None


# Before the runtime starts, what the variable will do: nothing in a build without CUDA (said like growth's "no GPU").
READ_LATER = "TensorFlow reads it when its runtime starts"
NO_GPU_ALLOCATOR = ("this TensorFlow is a CPU-only build, which builds no GPU allocator; the setting applies where "
                    "there is one")


def _named(kind: str | None) -> str:
    return {"async": "CUDA's async allocator", "bfc": "TensorFlow's BFC allocator"}.get(kind, "a debugging allocator")


class Allocator(Setting):
    name = "allocator"
    value_name = "kind"
    env_vars = (ALLOCATOR_VAR,)
    read_at = TFState.INITIALIZED  # TensorFlow reads the variable when its runtime starts
    words = Words(
        usage="%tfgpu allocator async|bfc|off",
        summary=f"CUDA's async GPU allocator ({ASYNC_WORD}) or TensorFlow's BFC",
        help=f"async: CUDA's stream-ordered allocator ({ALLOCATOR_VAR}={ASYNC_WORD}), what TensorFlow's own "
             "out-of-memory message suggests; memory growth no longer applies and a memory limit becomes the size "
             f"of CUDA's pool. bfc: TensorFlow's default allocator ({ALLOCATOR_VAR} unset). off: forget the setting "
             "(the variable as the kernel's environment had it). Takes effect when TensorFlow's runtime starts.",
        examples=("%tfgpu allocator async", "%tfgpu allocator bfc", "%tfgpu allocator off"),
        tab=(*KINDS, "off"), placeholder="|".join(KINDS),
        control=Control(N_("GPU allocator"), "choice", ("bfc", "async"), "bfc"))

    def parse(self, text: str) -> str | None:
        word = (text or "").strip().lower()
        if word == "off":
            return None
        if word not in KINDS:
            raise PlanError(_("bad value {value} for {setting}: expected async (CUDA's {cuda}), bfc (TensorFlow's "
                              "default) or off").format(value=shown(text), setting=self.name, cuda=ASYNC_WORD))
        return word

    # -- the environment ---------------------------------------------------------------------------------------
    def env(self, controller, value, plan: Plan, state, given, snap) -> dict[str, str | None]:
        # off: the value the kernel's environment had before any allocator setting. After the runtime started the
        # controller sets nothing (read_at); after_apply compares this with what TensorFlow read.
        if value is None:
            return {ALLOCATOR_VAR: controller.env_before(ALLOCATOR_VAR)}
        return {ALLOCATOR_VAR: _wanted(value)}

    def notes(self, environ) -> list[str]:
        """A TF_GPU_ALLOCATOR that is neither kind: a debugging allocator, or a word TensorFlow ignores."""
        value = environ.get(ALLOCATOR_VAR)
        if value is None or value == ASYNC_WORD:
            return []
        if value in DEBUG_WORDS:
            return [f"{ALLOCATOR_VAR}={value}: one of TensorFlow's debugging allocators (slow), neither `{self.name} "
                    f"async` nor `bfc`; `%tfgpu {self.name} bfc` before TensorFlow's first operation removes it"]
        return [f"{ALLOCATOR_VAR}={shown(value)} is ignored by TensorFlow, which keeps its BFC allocator (only "
                f"{ASYNC_WORD} changes it); for CUDA's async allocator run `%tfgpu {self.name} async` before "
                "TensorFlow's first operation"]

    # -- TensorFlow --------------------------------------------------------------------------------------------
    def step(self, adapter, plan: Plan) -> Step:
        kind = self.value(plan)
        if kind is None:
            return Step(Status.APPLIED)
        if adapter.state < TFState.INITIALIZED:
            if cpu_only(adapter.tf):
                return Step(Status.NO_GPU, f"{_variable(_wanted(kind))}; {NO_GPU_ALLOCATOR}", by_env=True)
            return Step(Status.APPLIED, f"{_variable(_wanted(kind))}; {READ_LATER}", by_env=True)
        # Read once, when the runtime started; tfgpu changes the variable only before that.
        if allocator_in(adapter.environ.get(ALLOCATOR_VAR)) == kind:
            return Step(Status.APPLIED, f"TensorFlow started with {_named(kind)}")
        return Step(Status.APPLIED, "", [Call(lambda: None, f"{_variable(_wanted(kind))} before it starts")])

    def after_apply(self, change, value, outcome: Outcome, env: dict, changed: dict, read: dict, state):
        """Between import and the runtime's start the variable is the whole setting: applied where it moved, already
        in force where not. After the start, `off` is refused where the environment's allocator is not the one
        TensorFlow started with (the standard too-late refusal: the controller words it from the call)."""
        wanted, had = env.get(ALLOCATOR_VAR), read.get(ALLOCATOR_VAR)
        if state < TFState.INITIALIZED and outcome.status is Status.NO_GPU:
            return outcome
        if state < TFState.INITIALIZED:
            return Outcome(self.name, Status.APPLIED if changed else Status.UNCHANGED,
                           f"{_variable(wanted)}; {READ_LATER}")
        if value is None and allocator_in(wanted) != allocator_in(had):
            return Outcome(self.name, Status.REFUSED, "", (f"{_variable(wanted)} before it starts",))
        if value is None:
            return Outcome(self.name, Status.UNCHANGED, f"TensorFlow started with {_named(allocator_in(had))}")
        return outcome

    def read_back(self, tf, state, plan: Plan, outcome: Outcome | None):
        """A TF_GPU_ALLOCATOR=cuda_malloc_async that no `%tfgpu allocator` asked for (the image's, the notebook's own
        os.environ, one `off` left as the environment had it) reads as the notebook's. The controller reads back only
        in a kernel, whose controller's environment is the process's; after the runtime's start the variable is
        what TensorFlow read then (tfgpu never changes it after)."""
        if self.value(plan) is not None:
            return None  # asked: the record says what became of it
        if allocator_in(os.environ.get(ALLOCATOR_VAR)) != "async":
            return None  # TensorFlow's default, or a debugging allocator (a note says which)
        return plan.replaced(self.name, "async"), Outcome(
            self.name, Status.NOTEBOOK, f"{ALLOCATOR_VAR}={ASYNC_WORD}: in the kernel's environment, not set by "
                                        "tfgpu")

    # -- %tfgpu export -----------------------------------------------------------------------------------------
    def export_env(self, plan: Plan) -> list[str]:
        kind = self.value(plan)
        if kind is None:
            return []
        if kind == "async":
            return ["# CUDA's stream-ordered allocator instead of TensorFlow's BFC; read when its runtime starts.",
                    f'os.environ["{ALLOCATOR_VAR}"] = "{ASYNC_WORD}"']
        return ["# TensorFlow's own BFC allocator (its default); read when its runtime starts.",
                f'os.environ.pop("{ALLOCATOR_VAR}", None)']


ALLOCATOR = Allocator()
