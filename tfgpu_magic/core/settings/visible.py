"""``%tfgpu visible SPEC [--min-free SIZE] [--wait TIME]``: which physical GPUs TensorFlow may use, by nvidia-smi's
numbers; ``auto[:N]`` chooses by the moment (choosing.py). Set through CUDA_VISIBLE_DEVICES before TensorFlow lists
its devices (also the whole setting in a kernel without TensorFlow), through tf.config.set_visible_devices after."""

from __future__ import annotations

import argparse
import functools
from dataclasses import replace

from ..i18n import N_, _, width
from ..inputs import printable
from ..no_gpu import cpu_only
from ..plan import ALL, FIRST_LINE, Plan, PlanError, VisibleSpec, parse_size, parse_visible, shown
from ..runtime import Call, Status, Step, TFState, device_name
from ..waiting import parse_duration
from ..warn import warn
from .base import (
    Change,
    Control,
    Once,
    Setting,
    Words,
    joined,
    keyword_text,
    nvml_why,
    registered,
    too_late,
    with_detail,
)

VARIABLE = "CUDA_VISIBLE_DEVICES"
ORDER_VAR = "CUDA_DEVICE_ORDER"


class Visible(Setting):
    name = "visible"
    value_name = "spec"
    options = ("min_free", "wait")
    env_vars = (VARIABLE, ORDER_VAR)
    read_at = TFState.ENUMERATED  # CUDA reads the variables when TensorFlow lists its devices
    without_tensorflow = True
    holds_claims = True
    needs_given = True
    words = Words(
        usage="%tfgpu visible SPEC [--min-free SIZE] [--wait TIME]",
        summary="SPEC: 0 | 1,3 | all | none | auto | auto:N | MIG-<uuid>",
        help="Which physical GPUs TensorFlow may use, by nvidia-smi's numbers; auto:N takes the N freest GPUs among "
             "those that qualify: no other process computing on it (a graphics one does not count) and at least half "
             "its memory free; --min-free SIZE replaces the half. --wait waits (30s, 10m, 2h) for GPUs that qualify, "
             "showing the best so far; another kernel waiting too takes other GPUs. Without --wait, when none "
             "qualifies, auto takes the freest and says so. A kernel started with CUDA_VISIBLE_DEVICES (by Slurm, "
             "Kubernetes, a spawner) chooses among the GPUs it was given, read as CUDA reads it: up to the first entry "
             "that is no index, GPU- or MIG- UUID. A GPU in MIG mode is used through one of its MIG devices, named as "
             "CUDA_VISIBLE_DEVICES takes it: MIG- and its UUID, or a unique start of it (Tab offers them). Takes "
             "effect when TensorFlow is imported: run it first.",
        examples=("%tfgpu visible 1", "%tfgpu visible 0,2", "%tfgpu visible MIG-5e8b0c1a",
                  "%tfgpu visible auto --wait 30m",
                  "%tfgpu visible auto:2 --min-free 10GB", "%tfgpu visible auto --min-free 20GB --wait 10m",
                  "%tfgpu visible 2 --min-free 20GB --wait 1h", "%tfgpu visible none"),
        placeholder="1 / auto / all",
        control=Control(N_("visible GPUs"), "text", "0 | 1,3 | all | none | auto:1", "all",
                        not_asked=N_("every GPU this kernel was given")))

    # -- text to a Change ----------------------------------------------------------------------------------------
    def parse(self, text: str) -> VisibleSpec:
        return parse_visible(text)

    def add_arguments(self, parser) -> None:
        super().add_arguments(parser)
        # Only `%tfgpu help visible` formats this parser's help: the MIG devices NVML lists are read then, never when
        # the parser is made (at the first %tfgpu line, which must not start NVML for growth or cpus).
        parser.format_help = functools.partial(_with_mig_devices, parser.format_help)
        parser.add_argument("--min-free", default=None, action=Once,
                            help="auto: GPUs with this much free memory qualify, in place of half free (with indices: "
                                 "wait until they have it)")
        parser.add_argument("--wait", default=None, action=Once,
                            help="wait up to this long (30s, 10m, 2h) for GPUs that qualify (auto: no other process "
                                 "computing there, and half its memory free or --min-free)")

    def from_args(self, args, command: str):
        spec, min_free, wait = args.spec, args.min_free, args.wait
        parsed = parse_visible(spec)
        if min_free is not None or wait is not None:
            if parsed.every or (parsed.auto is None and not parsed.indices):
                option = "--min-free" if min_free is not None else "--wait"
                raise PlanError(_("{option} goes with auto, auto:N or GPU indices, not {spec}").format(
                    option=option, spec=shown(spec)))
            if wait is not None and parsed.auto is None and min_free is None:
                raise PlanError(_("--wait with GPU indices needs --min-free SIZE (what to wait for): {example}").format(
                    example=f"`%tfgpu visible {spec} --min-free 10GB --wait 10m`"))
            floor = None if min_free is None else parse_size(min_free, allow_percent=False, what=_("--min-free size"))
            parsed = VisibleSpec(indices=parsed.indices, auto=parsed.auto, min_free_mib=floor,
                                 wait_s=None if wait is None else parse_duration(wait))
        return Change(self.name, parsed, ALL, command)

    def from_keyword(self, value, gpu_text, options: dict):
        text = "none" if isinstance(value, (list, tuple)) and not value else keyword_text(value)
        floor, patience = (None if options.get(k) is None else keyword_text(options[k]) for k in self.options)
        flags = "".join(f" --{flag} {v}" for flag, v in (("min-free", floor), ("wait", patience)) if v)
        return self.from_args(argparse.Namespace(spec=text, min_free=floor, wait=patience),
                              f"%tfgpu {self.name} {text}{flags}")

    def tab_words(self, fragment: str, gpus: list[str]) -> list[str]:
        """``gpus``: the indices of whole GPUs, and the MIG UUIDs of the MIG devices of GPUs in MIG mode (the names
        such a GPU is chosen by: its own index is refused)."""
        whole = [gpu for gpu in gpus if not gpu.upper().startswith("MIG-")]
        if "," in fragment:  # a list: the whole GPUs not in it yet (a MIG device is given alone)
            head, _sep, _tail = fragment.rpartition(",")
            taken = set(head.split(","))
            return [f"{head},{gpu}" for gpu in whole if gpu not in taken]
        if fragment.lower().startswith("auto:"):
            # auto takes one MIG device at most, and never with a whole GPU beside it
            return [f"auto:{n}" for n in range(1, max(len(whole), len(gpus) > len(whole)) + 1)]
        return ["all", "none", "auto", "auto:", *gpus]

    # -- the plan --------------------------------------------------------------------------------------------
    def hides(self, plan: Plan, gpu) -> bool:
        """Whether ``plan``'s visible set leaves physical GPU ``gpu`` out (ALL is never hidden)."""
        spec = self.value(plan)
        return gpu != ALL and spec is not None and not spec.every and gpu not in spec.indices

    def tf_index(self, plan: Plan, physical: int) -> int:
        """TensorFlow renumbers the visible GPUs from 0, in the order CUDA_VISIBLE_DEVICES lists them."""
        spec = self.value(plan)
        if spec is not None and not spec.every:
            if physical not in spec.indices:
                raise PlanError(_("cannot export a setting for GPU {index}: `visible {spec}` hides it; turn that "
                                  "setting off or make the GPU visible").format(index=physical, spec=spec))
            return spec.indices.index(physical)
        return physical

    def planned(self, plan: Plan, value, gpu) -> Plan:
        if value is not None and value.auto is not None:
            raise PlanError("internal: resolve auto to GPU indices before planning")  # a bug, not a user error
        if value is not None and not value.every:
            hidden = [(other.name, g) for other in registered() if other.per_gpu
                      for g in other.gpus(plan) if g != ALL and g not in value.indices]
            if hidden:
                what, gpu_ = hidden[0]
                fix = f"`%tfgpu {what} off --gpu {gpu_}`"
                raise PlanError(_("visible {value} would hide GPU {index}, which has a {setting} setting; run {fix} "
                                  "first").format(value=value, index=gpu_, setting=what, fix=fix))
        return super().planned(plan, value, gpu)

    # -- against the machine ---------------------------------------------------------------------------------
    def needs_inventory(self, change) -> bool:
        return True

    def named_gpus(self, change, value) -> list[int]:
        return list(value.indices) if isinstance(value, VisibleSpec) else []

    def chooses(self, change) -> bool:
        return isinstance(change.value, VisibleSpec) and change.value.chooses

    def choose(self, controller, change):
        from . import choosing

        if change.value.indices:  # `visible 2 --min-free 10GB --wait 1h` on a GPU in MIG mode: refused before waiting
            snap = controller.nvml()
            _refuse_mig_mode(change.value, snap, controller.given(snap))
        return choosing.choose_claiming(controller, change, controller.check_given)

    def resolve(self, controller, change, value, snap, given):
        if not isinstance(value, VisibleSpec):
            return value, ""
        if value.mig:
            return self._resolve_mig(change, value, snap, given), ""
        _refuse_mig_mode(value, snap, given)
        if not value.chooses:
            return value, ""
        from . import choosing  # loaded by the first choice by the moment, not by every `%tfgpu` call

        if value.min_free_mib is not None and snap is not None and snap.available \
                and snap.error is None and given.error is None:
            choosing.check_reachable(change.command, value, snap, given)  # a saved 15TiB --wait 7d would hold a start
        if value.auto is not None:
            return choosing.pick_once(f"%tfgpu visible {value}", value, snap, given, by_index=controller.rehearses)
        return value, ""

    @staticmethod
    def _resolve_mig(change, spec: VisibleSpec, snap, given) -> VisibleSpec:
        """A MIG UUID or unique prefix -> the MIG device's full UUID, checked against NVML and the given set."""
        asked = spec.mig[0]
        if snap is None or not snap.available or snap.error is not None:
            why = nvml_why(snap.error if snap else None)
            first = _("`{command}` needs NVML to find a MIG device, and it is unavailable").format(
                command=change.command)
            if width(f"tfgpu: {first}: {why}") <= FIRST_LINE:
                raise PlanError(f"{first}: {why}")
            raise PlanError(first, more=f"NVML: {why}")
        found = snap.mig_device(asked)
        if found is None:
            migs = [m for _parent, m in snap.mig_devices() if isinstance(m.uuid, str)]
            if not migs:
                raise PlanError(_("{asked} names no MIG device: no GPU here is in MIG mode; choose GPUs by their index"
                                  ).format(asked=printable(asked)))
            starting = [m for m in migs if m.uuid.lower().startswith(asked.lower())]
            what = (_("starts several MIG devices' UUIDs") if len(starting) > 1 else
                    _("matches no MIG device NVML lists"))
            raise MigChoiceError(_("{asked} {what}; choose one:").format(asked=printable(asked), what=what),
                                 [f"  {_choice_line(m)}" for m in starting if len(starting) > 1] or
                                 [f"  {_choice_line(m)}" for m in migs])
        parent, mig = found
        if not given.allows_mig(mig.uuid, parent.index):
            raise PlanError(_("`{command}` refused: {why}").format(command=change.command,
                                                                   why=given.refusal(f"MIG device {mig.uuid}")))
        return VisibleSpec(mig=(mig.uuid,))

    # -- the environment -------------------------------------------------------------------------------------
    def env(self, controller, value, plan: Plan, state, given, snap) -> dict[str, str | None]:
        spec = self.value(plan)
        order = controller.environ.get(ORDER_VAR)
        if order not in (None, "PCI_BUS_ID") and not controller.saved_env_has(ORDER_VAR):
            warn(f"tfgpu: {ORDER_VAR}={order} numbers GPUs differently from nvidia-smi; setting it to PCI_BUS_ID so "
                 "the indices you give are nvidia-smi's")
        if spec.every:
            visible = given.raw if given.restricted else None  # every GPU this kernel was given: the value it got
        elif spec.mig:
            visible = spec.mig[0]
        else:
            visible = controller.assignment.value_for(given, spec.indices, (), snap)
        return {VARIABLE: visible, ORDER_VAR: "PCI_BUS_ID"}

    @staticmethod
    def _said(env) -> str:
        value = env.get(VARIABLE)
        return f"{VARIABLE}={value if value is not None else '(unset: all)'}"

    def without_tensorflow_detail(self, env) -> str:
        """A PyTorch, JAX or CuPy kernel: the variable is the whole setting, read when CUDA first starts here."""
        return f"{self._said(env)}; read when a framework (PyTorch, JAX, CuPy) first starts CUDA in this kernel"

    def after_apply(self, change, value, outcome, env: dict, changed: dict, read: dict, state):
        """A CPU-only build after TensorFlow listed its devices: the variable was read then, so a visible set that
        moves it is too late (recorded, it would show a set this process does not have). Before the listing, the
        variables are the whole setting: say which."""
        if outcome.status is Status.NO_DEVICE and isinstance(value, VisibleSpec) and value.mig:
            # A MIG device is chosen only through the variable, which CUDA read at the listing: too late, said so.
            raise too_late(change.command or f"%tfgpu visible {value}",
                           _("TensorFlow has listed its GPUs"),
                           _("restart the kernel and run it first ({variable}, read at that listing, is how a MIG "
                             "device is chosen)").format(variable=VARIABLE))
        moved = VARIABLE in env and env[VARIABLE] != read.get(VARIABLE)
        if outcome.status is Status.NO_GPU and moved and state >= TFState.ENUMERATED:
            command = change.command or f"%tfgpu visible {value}"
            raise too_late(command, _("TensorFlow has listed its devices"))
        if env and state < TFState.ENUMERATED:
            return replace(outcome, status=Status.APPLIED if changed else Status.UNCHANGED,
                           detail=f"{self._said(env)}; CUDA reads it when TensorFlow first lists its devices")
        return outcome

    def settle(self, controller, asked, outcome, chose_note: str, claims_off: str | None):
        spec = self.value(controller.plan)
        if isinstance(asked.value, VisibleSpec) and asked.value.auto is not None and spec is not None:
            outcome = with_detail(outcome, joined(f"auto chose {_chosen_words(spec)}", chose_note), outcome.detail)
        if claims_off:  # chosen all the same: say that another kernel may choose the same GPU meanwhile
            outcome = with_detail(outcome, outcome.detail, f"GPU claims are off: {claims_off}; two kernels choosing "
                                  "at once may take the same GPU")
        return outcome

    # -- TensorFlow ------------------------------------------------------------------------------------------
    def step(self, adapter, plan: Plan) -> Step:
        spec = self.value(plan)
        if spec is None:
            return Step(Status.APPLIED)
        if adapter.state < TFState.ENUMERATED:
            # CUDA_VISIBLE_DEVICES (set when the magic ran) decides: CUDA reads it at enumeration.
            return Step(Status.APPLIED, f"through {VARIABLE}", by_env=True)
        if spec.mig:
            mig = spec.mig[0]
            return Step(Status.NO_DEVICE, f"too late: TensorFlow listed its GPUs, and {VARIABLE} (read once) chooses a "
                                          f"MIG device; restart the kernel and run `%tfgpu visible {mig}` first")
        gpus = adapter.physical_gpus()
        if not gpus and cpu_only(adapter.tf):  # which GPUs are visible changes nothing a CPU-only build does
            return Step(Status.NO_GPU, "TensorFlow sees no GPU (a CPU-only build); the setting applies where there "
                                       "is one")
        if spec.every:
            wanted = gpus
        else:
            by_physical = {adapter.physical_index(k): d for k, d in enumerate(gpus)}
            missing = [i for i in spec.indices if i not in by_physical]
            if missing:
                seen = ", ".join(str(i) for i in sorted(by_physical)) or "none"
                # NVML has it (the controller checked): CUDA left it out when TensorFlow listed its devices, once.
                variable = adapter.environ.get(VARIABLE)
                read = f"{VARIABLE}={variable}" if variable is not None else "the devices it found"
                return Step(Status.NO_DEVICE, f"GPU {missing[0]} is not among TensorFlow's GPUs (physical: {seen}): "
                                              f"CUDA read {read} when TensorFlow listed its devices, and reads it "
                                              f"once; for GPU {missing[0]}, restart the kernel and run `%tfgpu "
                                              "visible` before TensorFlow lists its devices")
            wanted = [d for k, d in enumerate(gpus) if adapter.physical_index(k) in spec.indices]
        current = [device_name(d) for d in adapter.tf.config.get_visible_devices("GPU")]
        if [device_name(d) for d in wanted] == current:
            return Step(Status.APPLIED)
        names = ", ".join(device_name(d) for d in wanted)
        return Step(Status.APPLIED, "through tf.config.set_visible_devices", [
            Call(lambda: adapter.tf.config.set_visible_devices(wanted, "GPU"),
                 f"tf.config.set_visible_devices([{names}], 'GPU')")])

    def export_env(self, plan: Plan) -> list[str]:
        spec = self.value(plan)
        if spec is None:
            return []
        lines = ["# Physical GPU numbers as nvidia-smi shows them; must be set before TensorFlow starts.",
                 f'os.environ["{ORDER_VAR}"] = "PCI_BUS_ID"']
        if spec.every:
            return [*lines, f'os.environ.pop("{VARIABLE}", None)']
        return [*lines, f'os.environ["{VARIABLE}"] = "{",".join(map(str, spec.indices))}"']


class MigChoiceError(PlanError):
    """``visible N`` names a GPU in MIG mode. Its first line says why (within 120 characters); the lines after it
    are the MIG devices to choose, one each, as the magic line that chooses it: a list too long for one line."""

    def __init__(self, first: str, choices: list[str]):
        super().__init__(first)
        self.args = ("\n".join([self.args[0], *choices]),)


def _refuse_mig_mode(spec: VisibleSpec, snap, given) -> None:
    """Refuse indices that name a GPU in MIG mode, with its MIG devices to choose. Such a GPU is no CUDA device of
    its own: given by its index, CUDA hands the process one of its MIG devices (the guide does not say which) or
    none, so accepting it would promise the whole GPU and deliver a slice nobody chose. A GPU NVML does not list,
    or one not given to this kernel, is left to the checks that say so."""
    if not spec.indices or snap is None or not snap.available or snap.error is not None:
        return
    if any(snap.gpu(index) is None for index in spec.indices):
        return  # a GPU that does not exist is the first thing to say
    for index in spec.indices:
        gpu = snap.gpu(index)
        if gpu.mig_mode is not True or not given.allows(index):
            continue
        migs = [m for m in gpu.mig_devices if isinstance(m.uuid, str) and given.allows_mig(m.uuid, index)]
        if not migs:
            why = _("no MIG device") if not gpu.mig_devices else _("no MIG device given to this kernel")
            raise PlanError(_("GPU {index} is in MIG mode with {why}, so CUDA finds nothing there; choose another GPU"
                              ).format(index=index, why=why))
        choose = (_("GPU {index} is in MIG mode, where a process gets one MIG device, not the GPU; choose one alone:")
                  if len(spec.indices) > 1 else
                  _("GPU {index} is in MIG mode, where a process gets one MIG device, not the GPU; choose one:"))
        raise MigChoiceError(choose.format(index=index), [f"  {_choice_line(m)}" for m in migs])


def _choice_line(mig) -> str:
    """"%tfgpu visible MIG-5e8b...  3g.20gb, 18,944 of 19,968 MiB free": a line to copy, and what it gives."""
    profile = mig.profile if isinstance(mig.profile, str) else "MIG device"
    free, total = mig.memory_free_mib, mig.memory_total_mib
    room = f", {free:,} of {total:,} MiB free" if isinstance(free, int) and isinstance(total, int) else ""
    return f"%tfgpu visible {mig.uuid}  {printable(profile)}{room}"


def mig_names(snap) -> list[str]:
    """The MIG devices NVML lists, as CUDA_VISIBLE_DEVICES takes them (MIG-<uuid>), each with its GPU and profile."""
    if snap is None or not snap.available or snap.error is not None:
        return []
    return [f"{m.uuid} ({m.profile if isinstance(m.profile, str) else 'MIG device'} on GPU {g.index})"
            for g, m in snap.mig_devices() if isinstance(m.uuid, str)]


def _with_mig_devices(format_help) -> str:
    from .. import nvml

    names = mig_names(nvml.snapshot())
    if not names:
        return format_help()
    return format_help() + "\n\nMIG devices NVML lists now (give one alone):\n" + "\n".join(f"  {n}" for n in names)


def _chosen_words(spec: VisibleSpec) -> str:
    if spec.mig:
        return f"MIG device {', '.join(spec.mig)}"
    if not spec.indices:
        return "no GPU"
    return ("GPU " if len(spec.indices) == 1 else "GPUs ") + ", ".join(str(i) for i in spec.indices)


VISIBLE = Visible()
