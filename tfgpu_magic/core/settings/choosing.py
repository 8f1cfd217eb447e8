"""How ``%tfgpu visible`` chooses GPUs by the moment: ``auto[:N]`` (the freest that qualify by AUTO_RULE) and named
GPUs with ``--min-free``, once or waiting (``--wait``), with claims so two kernels choosing at once take different
GPUs. One chooser: the controller with claims, the one without (TensorFlow's runtime started) and a rehearsal of a
kernel start all go through ``pick``."""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import pidns
from ..i18n import _
from ..plan import PlanError, VisibleSpec, format_mib
from ..waiting import gpu_key, live_claims, wait_until
from .base import gpu_list, no_such_gpu, nvml_why

# Which devices plain `visible auto` chooses among (docs/reference.md): `--min-free SIZE` replaces the
# memory half; with `--wait` it waits for one; without, none qualifying, it takes the freest and says so.
AUTO_RULE = "no other process computing on it and at least half its memory free"


@dataclass(frozen=True)
class Unit:
    """A device `visible` can choose: a whole GPU (ident: its index) or a MIG device (ident: its UUID)."""

    ident: int | str
    label: str  # "GPU 2", "MIG 3g.20gb on GPU 0"
    free: int | None
    key: str  # its claim's key: the UUID
    order: tuple[int, int]
    total: int | None = None
    others: tuple[int, ...] | None = ()  # PIDs of other processes computing on it; None: NVML did not say


def needs_nvml(what: str, error) -> PlanError:
    """The one refusal of a choice by free memory without NVML, whichever path (now, or waiting) met it."""
    return PlanError(_("{what} needs NVML to see free memory; name GPUs instead (`%tfgpu visible 0`)").format(
        what=what), more=_("NVML is unavailable: {why}").format(why=nvml_why(error)))


def candidates(snap, given, indices: tuple[int, ...], mig: bool) -> list[Unit]:
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


def _unit(ident: int | str, label: str, device, key: str, order: tuple[int, int]) -> Unit:
    total = getattr(device, "memory_total_mib", None)
    return Unit(ident, label, _free(device), key, order, total if isinstance(total, int) else None, _others(device))


def _free(device) -> int | None:
    free = getattr(device, "memory_free_mib", None)
    return free if isinstance(free, int) else None


def _others(device) -> tuple[int, ...] | None:
    """The PIDs of other processes computing on ``device``; None when NVML could not list its processes."""
    processes = getattr(device, "processes", ())
    if not isinstance(processes, tuple):
        return None
    me = pidns.view().self_host_pid()  # NVML's number for this process: in a container the host's, or unknown
    return tuple(sorted({p.pid for p in processes if not p.is_self and p.pid != me and _computes(p)}))


def _computes(process) -> bool:
    """Whether a process of NVML's lists computes (CUDA, TensorFlow) rather than only draws. NVML lists compute
    and graphics processes; core/nvml.py marks each with nvidia-smi's letters ("C", "G", "C+G") in its ``type``
    field. A graphics-only process (a desktop session, an OpenGL viewer) does not keep auto off a GPU; one from a
    snapshot without the field (every process listed was a compute process then) counts as computing."""
    return "C" in str(getattr(process, "type", "C"))


def qualifies(unit: Unit, floor: int | None) -> bool:
    """AUTO_RULE, with ``floor`` (--min-free) in place of its memory half. Processes NVML did not list do not
    disqualify (free memory says what it can)."""
    if unit.free is None or unit.others:
        return False
    if floor is not None:
        return unit.free >= floor
    return unit.total is not None and unit.free * 2 >= unit.total


def fallback(spec: VisibleSpec) -> bool:
    """Plain auto (no --min-free, no --wait) takes the freest when too few devices qualify."""
    return spec.auto is not None and spec.min_free_mib is None and spec.wait_s is None


def _freest(unit: Unit) -> tuple:
    return (-(unit.free or 0), unit.order)


def select(units: list[Unit], want: int, spec: VisibleSpec, taken) -> tuple[list[Unit] | None, str]:
    """The devices to take now, and a note when they are not all by the rule; (None, "") when too few qualify.
    Named GPUs (``visible I --min-free``) all need their free memory; ``auto`` takes the freest ``want`` of the
    devices that qualify (qualifies), never one another kernel claimed; plain ``auto`` takes the freest of the
    rest when too few qualify, and the note says which and why."""
    open_ = [u for u in units if u.free is not None and u.key not in taken]
    if spec.auto is None:
        floor = spec.min_free_mib or 0
        return (units, "") if sum(u.free >= floor for u in open_) >= want else (None, "")  # type: ignore[operator]
    ok = sorted((u for u in open_ if qualifies(u, spec.min_free_mib)), key=_freest)
    if len(ok) >= want:
        return ok[:want], ""
    rest = sorted((u for u in open_ if u not in ok), key=_freest)[: want - len(ok)]
    if not fallback(spec) or len(ok) + len(rest) < want:
        return None, ""
    which = "none qualified" if not ok else f"only {len(ok)} qualified"
    took = ", ".join(_unit_words(u, spec) for u in rest)
    return ok + rest, (f"{which} ({AUTO_RULE}), so it took the freest{' of the rest too' if ok else ''}: {took}; "
                       "`--wait 10m` waits for one that qualifies")


def _unit_words(unit: Unit, spec: VisibleSpec, claim=None) -> str:
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


def _waiting_line(want: int, spec: VisibleSpec, units: list[Unit], taken) -> str:
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


def chosen(units: list[Unit]) -> VisibleSpec:
    if isinstance(units[0].ident, str):
        return VisibleSpec(mig=(units[0].ident,))
    return VisibleSpec(indices=tuple(sorted(u.ident for u in units)))  # type: ignore[type-var]


def check_reachable(command: str, spec: VisibleSpec, snap, given) -> None:
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
    raise PlanError(_("`{command}` can never be met; lower --min-free").format(command=command), more=(
        f"--min-free {format_mib(floor)} is more than {'any' if want == 1 else want} of {scope} "
        f"{'has' if want == 1 else 'have'} in all (the largest, GPU {largest.index}, has "
        f"{format_mib(largest.memory_total_mib)})"))


def pick(spec: VisibleSpec, snap, given, taken, *, by_index: bool = False) -> tuple[list[Unit] | None, str, str]:
    """The one chooser: (the devices, a note on a choice outside the rule, the waiting line), devices None when
    too few qualify now. ``by_index``: a rehearsal, which takes the first devices by index (which are free is the
    moment's, not the document's)."""
    want = spec.auto if spec.auto is not None else len(spec.indices)
    if by_index:
        indices = sorted(g.index for g in snap.gpus if given.allows(g.index))
        if len(indices) < want:
            raise PlanError(_("visible {spec} needs {want} GPU(s), and this machine has {have}: {gpus}; ask for fewer, "
                              "or name GPUs").format(spec=spec, want=want, have=len(indices), gpus=gpu_list(snap)))
        return [Unit(i, f"GPU {i}", None, f"gpu-{i}", (i, -1)) for i in indices[:want]], "", ""
    units = candidates(snap, given, spec.indices, mig=spec.auto == 1)
    for unit in units:
        if isinstance(unit.ident, int) and snap.gpu(unit.ident) is None:
            raise no_such_gpu(unit.ident, snap)
    found, note = select(units, want, spec, taken)
    return found, note, _waiting_line(want, spec, units, taken)


def usable(command: str, snap, given) -> None:
    """Refuse a choice by the moment where NVML or the given set cannot tell."""
    if snap is None or not snap.available or snap.error is not None:
        raise needs_nvml(f"`{command}`", snap.error if snap is not None else None)
    if given.error is not None:
        raise PlanError(_("`{command}` refused: {why}").format(command=command, why=given.error))


def pick_once(command: str, spec: VisibleSpec, snap, given, *, by_index: bool = False) -> tuple[VisibleSpec, str]:
    """``visible auto[:N]`` chosen once, without claims or a wait (a controller without claims, TensorFlow's
    runtime already started, or a rehearsal): the chooser's devices, or why too few qualify."""
    usable(command, snap, given)
    found, note, _waiting = pick(spec, snap, given, {}, by_index=by_index)
    if found is None:
        units = candidates(snap, given, (), mig=spec.auto == 1)
        floor = f" with at least {format_mib(spec.min_free_mib)} free" if spec.min_free_mib else ""
        fit = [u for u in units if u.free is not None and (fallback(spec) or qualifies(u, spec.min_free_mib))]
        have = ", ".join(f"{u.label.removeprefix('GPU ')} ({format_mib(u.free)} free)"  # type: ignore[arg-type]
                         for u in sorted(fit, key=_freest)) or "none"
        among = f" (among {given.describe()}, this kernel's: {given.source})" if given.restricted else ""
        rule = "" if floor or fallback(spec) else f" ({AUTO_RULE})"
        raise PlanError(_("visible {spec}: too few GPUs qualify; ask for fewer, lower --min-free, or name GPUs").format(
            spec=spec), more=(
            f"it needs {spec.auto} GPU(s){floor}, and only these qualify{among}{rule}: {have}"))
    return chosen(found), note


def choose_claiming(controller, change, check_given) -> tuple:
    """``visible auto[:N]`` or ``visible I --min-free SIZE``, with ``--wait`` or not: the devices that qualify now
    (or, waiting, as soon as they do), claimed so another kernel choosing at the same time takes others. A CUDA
    process uses one MIG device, so only ``auto`` (one device) may end on one. Returns the change with the devices
    named, the claims taken for it, and the note on a choice outside the rule ("" when it kept to it)."""
    spec: VisibleSpec = change.value
    claims = controller.claims
    state: dict = {}

    def attempt() -> tuple[VisibleSpec | None, str]:
        snap = controller.nvml()
        given = controller.given(snap) if snap.available and snap.error is None else None
        usable(change.command, snap, given)
        check_given(change, VisibleSpec(indices=spec.indices), given)
        check_reachable(change.command, spec, snap, given)
        taken = live_claims(claims, snap)
        found, note, line = pick(spec, snap, given, taken)
        if found is None:
            return None, line
        keys = tuple(u.key for u in found)
        got = [k for k in keys if claims.claim(k)]
        if len(got) < len(keys):  # another kernel was quicker: give back what we took, wait on
            claims.release(got)
            return None, line
        state["keys"], state["note"] = keys, note
        return chosen(found), line

    if spec.wait_s is None:
        result, line = attempt()
        if result is None:
            target, _sep, have = line.removeprefix("waiting for ").partition(": ")
            raise PlanError(_("`{command}`: too few GPUs qualify; ask fewer, lower --min-free or --wait 10m").format(
                command=change.command),
                            more=f"it needs {target}, and not enough qualify now ({have or 'no GPU'}); or name GPUs")
    else:
        result = wait_until(attempt, spec.wait_s, f"`{change.command}`", controller.on_progress)
    return replace(change, value=result), tuple(state.get("keys", ())), state.get("note", "")
