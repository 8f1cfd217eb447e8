"""Adding a setting is one file plus one registry line: a throwaway setting, registered here as such a file would
be, is at once in `%tfgpu help`, Tab completion, the magic, the panel's form, `configure()`'s keywords, the saved
settings' order, the sidebar's words and `%tfgpu export`, with no face touched."""

from __future__ import annotations

import inspect

import pytest
from IPython.core.completer import provisionalcompleter, rectify_completions
from IPython.core.error import UsageError

import tfgpu_magic
from tfgpu_magic.core import saved, settings
from tfgpu_magic.core.changes import from_keywords
from tfgpu_magic.core.plan import Plan, parse_on_off
from tfgpu_magic.core.runtime import Status, Step
from tfgpu_magic.core.settings.base import Control, Setting, Words
from tfgpu_magic.ipython import completion, panel
from tfgpu_magic.ipython.panel import Panel


class Spill(Setting):
    """What a file core/settings/spill.py would hold."""

    name = "spill"
    value_name = "state"
    words = Words(usage="%tfgpu spill on|off", summary="a throwaway setting of the registry's test",
                  help="Spill tensors to host memory. Only the registry's test knows it.",
                  examples=("%tfgpu spill on",), tab=("on", "off"), placeholder="on|off",
                  control=Control("host spill", "choice", ("on", "off"), "off"))

    def parse(self, text: str) -> bool:
        return parse_on_off(text, what=self.name)

    def step(self, adapter, plan: Plan) -> Step:
        return Step(Status.APPLIED, "spilled" if self.value(plan) else "")

    def export_tf2(self, plan: Plan, totals_mib: dict) -> list[str]:
        return [f"tf.config.experimental.enable_spill({self.value(plan)})"] if self.asked(plan) else []


@pytest.fixture
def spill():
    setting = Spill()
    settings.register(setting)  # the one registry line
    yield setting
    settings.unregister(setting)
    assert "spill" not in settings.names()


def run(shell, line: str, capsys) -> str:
    shell.run_line_magic("tfgpu", line)
    return capsys.readouterr().out


def test_help_lists_it_and_explains_it(shell, spill, capsys):
    assert "%tfgpu spill on|off" in run(shell, "help", capsys)
    explained = run(shell, "help spill", capsys)
    assert "Spill tensors to host memory" in explained and "  %tfgpu spill on" in explained
    assert "%tfgpu spill on|off" in tfgpu_magic.ipython.magics.TfgpuMagics.tfgpu.getdoc()  # %tfgpu?


def test_tab_offers_it_and_its_words(shell, spill):
    completion.register(shell)
    try:
        with provisionalcompleter():
            def texts(code: str) -> list[str]:
                return [c.text for c in rectify_completions(code, shell.Completer.completions(code, len(code)))]

            assert texts("%tfgpu sp") == ["spill"]
            assert texts("%tfgpu spill ") == ["on", "off"]
    finally:
        completion.unregister(shell)


def test_the_magic_applies_it_and_refuses_a_bad_value_in_one_line(shell, spill, capsys):
    run(shell, "spill on", capsys)
    assert shell.tfgpu.controller.plan.spill is True
    rows = {row["setting"]: row for row in shell.tfgpu.controller.settings()}
    assert rows["spill"]["asked"] == "on" and rows["spill"]["status"] == "pending"
    with pytest.raises(UsageError, match=r"^tfgpu: bad value 'maybe' for spill: expected on or off$"):
        shell.run_line_magic("tfgpu", "spill maybe")


def test_the_panel_has_a_control_for_it(shell, spill):
    assert ("spill", spill.words.control) in panel.controls()
    p = Panel(model=shell.tfgpu.live, magics=shell.tfgpu)
    try:
        assert "spill" in p._inputs and p._inputs["spill"].value == "off"
        p.apply("spill", "on")
        assert shell.tfgpu.controller.plan.spill is True
    finally:
        p.close()


def test_configure_takes_it_as_a_keyword(shell, spill):
    assert "spill" in inspect.signature(tfgpu_magic.configure).parameters
    [change] = from_keywords(spill=True)
    outcome, = shell.tfgpu.controller.change_all([change])
    assert outcome.setting == "spill" and outcome.status is Status.PENDING
    with pytest.raises(ValueError, match="unknown keyword 'spil'"):
        from_keywords(spil=True)


def test_a_notebook_may_save_it_and_the_sidebar_hears_of_it(shell, spill, capsys):
    assert saved.order()[-2:] == ("spill", "placement")
    assert saved.check({"settings": {"spill": "on", "cpus": "2"}}, shell.tfgpu.controller) == {}
    assert saved.first_cell({"settings": {"spill": "on", "cpus": "2"}}).splitlines()[1:] == [
        "%tfgpu cpus 2", "%tfgpu spill on"]  # in the registry's order
    assert {"name": "spill", "per_gpu": False, "placeholder": "on|off", "usage": "%tfgpu spill on|off"} in \
        settings.wire_words()
    run(shell, "spill on", capsys)
    assert "tf.config.experimental.enable_spill(True)" in run(shell, "export", capsys)
