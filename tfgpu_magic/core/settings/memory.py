"""The memory splits of a GPU: ``%tfgpu limit SIZE|off [--gpu I]`` caps what TensorFlow takes, ``%tfgpu virtual
NxSIZE|SIZE,...|off [--gpu I]`` splits a GPU into logical GPUs. Both are one TensorFlow call per GPU (a limit is a
split into one device), so they exclude each other on one GPU and share their step and their export."""

from __future__ import annotations

from ..i18n import N_, _
from ..inputs import printable
from ..plan import (
    ALL,
    Percent,
    Plan,
    PlanError,
    format_mib,
    format_size,
    gpu_key,
    has_percent,
    parse_size,
    parse_virtual,
    resolve_size,
)
from ..runtime import Status, Step, current_limits, logical_call
from .base import GPUS_LINE, Control, Setting, Words, registered
from .growth import forced_growth
from .visible import VISIBLE


class MemorySplit(Setting):
    per_gpu = True
    splits_memory = True
    kind = ""  # "a limit", "a virtual split": how a message names one

    def held(self, plan: Plan) -> list[str]:
        """"limit on GPU 0": each of its values in ``plan``, as a conflict names it."""
        return [f"{self.held_words} {gpu_key(gpu)}" for gpu in self.gpus(plan)]

    def planned(self, plan: Plan, value, gpu) -> Plan:
        if value is not None:
            if VISIBLE.hides(plan, gpu):
                raise PlanError(_("{setting} on GPU {gpu}: `visible {visible}` hides that GPU from TensorFlow, so the "
                                  "setting could never apply; give --gpu with a visible GPU, or change `visible` first"
                                  ).format(setting=self.name, gpu=gpu, visible=VISIBLE.value(plan)))
            grows = [other for other in registered() if other.grows_memory]
            if any(other.value(plan) for other in grows):
                raise grows[0].conflict(self.name, gpu)
            for other in registered():
                if other is not self and other.splits_memory:
                    clash = [g for g in other.gpus(plan) if g == gpu or ALL in (g, gpu)]
                    if clash:
                        raise PlanError(_("{setting} on {gpu} overlaps {other} on {other_gpu}: {fix}").format(
                            setting=self.name, gpu=gpu_key(gpu), other=other.kind, other_gpu=gpu_key(clash[0]),
                            fix=self.overlap_fix(other)))
        return super().planned(plan, value, gpu)

    def overlap_fix(self, other: Setting) -> str:
        return f"run `%tfgpu {other.name} off` first"

    def sizes(self, value) -> tuple:
        return value if isinstance(value, tuple) else (value,)

    def text(self, value) -> str:
        return ",".join(format_size(s) for s in self.sizes(value))

    # -- against the machine -------------------------------------------------------------------------------
    def needs_inventory(self, change) -> bool:
        return change.gpu != ALL or change.value is not None

    def check_unlisted(self, change, value, why: str) -> None:
        if has_percent(value):
            raise PlanError(_("`{command}` needs the GPU's total memory for a percentage; give a size like 4GB").format(
                command=change.command), more=_("NVML cannot tell it: {why}").format(why=why))

    def check(self, change, value, snap, plan: Plan) -> None:
        """Refuse sizes larger than the GPU they apply to (every visible GPU without --gpu)."""
        if value is None:
            return
        sizes = self.sizes(value)
        spec = VISIBLE.value(plan)
        if change.gpu != ALL:
            targets = [change.gpu]
        elif spec is not None and not spec.every:
            targets = list(spec.indices)
        else:
            targets = sorted(g.index for g in snap.gpus)
        for index in targets:
            gpu = snap.gpu(index)
            total = gpu.memory_total_mib if gpu is not None else None
            if not isinstance(total, int):
                if has_percent(value):
                    raise PlanError(_("`{command}` needs GPU {index}'s total memory, which NVML does not report "
                                      "({total}); give an absolute size such as 4GB").format(
                                          command=change.command, index=index, total=total))
                continue
            if sum(resolve_size(s, total) for s in sizes) > total:
                asked = sum(s for s in sizes if not isinstance(s, Percent))
                which = "" if change.gpu != ALL else " (it applies to every visible GPU; give --gpu for the others)"
                raise PlanError(_("`{command}` asks {asked} of GPU {index} ({name}), which has {total} in all{which}; "
                                  "give at most {total}, or a percentage such as 90%").format(
                                      command=change.command, asked=format_mib(asked), index=index,
                                      name=printable(gpu.name), total=format_mib(total), which=which))

    def environment_note(self, value, environ) -> str:
        if value is not None and forced_growth(environ) is True:
            return ("TF_FORCE_GPU_ALLOW_GROWTH=true: TensorFlow grows memory on demand up to this size instead of "
                    "reserving it at start")
        return ""

    # -- TensorFlow ------------------------------------------------------------------------------------------
    def step(self, adapter, plan: Plan) -> Step:
        """Every split's step is the same: one logical configuration per visible GPU, from all of them."""
        return _logical_step(adapter, plan)


class Limit(MemorySplit):
    name = "limit"
    value_name = "size"
    held_words = "limit on"
    kind = "a limit"
    words = Words(
        usage="%tfgpu limit SIZE|off [--gpu I]",
        summary="memory cap: 1024 (MiB), 1.5GB, 2GiB, 512MiB or 40% of the GPU",
        help="A cap on the memory TensorFlow takes on each visible GPU, or on one with --gpu; sizes in MiB unless a "
             "unit says otherwise, or a percentage of the GPU's total.",
        examples=("%tfgpu limit 4GB", "%tfgpu limit 40% --gpu 1", "%tfgpu limit off"), tab=("off",),
        placeholder="40% / 2GB", control=Control(N_("memory limit"), "text", "4GB | 40% | off  [--gpu I]", "off"))

    def parse(self, text: str):
        return None if text.lower() == "off" else parse_size(text, what=self.name)

    def overlap_fix(self, other: Setting) -> str:
        return "use one or the other (a limit is one virtual GPU)"

    def export_tf1(self, plan: Plan, totals_mib: dict) -> list[str]:
        splits = _splits(plan)
        every = dict(self.value(plan) or ()).get(ALL)
        if isinstance(every, Percent) and len(splits) == 1:
            # What per_process_gpu_memory_fraction always meant: a share of each GPU's memory.
            return [f"config.gpu_options.per_process_gpu_memory_fraction = {every.value / 100:g}"]
        every_mib, per_gpu = _gpu_limits(plan, totals_mib)
        if not (every_mib or per_gpu):
            return []
        return [f"limits_mb = {per_gpu!r}  # TensorFlow GPU index -> MiB per virtual device",
                'for k in range(len(tf.config.list_physical_devices("GPU"))):',
                "    config.gpu_options.experimental.virtual_devices.add(",
                f"        memory_limit_mb=limits_mb.get(k, {every_mib or []!r}))"]

    def export_tf2(self, plan: Plan, totals_mib: dict) -> list[str]:
        every, per_gpu = _gpu_limits(plan, totals_mib)
        lines = [GPUS_LINE] if every or per_gpu else []
        if every:
            lines += ["for gpu in gpus:", f"    tf.config.set_logical_device_configuration(gpu, {_ldcs(every)})"]
        for k, limits in sorted(per_gpu.items()):
            lines += [f"if len(gpus) > {k}:",
                      f"    tf.config.set_logical_device_configuration(gpus[{k}], {_ldcs(limits)})"]
        return lines


class Virtual(MemorySplit):
    name = "virtual"
    value_name = "spec"
    held_words = "virtual split of"
    kind = "a virtual split"
    words = Words(
        usage="%tfgpu virtual NxSIZE|SIZE,...|off [--gpu I]", summary="split a GPU into logical GPUs, e.g. 2x2GB",
        help="Split a GPU into logical GPUs of the given sizes, to try multi-GPU code on one GPU.",
        examples=("%tfgpu virtual 2x2GB", "%tfgpu virtual 1GB,3GB --gpu 0", "%tfgpu virtual off"), tab=("off",),
        placeholder="2x2GB")

    def parse(self, text: str):
        return None if text.lower() == "off" else parse_virtual(text)

    def overlap_fix(self, other: Setting) -> str:
        return f"run `%tfgpu {other.name} off` first, or give virtual 1xSIZE"

    # Its export is the limit's: one configuration per GPU from both (Limit.export_tf2 / export_tf1).


LIMIT = Limit()
VIRTUAL = Virtual()


def _splits(plan: Plan) -> dict:
    """{gpu: sizes} of every memory split in ``plan``; a virtual split wins over a limit (they never overlap)."""
    out: dict = {}
    for split in (s for s in registered() if s.splits_memory):
        for gpu, value in split.value(plan) or ():
            out[gpu] = split.sizes(value)
    return out


def desired_limits(plan: Plan, physical: int, totals_mib: dict) -> list[int] | None:
    """MiB per logical device for one physical GPU, or None for TensorFlow's default."""
    splits = _splits(plan)
    sizes = splits.get(physical, splits.get(ALL))
    if sizes is None:
        return None
    resolved = [resolve_size(s, totals_mib.get(physical)) for s in sizes]
    if any(r is None for r in resolved):
        raise LookupError(f"GPU {physical}'s total memory is unknown, so a percentage cannot be turned into MiB")
    return resolved


def _logical_step(adapter, plan: Plan) -> Step:
    asked = set(_splits(plan))
    gpus = adapter.visible_gpus()
    present = {p for p, _ in gpus}
    missing = sorted(g for g in asked if g != ALL and g not in present)
    if missing:
        seen = ", ".join(map(str, sorted(present))) or "none"
        per_gpu = tuple((g, f"GPU {g} is not visible to TensorFlow (visible: {seen})" if g in missing else
                         f"not applied: GPU {missing[0]} is not visible to TensorFlow")
                        for g in sorted(g for g in asked if g != ALL))
        return Step(Status.NO_DEVICE, f"GPU {missing[0]} is not visible to TensorFlow (visible: {seen})",
                    per_gpu=per_gpu)
    if not gpus:
        return Step(Status.NO_GPU if asked else Status.APPLIED,
                    "TensorFlow sees no GPU; the setting applies where there is one" if asked else "")
    try:
        wants = [(physical, device, desired_limits(plan, physical, adapter.totals_mib)) for physical, device in gpus]
    except LookupError as err:
        return Step(Status.FAILED, str(err))
    calls = [logical_call(adapter.tf, device, want) for _physical, device, want in wants
             if current_limits(adapter.tf, device) != want]
    shown = [(physical, "default" if want is None else ", ".join(map(format_mib, want)))
             for physical, _device, want in wants]
    detail = "; ".join(f"GPU {physical}: {text}" for physical, text in shown)
    return Step(Status.APPLIED, detail, calls, per_gpu=tuple((p, f"GPU {p}: {t}") for p, t in shown))


# -- %tfgpu export ---------------------------------------------------------------------------------------------
def _resolved(sizes, physical: int, total: int | None) -> list[int]:
    mib = [resolve_size(s, total) for s in sizes]
    if None in mib:
        asked = ",".join(format_size(s) for s in sizes)
        raise PlanError(_("cannot export {asked} for GPU {index}: its total memory is unknown now (NVML does not "
                          "report it), so the percentage has no size in MiB; give an absolute size such as 4GB, or "
                          "export where NVML sees the GPU").format(asked=asked, index=physical))
    return mib


def _gpu_limits(plan: Plan, totals_mib: dict[int, int | None]) -> tuple[list[int] | None, dict[int, list[int]]]:
    """(MiB list for every GPU, or None) and {TF index: MiB list} for GPUs named one by one. ``totals_mib`` has
    every GPU NVML lists, None where its total is unknown. Raises PlanError for what has no faithful code: a
    percentage without a total, a GPU that `visible` hides."""
    every = None
    per_gpu: dict[int, list[int]] = {}
    for gpu, sizes in _splits(plan).items():
        if gpu == ALL and not has_percent(sizes):
            every = list(sizes)
        elif gpu == ALL:  # a percentage differs per GPU model: one line per known GPU
            for physical, total in sorted(totals_mib.items()):
                if not VISIBLE.hides(plan, physical):
                    per_gpu[VISIBLE.tf_index(plan, physical)] = _resolved(sizes, physical, total)
        else:
            per_gpu[VISIBLE.tf_index(plan, gpu)] = _resolved(sizes, gpu, totals_mib.get(gpu))
    return every, per_gpu


def _ldcs(limits: list[int]) -> str:
    return "[" + ", ".join(f"tf.config.LogicalDeviceConfiguration(memory_limit={m})" for m in limits) + "]"
