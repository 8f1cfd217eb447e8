"""``%tfgpu growth on|off``: TensorFlow takes each visible GPU's memory as needed instead of all at start."""

from __future__ import annotations

from ..i18n import N_, _
from ..plan import Plan, PlanError, gpu_key, parse_on_off
from ..runtime import Call, Status, Step, device_name
from .base import GPUS_LINE, Control, Setting, Words, registered

FORCE_VAR = "TF_FORCE_GPU_ALLOW_GROWTH"


def forced_growth(environ) -> bool | str | None:
    """What TF_FORCE_GPU_ALLOW_GROWTH makes of memory growth: True, False, "ignored" (TensorFlow logs an
    error and keeps tf.config's value for anything but the exact words), or None when unset."""
    value = environ.get(FORCE_VAR)
    if value is None:
        return None
    return {"true": True, "false": False}.get(value, "ignored")


def _ignored_note(environ) -> str:
    return f"{FORCE_VAR}={environ[FORCE_VAR]} is ignored by TensorFlow (only true or false count)"


# Why growth and a memory split exclude each other (tensorflow#38367), under the refusal's first line.
CANNOT_COMBINE = N_("TensorFlow cannot combine memory growth with a memory limit or virtual GPUs on one GPU")

class Growth(Setting):
    name = "growth"
    value_name = "state"
    grows_memory = True
    words = Words(
        usage="%tfgpu growth on|off", summary="memory growth on every visible GPU",
        help="Memory growth: each GPU's memory is taken as needed instead of all at once, so other notebooks can "
             "share the GPU. Takes effect when TensorFlow is imported.",
        examples=("%tfgpu growth on",), tab=("on", "off"), placeholder="on|off",
        control=Control(N_("memory growth"), "choice", ("on", "off"), "off", variable=FORCE_VAR))

    def parse(self, text: str) -> bool:
        return parse_on_off(text, what=self.name)

    def planned(self, plan: Plan, value, gpu) -> Plan:
        splits = [other for other in registered() if other.splits_memory]
        held = [words for other in splits for words in other.held(plan)]
        if value and held:
            offs = " / ".join(f"`%tfgpu {other.name} off`" for other in splits)
            raise PlanError(_("growth on conflicts with the {held}: run {offs} first").format(held=held[0], offs=offs),
                            more=_(CANNOT_COMBINE))
        return super().planned(plan, value, gpu)

    @staticmethod
    def conflict(what: str, gpu) -> PlanError:
        """The refusal of a memory split while growth is on (the memory settings ask it)."""
        return PlanError(_("{setting} on {gpu} conflicts with growth on: run `%tfgpu growth off` first").format(
            setting=what, gpu=gpu_key(gpu)), more=_(CANNOT_COMBINE))

    def check_environment(self, change, value, environ) -> None:
        """TF_FORCE_GPU_ALLOW_GROWTH=true|false overrides tf.config's memory growth when TensorFlow builds its GPU
        allocators (gpu_bfc_allocator.cc, GetAllowGrowthValue): a setting that says the opposite never applies."""
        forced = forced_growth(environ)
        if isinstance(forced, bool) and value is not None and value != forced:
            word = "true" if forced else "false"
            makes = (_("makes TensorFlow grow GPU memory whatever tf.config says") if forced else
                     _("makes TensorFlow not grow GPU memory whatever tf.config says"))
            raise PlanError(_(
                "`{command}` would not take effect: {variable}={word} in this kernel's environment {makes}; remove it "
                "first (`del os.environ['{variable}']`, before TensorFlow's first operation) or leave growth as the "
                "variable says").format(command=change.command, variable=FORCE_VAR, word=word, makes=makes))

    def environment_note(self, value, environ) -> str:
        return _ignored_note(environ) if forced_growth(environ) == "ignored" else ""

    def notes(self, environ) -> list[str]:
        """Sentences on the environment variables that change what memory growth does, for every view."""
        notes = []
        forced = forced_growth(environ)
        if forced is True:
            notes.append(f"{FORCE_VAR}=true: TensorFlow grows GPU memory on demand whatever `growth` says (with a "
                         "limit: up to the limit)")
        elif forced is False:
            notes.append(f"{FORCE_VAR}=false: TensorFlow reserves GPU memory at start whatever `growth` says")
        elif forced == "ignored":
            notes.append(_ignored_note(environ))
        if environ.get("TF_GPU_ALLOCATOR") == "cuda_malloc_async":
            notes.append("TF_GPU_ALLOCATOR=cuda_malloc_async: CUDA's allocator replaces TensorFlow's, so `growth` no "
                         "longer applies and a limit becomes the pool size")
        return notes

    def step(self, adapter, plan: Plan) -> Step:
        growth = self.value(plan)
        if growth is None:
            return Step(Status.APPLIED)
        gpus = adapter.visible_gpus()
        if not gpus:
            return Step(Status.NO_GPU, "TensorFlow sees no GPU; the setting applies where there is one")
        experimental = adapter.tf.config.experimental
        calls = [Call(lambda d=device: experimental.set_memory_growth(d, growth),
                      f"tf.config.experimental.set_memory_growth({device_name(device)}, {growth})")
                 for _index, device in gpus if bool(experimental.get_memory_growth(device)) != growth]
        return Step(Status.APPLIED, "", calls)

    def export_tf2(self, plan: Plan, totals_mib: dict) -> list[str]:
        growth = self.value(plan)
        if growth is None:
            return []
        return [GPUS_LINE, "for gpu in gpus:", f"    tf.config.experimental.set_memory_growth(gpu, {growth})"]

    def export_tf1(self, plan: Plan, totals_mib: dict) -> list[str]:
        growth = self.value(plan)
        return [] if growth is None else [f"config.gpu_options.allow_growth = {growth}"]


GROWTH = Growth()
