"""Settings saved in a notebook's metadata (tfgpu_magic/core/saved.py, applied by tfgpu_magic/ipython/apply.py):
their shape, the magics' checks of their values, one verdict from Check & save and a kernel start, and the first
cell written for running the notebook elsewhere. With real TensorFlow: tests/tf/test_saved_tf.py; in a real
kernel as the sidebar does it: tests/kernel/test_saved_kernel.py; the sidebar's own first cell:
tests/frontend/test_saved_first_cell.py."""

from __future__ import annotations

import json

import gpu_fakes
import pytest
from fakenvml import three_gpus
from message_sweep import one_answer

from tfgpu_magic.core import saved
from tfgpu_magic.core.control import Controller

# -- the metadata's shape -----------------------------------------------------------------------------------------


def test_normalise_orders_settings_and_reads_every_form():
    doc = {"version": 1, "apply_on_start": True,
           "settings": {"placement": "on", "limit": ["2GB --gpu 0", "4GB --gpu 1"], "cpus": " 3 ", "visible": "1"}}
    assert saved.normalise(doc) == {"visible": ["1"], "cpus": ["3"], "limit": ["2GB --gpu 0", "4GB --gpu 1"],
                                    "placement": ["on"]}
    # no version: read as version 1; a bare settings object (the sidebar's validate request) too
    assert saved.normalise({"settings": {"cpus": "2"}}) == {"cpus": ["2"]}
    assert saved.normalise({"cpus": "2"}) == {"cpus": ["2"]}
    assert saved.lines(saved.normalise(doc)) == ["visible 1", "cpus 3", "limit 2GB --gpu 0", "limit 4GB --gpu 1",
                                                 "placement on"]


@pytest.mark.parametrize("value", ["0\nimport os", "0\r\n!rm -rf ~", "2\x1b[2J", "on\tx", "1\x85x",
                                   "on\u2028import os", "2\u2029x"],
                         ids=["newline", "crlf", "escape", "tab", "c1", "line-separator", "paragraph-separator"])
def test_a_value_with_a_control_character_is_refused_and_never_a_line_of_code(value):
    """A line break in a saved value would write a line of Python into the first cell (first_cell)."""
    for name in ("visible", "cpus", "limit"):
        document = {"settings": {name: value}}
        with pytest.raises(saved.SavedError) as err:
            saved.first_cell(document)
        message = str(err.value)
        assert message.startswith(f"tfgpu: saved {name} ") and "control character" in message, message
        assert "\n" not in message and "\x1b" not in message and "\r" not in message, message
        assert saved.check(document) == {"": message}
    assert saved.check({"settings": {"limit": ["1GB --gpu 0", value]}})[""].startswith("tfgpu: saved limit ")


@pytest.mark.parametrize("doc, message", [
    ({"version": 2, "settings": {}}, "tfgpu: these settings were saved by a newer tfgpu_magic (metadata version 2); "
                                     "this one reads version 1: upgrade tfgpu_magic in this kernel's environment"),
    ({"version": "1"}, "tfgpu: bad 'tfgpu' metadata version '1': expected 1"),
    ([], "tfgpu: the notebook's 'tfgpu' metadata is list, not an object"),
    ({"settings": ["cpus 3"]}, "tfgpu: the saved settings are list, not an object"),
    ({"settings": {"gpus": "1"}}, "tfgpu: unknown saved setting 'gpus'; valid: visible, cpus, cpumem, allocator, "
                                  "growth, limit, virtual, placement"),
    ({"settings": {"cpus": 3}}, "tfgpu: saved cpus is 3: expected the text after `%tfgpu cpus`"),
    ({"settings": {"cpus": ["2", "3"]}}, 'tfgpu: saved cpus is ["2", "3"]: expected the text after `%tfgpu cpus`'),
    ({"settings": {"limit": []}}, "tfgpu: saved limit is []: expected the text after `%tfgpu limit`, or a list of "
                                  "them, one per GPU"),
])
def test_a_bad_shape_is_one_line_that_says_what(doc, message):
    with pytest.raises(saved.SavedError) as err:
        saved.normalise(doc)
    assert str(err.value) == message


def test_values_are_checked_by_the_magics_own_parsers():
    errors = saved.check({"settings": {"cpus": "0", "limit": "2XB", "growth": "maybe", "virtual": "2x1GB",
                                       "placement": "sometimes", "visible": "1,3"}})
    assert set(errors) == {"cpus", "limit", "growth", "placement"}
    assert all(e.startswith("tfgpu: ") and "\n" not in e for e in errors.values())
    assert "2XB" in errors["limit"] and "maybe" in errors["growth"]
    assert errors["placement"] == "tfgpu: saved placement is 'sometimes'; valid: on, off"
    # A percentage needs the GPU's total: accepted where NVML knows it, refused where a kernel start would refuse it.
    with_gpus = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus)
    assert saved.check({"settings": {"cpus": "4", "limit": "40% --gpu 1", "cpumem": "on"}}, with_gpus) == {}
    without = Controller(environ={}, nvml_snapshot=gpu_fakes.no_nvml)
    no_nvml = saved.check({"settings": {"limit": "40% --gpu 1"}}, without)
    assert set(no_nvml) == {"limit"} and "needs the GPU's total memory" in no_nvml["limit"], no_nvml
    # argparse's own complaints (extra words, an option without its value) are field errors too, not exceptions
    argv = saved.check({"settings": {"cpus": "3 4", "limit": "2GB --gpu"}})
    assert argv == {"cpus": "tfgpu: cpus: unrecognized arguments: 4; usage: %tfgpu cpus count",
                    "limit": argv["limit"]} and argv["limit"].startswith("tfgpu: limit: argument --gpu"), argv
    (key, message), = saved.check({"version": 9}).items()
    assert key == "" and message.startswith("tfgpu: these settings were saved by a newer")


def test_first_cell_is_the_extension_and_one_magic_per_value():
    doc = {"settings": {"placement": "on", "cpus": "3", "limit": ["1GB --gpu 0", "2GB --gpu 1"]}}
    assert saved.first_cell(doc) == ("%load_ext tfgpu_magic\n%tfgpu cpus 3\n%tfgpu limit 1GB --gpu 0\n"
                                     "%tfgpu limit 2GB --gpu 1\n%tfgpu placement on")


def test_wanted_is_the_settings_in_force_with_the_refused_ones_instead():
    rows = [{"setting": "cpus", "asked": "2"}, {"setting": "growth", "asked": "on"},
            {"setting": "limit[all]", "asked": "1GiB"}, {"setting": "limit[2]", "asked": "20GiB"}]
    refused = [{"setting": "cpus", "asked": "3", "message": "tfgpu: ... too late ..."}]
    assert saved.wanted(rows, refused, "on") == {"cpus": "3", "growth": "on", "limit": ["1GiB", "20GiB --gpu 2"],
                                                 "placement": "on"}
    assert saved.wanted([], [], "off") == {}
    # What it saves, a kernel start takes: settings that were in force together (growth and a limit never are:
    # the controller refuses that pair, and so does the check now).
    in_force = [row for row in rows if row["setting"] != "growth"]
    assert saved.check({"settings": saved.wanted(in_force, refused, "on")}) == {}
    assert "conflicts with growth on" in saved.check({"settings": saved.wanted(rows, refused, "on")})["limit"]


# -- one verdict: Check & save refuses exactly what a kernel start refuses -------------------------------------
VERDICT_DOCUMENTS = [  # (settings, refused?) on the fake's three GPUs (40, 80 and 24 GiB)
    ({"growth": "on", "limit": "2GB"}, True),
    ({"growth": "on", "virtual": "2x1GB"}, True),
    ({"growth": "on", "limit": "2GB --gpu 1"}, True),
    ({"visible": "0", "limit": "2GB --gpu 1"}, True),  # a limit on a GPU that visible hides
    ({"limit": "40% --gpu 0", "virtual": "2x1GB --gpu 0"}, True),
    ({"limit": "100GB --gpu 0"}, True),  # above the GPU's total, which NVML knows
    ({"virtual": "30GB,30GB --gpu 0"}, True),
    ({"limit": ["1GB --gpu 0", "2GB --gpu 0"]}, True),  # two entries for one GPU: the second would win
    ({"limit": ["1GB", "2GB"]}, True),
    ({"visible": "7"}, True),
    ({"visible": "auto:4"}, True),
    ({"cpus": "0"}, True),
    ({"visible": "auto:2", "limit": "2GB"}, False),
    ({"cpus": "3", "growth": "on"}, False),
    ({"limit": ["1GB --gpu 0", "2GB --gpu 1"]}, False),
    ({"visible": "1", "limit": "50% --gpu 1"}, False),
    ({"virtual": "2x2GB --gpu 2", "cpus": "2", "placement": "on"}, False),
]


def test_check_and_a_kernel_start_give_one_verdict(fake_nvml):
    """Each document through saved.check (what the sidebar's Check & save asks) and through the kernel start's
    apply, in a real shell over the fake NVML library: the same verdict, and the same message when refused."""
    fake_nvml.write(three_gpus())
    code = """
import json
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
c = Config(); c.HistoryManager.hist_file = ":memory:"
ip = InteractiveShell.instance(config=c)
from tfgpu_magic.core import saved
from tfgpu_magic.ipython import apply
from tfgpu_magic.ipython.magics import extension_magics
m = extension_magics(ip)
out = []
for settings in json.loads(DOCUMENTS):
    errors = saved.check({"settings": settings})
    result = apply.apply({"settings": settings}, ip)
    out.append({"check": next(iter(errors.values()), None), "apply": None if result["ok"] else result["message"]})
    m.controller.reset()
print(json.dumps(out))
""".replace("DOCUMENTS", repr(json.dumps([d for d, _ in VERDICT_DOCUMENTS])))
    verdicts = fake_nvml.run_json(code)
    for (settings, refused), verdict in zip(VERDICT_DOCUMENTS, verdicts, strict=True):
        assert verdict["check"] == verdict["apply"], (settings, verdict)
        assert (verdict["check"] is not None) is refused, (settings, verdict)
        if refused:
            assert verdict["check"].startswith("tfgpu: ") and one_answer(verdict["check"])


def test_a_document_refused_half_way_after_import_says_what_took_effect(shell):
    """A refusal of the moment (TensorFlow refusing growth) after cpus took effect: the result lists cpus as
    applied and growth as not applied, never "none applied" beside a setting in force."""
    from tfgpu_magic.core.runtime import Probe, TFState
    from tfgpu_magic.ipython import apply
    from tfgpu_magic.ipython.context import LOADED

    class RefusesGrowth(gpu_fakes.RecordingTF):
        def set_memory_growth(self, device, on):
            raise ValueError("memory growth cannot be set on this device")

    tf = RefusesGrowth(n_gpus=3)
    shell.tfgpu.controller = Controller(environ={}, nvml_snapshot=gpu_fakes.three_gpus, tensorflow=lambda: tf,
                                        prober=lambda: Probe(TFState.IMPORTED))
    LOADED[id(shell)] = shell.tfgpu
    try:
        result = apply.apply({"settings": {"cpus": "3", "growth": "on"}}, shell)
    finally:
        LOADED.pop(id(shell), None)
    assert result["ok"] is False and "memory growth cannot be set" in result["message"], result
    assert [(o["setting"], o["status"]) for o in result["outcomes"]] == [("cpus", "applied")], result
    assert result["not_applied"] == ["growth"]
    assert ("set_logical_device_configuration", "/physical_device:CPU:0", (None, None, None)) in tf.calls
