"""What a hostile or unlucky user tried, in a real IPython shell (no TensorFlow in this process): each
class of failure stays one `tfgpu:` line that changes nothing, or an answer that says the truth."""

import os
import sys
import warnings
from dataclasses import replace

import gpu_fakes
import pytest
from IPython.core.error import UsageError
from message_sweep import one_answer

from tfgpu_magic import api, warn
from tfgpu_magic.core import export
from tfgpu_magic.core.control import Change, Controller
from tfgpu_magic.core.nvml import NvmlSnapshot, Unavailable
from tfgpu_magic.core.placement import CellSummary, PlacementRecord, parse_device
from tfgpu_magic.core.plan import Percent, Plan, PlanError, VisibleSpec, parse_size, parse_virtual
from tfgpu_magic.core.runtime import Probe, Status, TFState
from tfgpu_magic.ipython.placement import parse_show_options

HUGE = "9" * 5000  # past Python's 4,300-digit int conversion limit
BEYOND_FLOAT = "1" + "0" * 400  # past float range


def _state(ip):
    controller = ip.tfgpu.controller
    return (controller.plan, dict(controller.outcomes), dict(controller.environ), dict(os.environ),
            "tensorflow" in sys.modules)


def _refused(ip, line):
    before = _state(ip)
    with pytest.raises(UsageError) as err:
        ip.run_line_magic("tfgpu", line)
    message = str(err.value)
    assert message.startswith("tfgpu:") and one_answer(message), message
    assert len(message) < 400, f"{len(message)} characters: {message[:200]}..."
    assert _state(ip) == before
    return message


# -- 3. numbers of any length ------------------------------------------------------------------------
@pytest.mark.parametrize("line", [
    f"cpus {HUGE}", f"cpus -{HUGE}", f"visible {HUGE}", f"visible 0,{HUGE}", f"visible auto:{HUGE}",
    f"virtual {HUGE}x1GB", f"virtual 2x{HUGE}", f"limit 1GB --gpu {HUGE}", f"limit {BEYOND_FLOAT}",
    f"limit {BEYOND_FLOAT}GB", f"virtual 2x{BEYOND_FLOAT}MiB", f"virtual 1GB,{BEYOND_FLOAT}",
    f"visible auto --min-free {BEYOND_FLOAT}", f"limit 0.{HUGE}", f"placement show --cell {HUGE}",
    f"placement show --limit {HUGE}", f"placement show --device /CPU:{HUGE}",
])
def test_numbers_of_any_length_are_one_line(shell, line):
    _refused(shell, line)


def test_a_device_cell_with_an_index_tensorflow_cannot_parse_is_one_line(shell):
    from tfgpu_magic.ipython.placement import PlacementController

    shell.tfgpu.placement = PlacementController(shell)  # not registered: no hooks to undo
    before = _state(shell)
    with pytest.raises(UsageError, match=r"^tfgpu: bad device '/CPU:9999999999.*characters\)"):
        shell.run_cell_magic("tfgpu", f"device /CPU:{HUGE}", "x = 1")
    assert _state(shell) == before  # and TensorFlow was not imported to find out


def test_a_device_index_tensorflow_cannot_parse_names_no_device():
    assert parse_device("/CPU:2147483647").index == 2147483647
    assert parse_device("/CPU:99999999999999999999") is None
    assert parse_device(f"/GPU:{HUGE}") is None


@pytest.mark.parametrize("kwargs", [
    {"cpus": 10**5000}, {"cpus": HUGE}, {"limit": BEYOND_FLOAT}, {"limit": 10**400}, {"virtual": f"2x{HUGE}"},
    {"virtual": [1024] * 65}, {"visible": [10**5000]}, {"limit": "1GB", "gpu": 10**5000}, {"gpu": HUGE, "limit": 1},
])
def test_python_api_raises_one_line_value_error_for_any_number(kwargs):
    with pytest.raises(ValueError) as err:
        api.configure(**kwargs)
    assert isinstance(err.value, PlanError)
    assert str(err.value).startswith("tfgpu:") and one_answer(str(err.value))
    assert len(str(err.value)) < 400


# -- 4. values accepted now that would fail later ------------------------------------------------------
def test_a_limit_larger_than_its_gpu_is_refused_with_the_total(shell):
    message = _refused(shell, "limit 1000GB --gpu 1")
    assert "GPU 1 (NVIDIA L4)" in message and "23034MiB" in message
    _refused(shell, "virtual 30GB,30GB --gpu 0")  # 60 GiB of a 40 GiB GPU
    # For every GPU: larger than the smallest one it would apply to.
    assert "(it applies to every visible GPU" in _refused(shell, "limit 30GB")
    shell.run_line_magic("tfgpu", "limit 20GB")  # fits all three


def test_a_limit_for_every_gpu_is_checked_against_the_visible_ones_only(shell):
    shell.run_line_magic("tfgpu", "visible 0,2")
    shell.run_line_magic("tfgpu", "limit 30GB")  # GPU 1 (22 GiB) is hidden
    assert shell.tfgpu.controller.plan.per_gpu("limit") == {"all": 30720}


def test_sizes_no_gpu_has_are_refused_before_nvml_is_asked():
    assert parse_size("16TB") == 1 << 24
    with pytest.raises(PlanError, match="more than any GPU has"):
        parse_size("17TB")


def test_the_comma_form_of_virtual_has_the_same_count_bound(shell):
    assert "1 to 64" in _refused(shell, "virtual " + ",".join(["1MiB"] * 65))
    assert "1 to 64" in _refused(shell, "virtual 65x1MiB")


def test_a_per_gpu_setting_on_a_gpu_visible_hides_is_refused_in_either_order(shell):
    shell.run_line_magic("tfgpu", "visible 0")
    assert "hides that GPU" in _refused(shell, "limit 1GB --gpu 1")
    assert "hides that GPU" in _refused(shell, "virtual 2x1GB --gpu 2")
    shell.run_line_magic("tfgpu", "reset")
    shell.run_line_magic("tfgpu", "limit 1GB --gpu 1")
    assert "limit off --gpu 1" in _refused(shell, "visible 0")
    shell.run_line_magic("tfgpu", "visible 1,2")  # keeps GPU 1


@pytest.mark.parametrize("line", ["limit 1GB --gpu 0 --gpu 1", "virtual 2x1GB --gpu 1 --gpu 1",
                                  "visible auto --min-free 1GB --min-free 2GB"])
def test_an_option_given_twice_is_refused(shell, line):
    assert "given twice" in _refused(shell, line)


def test_placement_show_options_given_twice_are_refused():
    with pytest.raises(UsageError, match="given twice"):
        parse_show_options(["--device", "CPU", "--device", "GPU"])


# -- 5. export after a GPU is lost or excluded ---------------------------------------------------------
def _lost(index):
    """The three fake GPUs, with GPU ``index`` fallen off the bus."""
    lost = Unavailable("gpu_lost", f"GPU {index}: GPU is lost")
    gpus = tuple(g if g.index != index else replace(g, memory_total_mib=lost, memory_used_mib=lost,
                                                    memory_free_mib=lost, error=lost)
                 for g in gpu_fakes.three_gpus().gpus)
    return NvmlSnapshot(available=True, driver_version="550.54", cuda_driver_version="12.4", gpus=gpus)


@pytest.mark.parametrize("line", ["limit 40% --gpu 1", "limit 40%", "virtual 2x20% --gpu 1"])
@pytest.mark.parametrize("tf1", [False, True])
def test_export_refuses_a_percentage_whose_gpu_is_lost(shell, line, tf1):
    shell.run_line_magic("tfgpu", line)
    shell.tfgpu.controller._nvml_snapshot = lambda: _lost(1)
    if tf1 and line == "limit 40%":  # per_process_gpu_memory_fraction needs no total
        shell.run_line_magic("tfgpu", "export --tf1")
        return
    message = _refused(shell, "export --tf1" if tf1 else "export")
    assert "cannot export" in message and "GPU 1" in message


def test_export_never_renders_a_gpu_that_visible_hides():
    plan = Plan(visible=VisibleSpec(indices=(0,)), limit=((1, 1024),))  # not reachable through the magics
    for render in (export.render_tf2, export.render_tf1):
        with pytest.raises(PlanError, match="hides it"):
            render(plan, {0: 40960, 1: 23034})


def test_exported_code_holds_plain_ints(shell):
    shell.run_line_magic("tfgpu", "limit 40% --gpu 2")
    code = export.render_tf2(shell.tfgpu.controller.plan, {2: 81920})
    assert "memory_limit=32768)" in code and "None" not in code


# -- 8 (controller side). a GPU count that fails -------------------------------------------------------
def _count_fails():
    return NvmlSnapshot(available=True, error=Unavailable("error", "GPU count: Unknown Error"),
                        driver_version="550.54", cuda_driver_version="12.4")


def test_a_failing_gpu_count_is_said_not_mistaken_for_no_gpus(shell):
    shell.tfgpu.controller._nvml_snapshot = _count_fails
    assert "GPU count: Unknown Error" in _refused(shell, "limit 40%")
    assert "GPU count" in _refused(shell, "visible auto")
    outcome = shell.tfgpu.controller.change(Change("visible", VisibleSpec(indices=(1,)), command="%tfgpu visible 1"))
    assert outcome.status is Status.PENDING and "GPU 1 not checked: GPU count: Unknown Error" in outcome.detail


# -- 9. visible between import and the first device listing -------------------------------------------
def _controller(state, n_gpus=3):
    tf = gpu_fakes.RecordingTF(n_gpus)
    environ = {}
    probe = {"state": state}
    controller = Controller(environ=environ, nvml_snapshot=gpu_fakes.three_gpus, tensorflow=lambda: tf,
                            prober=lambda: Probe(probe["state"], "2.21.0"))
    return controller, tf, environ, probe


def test_visible_after_import_before_listing_is_applied_and_can_be_reset():
    controller, tf, environ, _ = _controller(TFState.IMPORTED)
    outcome = controller.change(Change("visible", VisibleSpec(indices=(1,)), command="%tfgpu visible 1"))
    assert outcome.status is Status.APPLIED and "CUDA_VISIBLE_DEVICES=1" in outcome.detail
    assert environ == {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    again = controller.change(Change("visible", VisibleSpec(indices=(1,)), command="%tfgpu visible 1"))
    assert again.status is Status.UNCHANGED
    assert controller.reset() == ["visible"]
    assert environ == {} and controller.plan == Plan() and tf.calls == []


def test_reset_drops_a_visible_that_never_landed_once():
    # TensorFlow got imported without our hook running (the setting stayed pending), CUDA has not read the
    # variables yet: reset drops visible and puts the environment back, naming it once.
    controller, _, environ, probe = _controller(TFState.NOT_IMPORTED)
    controller.change(Change("visible", VisibleSpec(indices=(1,)), command="%tfgpu visible 1"))
    controller.unhook()
    probe["state"] = TFState.IMPORTED
    assert controller.reset() == ["visible"]
    assert environ == {} and controller.plan == Plan() and controller.outcomes == {}


def test_visible_applied_at_import_is_reported_applied():
    controller, tf, _, probe = _controller(TFState.NOT_IMPORTED)
    controller.change(Change("visible", VisibleSpec(indices=(1,)), command="%tfgpu visible 1"))
    probe["state"] = TFState.IMPORTED
    controller._on_import(tf)
    controller.unhook()
    assert controller.outcomes["visible"].status is Status.APPLIED
    assert controller.settings()[0]["status"] == "applied"


# -- 11. smaller wrong words -----------------------------------------------------------------------------
def test_each_per_gpu_row_has_its_own_detail():
    controller, tf, _, probe = _controller(TFState.NOT_IMPORTED)
    controller.change(Change("limit", 1024, 0, "%tfgpu limit 1GB --gpu 0"))
    controller.change(Change("limit", 2048, 1, "%tfgpu limit 2GB --gpu 1"))
    probe["state"] = TFState.IMPORTED
    controller._on_import(tf)
    controller.unhook()
    rows = {r["setting"]: r["detail"] for r in controller.settings()}
    assert rows == {"limit[0]": "GPU 0: 1GiB", "limit[1]": "GPU 1: 2GiB"}


def test_a_missing_gpu_at_import_is_named_on_its_own_row():
    controller, _, _, probe = _controller(TFState.NOT_IMPORTED)
    controller.change(Change("limit", 1024, 0, "%tfgpu limit 1GB --gpu 0"))
    controller.change(Change("limit", 2048, 1, "%tfgpu limit 2GB --gpu 1"))
    probe["state"] = TFState.IMPORTED
    with pytest.warns(Warning, match="limit did not take effect"):
        controller._on_import(gpu_fakes.RecordingTF(1))  # TensorFlow sees one GPU only
    controller.unhook()
    rows = {r["setting"]: r["detail"] for r in controller.settings()}
    assert rows["limit[1]"].startswith("GPU 1 is not visible to TensorFlow")
    assert rows["limit[0]"] == "not applied: GPU 1 is not visible to TensorFlow"


def test_executed_is_unknown_not_zero_with_run_metadata_only():
    records = [PlacementRecord(3, "MatMul", "MatMul", None, "/job:localhost/replica:0/task:0/device:CPU:1",
                               "run_metadata", 0.0)]
    summary = CellSummary.from_records(records, 3)
    assert summary.rows[0].executed is None
    assert "CPU:1   MatMul   -" in summary.to_text() and "executed is unknown" in summary.to_text()
    eager = [*records, PlacementRecord(3, "MatMul", "MatMul", None, records[0].device, "eager", 0.0)]
    assert CellSummary.from_records(eager, 3).rows[0].executed == 1


@pytest.mark.parametrize("value", ["10%", "foo", "2XB"])
def test_min_free_never_offers_a_percentage(shell, value):
    message = _refused(shell, f"visible auto --min-free {value}")
    assert "40%" not in message and "(or %)" not in message


@pytest.mark.parametrize("line", ["limit " + "x" * 100_000, "growth " + "y" * 100_000, "z" * 100_000,
                                  "visible " + "1," * 50_000, "cpus 3 " + "w" * 100_000])
def test_a_huge_argument_is_shortened_in_the_message(shell, line):
    # Straight to the magic: IPython's own $-expansion of a 100 KB line takes a minute before it.
    before = _state(shell)
    with pytest.raises(UsageError) as err:
        shell.tfgpu.tfgpu(line)
    message = str(err.value)
    assert message.startswith("tfgpu:") and one_answer(message) and len(message) < 400, message[:300]
    assert "characters)" in message
    assert _state(shell) == before


def test_warnings_point_at_the_users_line(shell):
    shell.tfgpu.controller.environ["CUDA_DEVICE_ORDER"] = "FASTEST_FIRST"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        shell.run_cell("%tfgpu visible 1")
    [w] = [w for w in caught if "CUDA_DEVICE_ORDER" in str(w.message)]
    assert "tfgpu_magic" not in w.filename and "IPython" not in w.filename, w.filename


def test_warn_skips_the_package_frames():
    namespace = {"__name__": "tfgpu_magic.inner", "warn": warn}
    exec("def inner():\n    warn('tfgpu: from inside')\n", namespace)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        namespace["inner"]()  # this line is the user's
    assert caught[0].filename == __file__


def test_configure_visible_empty_list_means_none():
    controller = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus)
    api_default = api.default_controller
    api.default_controller = lambda: controller
    try:
        [outcome] = api.configure(visible=[])
    finally:
        api.default_controller = api_default
        controller.unhook()
    assert outcome.status is Status.PENDING and controller.plan.visible == VisibleSpec()
    assert controller.environ["CUDA_VISIBLE_DEVICES"] == ""


# -- 12. TF_FORCE_GPU_ALLOW_GROWTH ---------------------------------------------------------------------
def test_forced_growth_refuses_the_opposite_and_is_said(shell):
    controller = shell.tfgpu.controller
    controller.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in _refused(shell, "growth off")
    shell.run_line_magic("tfgpu", "growth on")
    shell.run_line_magic("tfgpu", "reset")
    outcome = controller.change(Change("limit", 1024, 1, "%tfgpu limit 1GB --gpu 1"))
    assert "grows memory on demand up to this size" in outcome.detail
    from tfgpu_magic.render.snapshot import take

    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in take(controller).to_text()
    assert any("TF_FORCE_GPU_ALLOW_GROWTH" in n for n in take(controller).to_dict()["notes"])
    controller.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "false"
    shell.run_line_magic("tfgpu", "reset")
    assert "TF_FORCE_GPU_ALLOW_GROWTH=false" in _refused(shell, "growth on")
    controller.environ["TF_FORCE_GPU_ALLOW_GROWTH"] = "1"
    outcome = controller.change(Change("growth", True, command="%tfgpu growth on"))
    assert "is ignored by TensorFlow" in outcome.detail


# -- 6. the probe during an import in another thread ---------------------------------------------------
def test_a_half_imported_tensorflow_is_importing_not_imported(monkeypatch):
    import types
    from importlib.machinery import ModuleSpec

    from tfgpu_magic.core.runtime import probe

    fake = types.ModuleType("tensorflow")
    fake.__spec__ = ModuleSpec("tensorflow", None)
    fake.__spec__._initializing = True
    monkeypatch.setitem(sys.modules, "tensorflow", fake)
    try:
        assert probe().state is TFState.IMPORTING
        fake.__spec__._initializing = False
        assert probe().state is TFState.IMPORTED
    finally:
        monkeypatch.delitem(sys.modules, "tensorflow")


def test_unknown_gpu_sizes_with_percent_in_virtual_add_up():
    with pytest.raises(PlanError, match="more than 100%"):
        parse_virtual("60%,60%")
    assert parse_virtual("2x40%") == (Percent(40.0), Percent(40.0))
