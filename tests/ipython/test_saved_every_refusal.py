"""Check & save names every refusal at once, and what the sidebar's "Restart kernel and apply" is told of values
nobody could check (tfgpu_magic/core/saved.py ``check`` and ``unchecked``, asked through the comm's ``validate``).
The dialog that shows them: tests/browser/test_browser_apply_dialog.py."""

from __future__ import annotations

import gpu_fakes
from messages import problems

from tfgpu_magic.core import saved
from tfgpu_magic.core.control import Controller


def test_every_setting_that_is_wrong_is_named_at_once():
    """A value that does not parse, a GPU NVML does not list and a conflict: three fields, three messages, each
    the one a kernel start would give for it alone."""
    with_gpus = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus)
    errors = saved.check({"settings": {"visible": "9", "cpus": "0", "growth": "on", "limit": "2GB"}}, with_gpus)
    assert set(errors) == {"visible", "cpus", "limit"}, errors
    assert "9" in errors["visible"] and "conflicts with growth on" in errors["limit"]
    assert all(message.startswith("tfgpu: ") for message in errors.values()), errors
    # The first key is where a kernel start stops: what does not parse comes before what the rules refuse.
    assert next(iter(errors)) == "cpus"
    alone = saved.check({"settings": {"visible": "9"}}, with_gpus)
    assert alone == {"visible": errors["visible"]}


def test_values_taken_as_given_are_named_with_why_only_where_nvml_cannot_list_the_gpus():
    document = {"settings": {"visible": "9", "cpus": "2", "limit": "2GB --gpu 9"}}
    without = Controller(environ={}, nvml_snapshot=gpu_fakes.no_nvml)
    assert saved.check(document, without) == {}  # a start takes them as given: nothing to refuse
    marks = saved.unchecked(document, without)
    assert set(marks) == {"visible", "limit"}, marks
    assert marks["visible"].startswith("GPU 9 not checked") and marks["limit"].startswith("GPU 9 not checked")
    assert all(not problems(m) for m in marks.values())
    with_gpus = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus)
    assert saved.unchecked({"settings": {"visible": "1", "cpus": "2"}}, with_gpus) == {}
