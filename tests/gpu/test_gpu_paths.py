"""The GPU paths, call by call: CI has no GPU, so the exact tf.config calls are checked against a
recording stand-in for tf.config. benchmarks/gpu_check.py runs the same paths on a real GPU."""

import gpu_fakes
import pytest
from IPython.core.error import UsageError

from tfgpu_magic.core import settings
from tfgpu_magic.core.control import Change, Controller, RefusedError
from tfgpu_magic.core.plan import ALL, Percent, Plan, VisibleSpec
from tfgpu_magic.core.runtime import Adapter, Probe, Status, TFState


def P(**values) -> Plan:
    """A plan of these values, each checked by its setting as the controller checks it; per-GPU ones as {gpu: value}."""
    plan = Plan()
    for name, value in values.items():
        items = value.items() if isinstance(value, dict) else [("all", value)]
        for gpu, one in items:
            plan = settings.get(name).planned(plan, one, gpu)
    return plan

def adapter(tf, state=TFState.IMPORTED, order=(0, 1, 2), totals=None):
    return Adapter(tf, state, list(order), totals or {0: 40960, 1: 23034, 2: 81920})


def test_growth_on_every_visible_gpu():
    tf = gpu_fakes.RecordingTF(2)
    outcome = adapter(tf, order=(1, 3)).apply(settings.get("growth"), P(growth=True))
    assert outcome.status is Status.APPLIED
    assert tf.calls == [("set_memory_growth", "/physical_device:GPU:0", True),
                        ("set_memory_growth", "/physical_device:GPU:1", True)]
    assert outcome.calls == ("tf.config.experimental.set_memory_growth(GPU:0, True)",
                             "tf.config.experimental.set_memory_growth(GPU:1, True)")


def test_limit_on_one_physical_gpu_lands_on_its_tensorflow_index():
    # CUDA_VISIBLE_DEVICES=1,3: TensorFlow's GPU:1 is physical GPU 3.
    tf = gpu_fakes.RecordingTF(2)
    adapter(tf, order=(1, 3), totals={1: 16384, 3: 16384}).apply(settings.get("limit"), P(limit={3: 1024}))
    assert tf.calls == [("set_logical_device_configuration", "/physical_device:GPU:1", (1024,))]


def test_percent_limit_uses_each_gpus_total():
    tf = gpu_fakes.RecordingTF(3)
    adapter(tf).apply(settings.get("limit"), P(limit={ALL: Percent(25)}))
    assert tf.calls == [("set_logical_device_configuration", f"/physical_device:GPU:{k}", (mib,))
                        for k, mib in enumerate((10240, 5758, 20480))]


def test_virtual_split_of_one_gpu():
    tf = gpu_fakes.RecordingTF(1)
    adapter(tf, order=(0,)).apply(settings.get("virtual"), P(virtual={ALL: (2048, 2048)}))
    assert tf.calls == [("set_logical_device_configuration", "/physical_device:GPU:0", (2048, 2048))]


def test_limit_off_restores_the_default_before_init():
    tf = gpu_fakes.RecordingTF(1)
    a = adapter(tf, order=(0,))
    a.apply(settings.get("limit"), P(limit={ALL: 1024}))
    a.apply(settings.get("limit"), Plan())
    assert tf.calls[-1] == ("set_logical_device_configuration", "/physical_device:GPU:0", None)


def test_visible_after_enumeration_goes_through_set_visible_devices():
    tf = gpu_fakes.RecordingTF(3)
    outcome = adapter(tf, TFState.ENUMERATED).apply(settings.get("visible"), P(visible=VisibleSpec(indices=(2,))))
    assert tf.calls == [("set_visible_devices", ("/physical_device:GPU:2",), "GPU")]
    assert outcome.status is Status.APPLIED


def test_visible_before_enumeration_leaves_it_to_cuda_visible_devices():
    tf = gpu_fakes.RecordingTF(3)
    outcome = adapter(tf, TFState.IMPORTED).apply(settings.get("visible"), P(visible=VisibleSpec(indices=(2,))))
    assert tf.calls == [] and "CUDA_VISIBLE_DEVICES" in outcome.detail


def test_growth_then_limit_on_other_settings_keep_their_gpus():
    tf = gpu_fakes.RecordingTF(2)
    a = adapter(tf, order=(0, 1))
    plan = P(visible=VisibleSpec(indices=(0, 1)), virtual={1: (1024, 1024)}, limit={0: 512})
    for setting in ("visible", "limit", "virtual"):
        a.apply(settings.get(setting), plan)
    assert ("set_logical_device_configuration", "/physical_device:GPU:0", (512,)) in tf.calls
    assert ("set_logical_device_configuration", "/physical_device:GPU:1", (1024, 1024)) in tf.calls


@pytest.mark.parametrize(("setting", "plan"), [
    ("growth", P(growth=True)),
    ("limit", P(limit={ALL: 1024})),
    ("virtual", P(virtual={0: (1024, 1024)})),
    ("visible", P(visible=VisibleSpec(indices=(1,)))),
])
def test_after_init_a_change_is_refused_before_any_call(setting, plan):
    tf = gpu_fakes.RecordingTF(2, initialized=True)
    outcome = adapter(tf, TFState.INITIALIZED).apply(settings.get(setting), plan)
    assert outcome.status is Status.REFUSED
    assert tf.calls == []


def test_after_listing_a_gpu_cuda_left_out_is_refused_with_why_and_the_fix():
    """`visible 1` once TensorFlow has listed its GPUs under CUDA_VISIBLE_DEVICES=0: CUDA read the variable once, so
    the refusal says that, and that a restart with the magic first is the way to GPU 1."""
    tf = gpu_fakes.RecordingTF(1)
    a = Adapter(tf, TFState.ENUMERATED, [0], {0: 40960, 1: 23034}, {"CUDA_VISIBLE_DEVICES": "0"})
    outcome = a.apply(settings.get("visible"), P(visible=VisibleSpec(indices=(1,))))
    assert outcome.status is Status.NO_DEVICE and tf.calls == []
    assert outcome.detail == ("GPU 1 is not among TensorFlow's GPUs (physical: 0): CUDA read CUDA_VISIBLE_DEVICES=0 "
                              "when TensorFlow listed its devices, and reads it once; for GPU 1, restart the kernel "
                              "and run `%tfgpu visible` before TensorFlow lists its devices")


def test_after_init_the_value_in_force_is_accepted():
    tf = gpu_fakes.RecordingTF(2, initialized=True)
    tf.growth = {d.name: True for d in tf.gpus}
    outcome = adapter(tf, TFState.INITIALIZED).apply(settings.get("growth"), P(growth=True))
    assert outcome.status is Status.UNCHANGED and tf.calls == []


def _controller(tf, state):
    return Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus, tensorflow=lambda: tf,
                      prober=lambda: Probe(state, "2.99"))


@pytest.mark.parametrize("command", ["growth on", "limit 1GB", "virtual 2x1GB --gpu 0", "visible 1", "cpus 4"])
def test_refusal_after_init_says_restart_and_changes_nothing(shell, command):
    tf = gpu_fakes.RecordingTF(3, initialized=True)
    shell.tfgpu.controller = controller = _controller(tf, TFState.INITIALIZED)
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("tfgpu", command)
    message = str(err.value)
    assert message.startswith(f"tfgpu: `%tfgpu {command}` is too late")
    assert "restart the kernel" in message and "\n" not in message
    assert tf.calls == [] and controller.plan == Plan() and controller.environ == {}


def test_visible_between_import_and_enumeration_sets_the_environment(shell):
    tf = gpu_fakes.RecordingTF(3)
    shell.tfgpu.controller = controller = _controller(tf, TFState.IMPORTED)
    shell.run_line_magic("tfgpu", "visible 2")
    assert controller.environ == {"CUDA_VISIBLE_DEVICES": "2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}


def test_refused_change_keeps_the_environment(shell):
    tf = gpu_fakes.RecordingTF(3, initialized=True)
    shell.tfgpu.controller = controller = _controller(tf, TFState.INITIALIZED)
    with pytest.raises(RefusedError):
        controller.change(Change("visible", VisibleSpec(indices=(1,)), ALL, "%tfgpu visible 1"))
    assert controller.environ == {}


def test_visible_before_import_sets_pci_order_and_reset_restores(shell):
    controller = shell.tfgpu.controller
    controller.environ["CUDA_VISIBLE_DEVICES"] = "0"
    shell.run_line_magic("tfgpu", "visible 1,2")
    assert controller.environ == {"CUDA_VISIBLE_DEVICES": "1,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    shell.run_line_magic("tfgpu", "reset")
    assert controller.environ == {"CUDA_VISIBLE_DEVICES": "0"} and controller.plan == Plan()


def test_visible_auto_picks_the_freest(shell):
    shell.run_line_magic("tfgpu", "visible auto")
    assert shell.tfgpu.controller.environ["CUDA_VISIBLE_DEVICES"] == "1"
    shell.run_line_magic("tfgpu", "visible auto:2 --min-free 5GB")
    assert shell.tfgpu.controller.environ["CUDA_VISIBLE_DEVICES"] == "1,2"


def test_a_conflicting_device_order_is_warned_about(shell):
    from tfgpu_magic import TfgpuWarning

    shell.tfgpu.controller.environ["CUDA_DEVICE_ORDER"] = "FASTEST_FIRST"
    with pytest.warns(TfgpuWarning, match="FASTEST_FIRST"):
        shell.run_line_magic("tfgpu", "visible 0")


def test_export_turns_a_percentage_into_mib(shell, capsys):
    shell.run_line_magic("tfgpu", "limit 25% --gpu 2")
    capsys.readouterr()
    shell.run_line_magic("tfgpu", "export")
    assert "memory_limit=20480" in capsys.readouterr().out


def test_reset_after_import_drops_only_what_did_not_take_effect(shell):
    tf = gpu_fakes.RecordingTF(0)  # no GPU: growth has nothing to apply to
    shell.tfgpu.controller = controller = _controller(tf, TFState.IMPORTED)
    shell.run_line_magic("tfgpu", "cpus 2")
    shell.run_line_magic("tfgpu", "growth on")
    assert controller.outcomes["growth"].status is Status.NO_GPU
    assert controller.reset() == ["growth"]
    assert controller.plan == P(cpus=2)
