"""The CPU settings: ``%tfgpu cpus N|off`` splits the CPU into logical devices (placement lessons without a GPU);
``%tfgpu cpumem on|off`` has TensorFlow's CPU allocator keep memory figures (per-cell memory without a GPU)."""

from __future__ import annotations

from ..i18n import N_, _
from ..plan import Plan, parse_count, parse_on_off
from ..runtime import Call, Outcome, Status, Step, TFState, cpu_figures_available, current_limits, logical_call
from .base import Control, Setting, Words

CPU_FIGURES_VAR = "TF_CPU_ALLOCATOR_USE_BFC"


def cpus_in_force(tf) -> int:
    """How many logical CPU devices TensorFlow has configured (1: its default), whoever configured them."""
    current = current_limits(tf, tf.config.list_physical_devices("CPU")[0])
    return len(current) if current else 1


class Cpus(Setting):
    name = "cpus"
    value_name = "count"
    words = Words(
        usage="%tfgpu cpus N|off", summary="split the CPU into N logical devices (placement lessons without a GPU)",
        help="Split the CPU into N logical devices, so tf.device and MirroredStrategy lessons run without a GPU. "
             "Takes effect when TensorFlow is imported.",
        examples=("%tfgpu cpus 3", "%tfgpu cpus off"), tab=("off", *(str(n) for n in range(1, 9))), placeholder="4",
        control=Control(N_("logical CPUs"), "text", "N | off", "off"))

    def parse(self, text: str) -> int | None:
        return None if text.lower() == "off" else parse_count(text, what=_("CPU count"))

    def step(self, adapter, plan: Plan) -> Step:
        count = self.value(plan) or 1  # None after `cpus off`: TensorFlow's default of one CPU device
        tf = adapter.tf
        detail = f"{count} logical CPU" + ("s" if count > 1 else "")
        if cpus_in_force(tf) == count:
            return Step(Status.APPLIED, detail)
        cpu = tf.config.list_physical_devices("CPU")[0]
        return Step(Status.APPLIED, detail, [logical_call(tf, cpu, None if count == 1 else [None] * count)])

    def read_back(self, tf, state, plan: Plan, outcome: Outcome | None):
        """A CPU split the notebook made with its own tf.config call (before or after a `%tfgpu cpus`)."""
        if outcome is not None and outcome.status not in (Status.APPLIED, Status.UNCHANGED, Status.NOTEBOOK):
            return None  # ours failed or is still to come: the record says so already
        has = cpus_in_force(tf)
        if has == (self.value(plan) or 1):
            return None
        return plan.replaced(self.name, has), Outcome(
            self.name, Status.NOTEBOOK, f"{has} logical CPU{'s' if has > 1 else ''}: the notebook's own "
            "tf.config.set_logical_device_configuration")

    def export_tf2(self, plan: Plan, totals_mib: dict) -> list[str]:
        count = self.value(plan)
        if not count or count < 2:
            return []
        return ['cpus = tf.config.list_physical_devices("CPU")', "tf.config.set_logical_device_configuration(",
                f"    cpus[0], [tf.config.LogicalDeviceConfiguration()] * {count})"]

    def export_tf1(self, plan: Plan, totals_mib: dict) -> list[str]:
        count = self.value(plan)
        return [f'config.device_count["CPU"] = {count}'] if count and count > 1 else []


class CpuFigures(Setting):
    name = "cpumem"
    value_name = "state"
    env_vars = (CPU_FIGURES_VAR,)
    read_at = TFState.INITIALIZED  # TensorFlow reads the variable when its runtime starts
    words = Words(
        usage="%tfgpu cpumem on|off",
        summary="TensorFlow's CPU allocator keeps memory figures (per-cell memory, no GPU)",
        help=f"TensorFlow's CPU allocator keeps memory figures ({CPU_FIGURES_VAR}=true), so `%tfgpu memory` and the "
             "panel show per-cell memory on a machine without a GPU. Takes effect when TensorFlow's runtime starts.",
        examples=("%tfgpu cpumem on", "%tfgpu cpumem off"), tab=("on", "off"), placeholder="on|off",
        control=Control(N_("CPU figures"), "choice", ("on", "off"), "off", variable=CPU_FIGURES_VAR))

    def parse(self, text: str) -> bool:
        return parse_on_off(text, what=self.name)

    def env(self, controller, value, plan: Plan, state, given, snap) -> dict[str, str | None]:
        # Read when the runtime starts: after that, the variable would only mislead.
        return {CPU_FIGURES_VAR: "true" if value else None} if state < TFState.INITIALIZED else {}

    def step(self, adapter, plan: Plan) -> Step:
        """TF_CPU_ALLOCATOR_USE_BFC is read when the runtime starts (measured: set after `import tensorflow`, before
        the first op, it works). The controller sets the variable; after the start only the effect can be read."""
        on = self.value(plan)
        if on is None:
            return Step(Status.APPLIED)
        if adapter.state < TFState.INITIALIZED:
            return Step(Status.APPLIED, f"{CPU_FIGURES_VAR}={'true' if on else 'unset'}; TensorFlow reads it when "
                        "its runtime starts", by_env=True)
        keeps = cpu_figures_available(adapter.tf)
        if on and not keeps:
            return Step(Status.APPLIED, "", [Call(lambda: None, f"{CPU_FIGURES_VAR}=true before it starts")])
        if not on and keeps and adapter.environ.get(CPU_FIGURES_VAR, "").lower() in ("true", "1"):
            return Step(Status.APPLIED, "", [Call(lambda: None, f"{CPU_FIGURES_VAR} unset before it starts")])
        if on:
            return Step(Status.APPLIED, "TensorFlow's CPU allocator keeps figures")
        return Step(Status.APPLIED, "TensorFlow's CPU allocator keeps figures anyway (oneDNN's, the default on x86)"
                    if keeps else "")

    def how_to_get_figures(self, environ) -> str:
        """What a view says where TensorFlow's CPU allocator keeps no figures. TensorFlow reads the variable once,
        when its runtime starts."""
        if environ.get(CPU_FIGURES_VAR, "").lower() in ("true", "1"):
            return (f"{CPU_FIGURES_VAR}=true was set after TensorFlow's runtime started; restart the kernel and run "
                    f"`%tfgpu {self.name} on` first")
        return (f"for figures, restart the kernel and run `%tfgpu {self.name} on` before TensorFlow's first operation "
                f"(it sets {CPU_FIGURES_VAR}=true); every logical CPU then reports the one allocator they share")

    def export_env(self, plan: Plan) -> list[str]:
        on = self.value(plan)
        if on is None:
            return []
        return ["# TensorFlow's CPU allocator keeps memory figures; read when its runtime starts.",
                f'os.environ["{CPU_FIGURES_VAR}"] = "true"' if on else f'os.environ.pop("{CPU_FIGURES_VAR}", None)']


CPUS = Cpus()
CPU_FIGURES = CpuFigures()
