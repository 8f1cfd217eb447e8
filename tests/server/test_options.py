"""Every number option of the server extension is finite and in its documented range: a value out of it is one
log line naming the option and the range, the default is used, and the extension still serves."""

from __future__ import annotations

import logging
import math
from types import SimpleNamespace

import pytest
from traitlets import TraitError
from traitlets.config import Config
from traitlets.config.loader import DeferredConfigString

from tfgpu_magic.server.options import RANGES, TfgpuServer, load_options

pytestmark = pytest.mark.server

BAD = {
    "history_interval": [math.inf, 1e-6, math.nan, -1.0, 1e300],
    "history_seconds": [1e300, math.inf, 5.0, math.nan],
    "cull_interval": [math.nan, 0.0, math.inf, 1e-9],
    "cull_idle_gpu_kernels_after": [math.inf, math.nan, -5.0, 1e12],
    "stale_after": [math.nan, math.inf, 0.0, 1e9],
    "snapshot_max_age": [math.nan, -0.1, math.inf],
    "cull_warning": [math.nan, math.inf, -1.0, 1e12],
    "activity_interval": [math.nan, math.inf, 0.0, -3.0, 1e4],
    "gpu_busy_threshold": [math.nan, math.inf, -1.0, 100.0],
}


def test_every_number_option_has_a_range():
    floats = {name for name, trait in TfgpuServer.class_traits(config=True).items()
              if type(trait).__name__ == "Float"}
    assert floats == set(RANGES) == set(BAD)


@pytest.mark.parametrize(("name", "value"), [(n, v) for n, values in BAD.items() for v in values],
                         ids=[f"{n}={v}" for n, values in BAD.items() for v in values])
def test_a_value_out_of_range_is_refused_naming_the_option_and_the_range(name, value):
    with pytest.raises(TraitError) as err:
        TfgpuServer(**{name: value})
    message = str(err.value)
    unit = "percent" if name == "gpu_busy_threshold" else "seconds"
    assert message.startswith(f"tfgpu: TfgpuServer.{name} = ") and "expected" in message and unit in message
    assert "\n" not in message
    low, high, _ = RANGES[name]
    assert f"{low:g} to {high:g}" in message


@pytest.mark.parametrize(("name", "value"), [("history_interval", 0.0), ("history_interval", 0.5),
                                             ("history_seconds", 86400.0), ("cull_idle_gpu_kernels_after", 0.0),
                                             ("cull_interval", 0.5), ("snapshot_max_age", 0.0),
                                             ("stale_after", 0.05), ("cull_warning", 0.0),
                                             ("activity_interval", 0.5), ("activity_interval", 600.0),
                                             ("gpu_busy_threshold", 0.0), ("gpu_busy_threshold", 99.0)])
def test_the_ends_of_each_range_and_off_are_accepted(name, value):
    assert getattr(TfgpuServer(**{name: value}), name) == value


@pytest.fixture
def jp_server_config():
    return {"ServerApp": {"jpserver_extensions": {"tfgpu_magic": True}},
            "TfgpuServer": {"history_interval": math.inf, "history_seconds": 1e300, "cull_interval": math.nan,
                            "stale_after": math.nan, "snapshot_max_age": 0.0}}


async def test_a_server_configured_out_of_range_serves_with_the_defaults(jp_serverapp, jp_fetch, fake_gpus):
    response = await jp_fetch("tfgpu", "api", "gpus")
    assert response.code == 200
    options = jp_serverapp.web_app.settings["tfgpu_extension"].options
    defaults = TfgpuServer()
    assert (options.history_interval, options.history_seconds, options.cull_interval, options.stale_after) == (
        defaults.history_interval, defaults.history_seconds, defaults.cull_interval, defaults.stale_after)
    assert options.snapshot_max_age == 0.0  # a value in range is kept


def _loaded(section: dict) -> tuple[TfgpuServer, list[str]]:
    """The options a server with this ``c.TfgpuServer`` section gets, and the lines it logs."""
    app = SimpleNamespace(config=Config({"TfgpuServer": section}), log=logging.getLogger("test_options"))
    lines: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: lines.append(record.getMessage())
    app.log.addHandler(handler)
    try:
        return load_options(app), lines
    finally:
        app.log.removeHandler(handler)


def test_each_value_out_of_range_is_one_log_line_and_the_rest_is_kept():
    # As the command line gives them (--TfgpuServer.cull_interval=nan): text that traitlets reads.
    section = {"history_interval": math.inf, "cull_interval": DeferredConfigString("nan"), "history_seconds": 120.0,
               "show_other_users": False, "stale_after": DeferredConfigString("soon")}
    options, lines = _loaded(section)
    assert lines == [
        "tfgpu: TfgpuServer.history_interval = inf is out of range: expected 0 (off) or 0.5 to 3600 seconds; "
        "using the default, 2.0",
        "tfgpu: TfgpuServer.cull_interval = nan is out of range: expected 0.5 to 3600 seconds; using the default, 60.0",
        "tfgpu: TfgpuServer.stale_after: The 'stale_after' trait of a TfgpuServer instance expected a float, not the "
        "str 'soon'; using the default, 5.0"]
    assert (options.history_interval, options.cull_interval) == (2.0, 60.0)
    assert (options.history_seconds, options.show_other_users) == (120.0, False)


@pytest.mark.parametrize(("after", "warning", "kept"), [(600.0, 900.0, 300.0), (60.0, 61.0, 60.0)])
def test_a_warning_longer_than_the_timeout_is_refused_naming_both(after, warning, kept):
    options, lines = _loaded({"cull_idle_gpu_kernels_after": after, "cull_warning": warning})
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert lines[0].startswith(f"tfgpu: TfgpuServer.cull_warning = {warning!r} is out of range: expected 0 to "
                               f"{after:g} seconds (at most cull_idle_gpu_kernels_after)")
    assert options.cull_warning == options.warning_s() == kept


def test_the_default_warning_is_never_longer_than_a_short_timeout():
    assert TfgpuServer(cull_idle_gpu_kernels_after=60.0).warning_s() == 60.0
    assert TfgpuServer(cull_idle_gpu_kernels_after=3600.0).warning_s() == 300.0
