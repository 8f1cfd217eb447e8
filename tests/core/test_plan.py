"""Parsing and validation of settings: pure functions, no TensorFlow."""

import pytest

from tfgpu_magic.core import settings
from tfgpu_magic.core.plan import ALL, Percent, Plan, PlanError, parse_size, parse_virtual, parse_visible, resolve_size


@pytest.mark.parametrize(("text", "mib"), [
    ("1024", 1024), ("512MiB", 512), ("512MB", 512), ("1.5GB", 1536), ("2GiB", 2048), ("2g", 2048),
    ("0.5GB", 512), ("1TB", 1048576), (" 3 GB ", 3072),
])
def test_sizes_in_mib(text, mib):
    assert parse_size(text) == mib


def test_percent_resolves_against_the_total():
    assert parse_size("40%") == Percent(40)
    assert resolve_size(Percent(25), 81920) == 20480
    assert resolve_size(Percent(25), None) is None


@pytest.mark.parametrize("text", ["", "GB", "-1GB", "0", "0.1MB", "12XB", "101%", "0%", "1,5GB", "abc"])
def test_bad_sizes(text):
    with pytest.raises(PlanError) as err:
        parse_size(text)
    assert str(err.value).startswith("tfgpu: ")
    assert repr(text) in str(err.value)


def test_visible_forms():
    assert parse_visible("1,3").indices == (1, 3)
    assert parse_visible("none").indices == ()
    assert parse_visible("all").every
    assert parse_visible("auto").auto == 1
    assert parse_visible("auto:2").auto == 2
    assert str(parse_visible("1,3")) == "1,3"


def test_virtual_forms():
    assert parse_virtual("2x2GB") == (2048, 2048)
    assert parse_virtual("1GB,512MiB") == (1024, 512)


def planned(plan: Plan, name: str, value, gpu=ALL) -> Plan:
    """``plan`` with one setting changed, checked as the controller checks it (the setting's own file)."""
    return settings.get(name).planned(plan, value, gpu)


def test_growth_and_limit_exclude_each_other_in_either_order():
    with pytest.raises(PlanError, match="growth off"):
        planned(planned(Plan(), "growth", True), "limit", 1024)
    with pytest.raises(PlanError, match="limit off"):
        planned(planned(Plan(), "limit", 1024, 1), "growth", True)


def test_limit_and_virtual_on_one_gpu_conflict_but_not_on_two():
    plan = planned(planned(Plan(), "limit", 1024, 0), "virtual", (512, 512), 1)
    assert plan.per_gpu("limit") == {0: 1024} and plan.per_gpu("virtual") == {1: (512, 512)}
    with pytest.raises(PlanError, match="overlaps"):
        planned(plan, "virtual", (512,), 0)
    with pytest.raises(PlanError, match="overlaps"):
        planned(plan, "limit", 2048)


def test_off_removes_and_plans_are_values():
    plan = planned(Plan(), "limit", 1024, 0)
    assert planned(plan, "limit", None, 0) == Plan()
    assert settings.describe(plan) == [("limit[0]", "1GiB")]
