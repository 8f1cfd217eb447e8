"""The contract over every parser, for any input: a valid result, or a ValueError (UsageError from the
magic's own argument parsers) whose message is one line starting `tfgpu:`; nothing else is raised."""

import argparse
import string

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.error import UsageError
from message_sweep import one_answer

from tfgpu_magic import api
from tfgpu_magic.core.placement import parse_device
from tfgpu_magic.core.plan import (
    MAX_SIZE_MIB,
    Percent,
    VisibleSpec,
    parse_count,
    parse_index,
    parse_on_off,
    parse_size,
    parse_virtual,
    parse_visible,
    whole_number,
)
from tfgpu_magic.core.settings.visible import VISIBLE
from tfgpu_magic.core.waiting import parse_duration
from tfgpu_magic.ipython.magics import _option_value
from tfgpu_magic.ipython.placement import parse_show_options
from tfgpu_magic.ipython.syntax import parsers

digits = st.text(string.digits, min_size=1, max_size=6000)
numbers = st.one_of(digits, st.builds(lambda d, f: f"{d}.{f}", digits, digits),
                    st.integers().map(str), st.floats(allow_nan=True).map(str))
units = st.sampled_from(["", "MiB", "MB", "GiB", "GB", "g", "TB", "TiB", "%", "XB", "kb", "Gb", " GB",
                         "s", "m", "h", "d", " years", "ms", "e400s"])
sizes = st.builds(lambda n, u: n + u, numbers, units)
words = st.one_of(st.text(max_size=200), sizes, numbers,
                  st.text(string.digits + ",:x*auto-.% ", max_size=300),
                  st.sampled_from(["on", "off", "auto", "all", "none", "auto:3", "2x2GB", "/CPU:1", "٣", "１"]))
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _message_ok(err: BaseException) -> None:
    message = str(err)
    assert message.startswith("tfgpu:"), message
    assert one_answer(message), message  # a second, indented line holds what the first cannot (issue 37)
    assert len(message) < 600, message[:300]


@SETTINGS
@given(words)
def test_size_parser(text):
    try:
        value = parse_size(text)
    except ValueError as err:
        _message_ok(err)
    else:
        percent_ok = isinstance(value, Percent) and 0 < value.value <= 100
        assert percent_ok or (type(value) is int and 1 <= value <= MAX_SIZE_MIB), (text, value)


@SETTINGS
@given(words)
def test_visible_virtual_count_index_on_off_parsers(text):
    for parse, check in (
        (parse_visible, lambda v: isinstance(v, VisibleSpec)),
        (parse_virtual, lambda v: isinstance(v, tuple) and 1 <= len(v) <= 64),
        (lambda t: parse_count(t, what="CPU count"), lambda v: 1 <= v <= 256),
        (parse_index, lambda v: 0 <= v < 2**31),
        (lambda t: parse_on_off(t, what="growth"), lambda v: isinstance(v, bool)),
        (parse_duration, lambda v: 0 < v <= 7 * 24 * 3600),
    ):
        try:
            value = parse(text)
        except ValueError as err:
            _message_ok(err)
        else:
            assert check(value), (text, value)


@SETTINGS
@given(words)
def test_device_and_whole_number_never_raise(text):
    spec = parse_device(text)
    assert spec is None or 0 <= spec.index < 2**31
    number = whole_number(text)
    assert number is None or 0 <= number < 2**31


@SETTINGS
@given(st.sampled_from(sorted(parsers())), st.lists(words, max_size=4))
def test_each_subcommands_argument_parser(name, argv):
    try:
        parsers()[name].parse_args(argv)
    except ValueError as err:  # PlanError: the core's parsers raise it, the magic shows it as a UsageError
        _message_ok(err)


@SETTINGS
@given(st.one_of(words, st.sampled_from(["auto", "auto:2", "2", "0,1", "all", "none"])),
       st.one_of(st.none(), words), st.one_of(st.none(), words))
def test_visible_with_min_free_and_wait(spec, floor, wait):
    try:
        change = VISIBLE.from_args(argparse.Namespace(spec=spec, min_free=floor, wait=wait), "%tfgpu visible ...")
    except ValueError as err:
        _message_ok(err)
    else:
        value = change.value
        assert wait is None or 0 < value.wait_s <= 7 * 24 * 3600
        assert floor is None or 1 <= value.min_free_mib <= MAX_SIZE_MIB


@SETTINGS
@given(st.lists(st.one_of(words, st.sampled_from(["--device", "--op", "--cell", "--limit", "--cell=x"])),
                max_size=6))
def test_placement_show_options(argv):
    try:
        parse_show_options(argv)
    except UsageError as err:
        _message_ok(err)


@SETTINGS
@given(st.sampled_from(["default_cpus", "default_growth", "quiet"]),
       st.one_of(words, st.integers(), st.booleans(), st.none(), st.floats(), st.lists(st.integers(), max_size=3)))
def test_config_options(name, value):
    try:
        _option_value(name, value)
    except ValueError as err:
        _message_ok(err)


@settings(SETTINGS, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(name=st.sampled_from(["visible", "growth", "limit", "virtual", "cpus", "gpu", "min_free", "wait"]),
       value=st.one_of(words, st.integers(min_value=-(10**6000), max_value=10**6000), st.booleans(),
                       st.lists(st.one_of(st.integers(), words), max_size=3)))
def test_python_api_arguments(private_controller, name, value):
    kwargs = {"gpu": value, "limit": "1GB"} if name == "gpu" else {name: value, "visible": "auto"} \
        if name in ("min_free", "wait") else {name: value}
    try:
        api.configure(**kwargs)
    except ValueError as err:
        _message_ok(err)


@pytest.fixture
def private_controller(monkeypatch):
    """configure() on a private controller with an in-memory NVML, so nothing touches os.environ."""
    import gpu_fakes

    from tfgpu_magic.core.control import Controller

    controller = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus)
    monkeypatch.setattr(api, "default_controller", lambda: controller)
    yield controller
    controller.unhook()
