"""The magics in Chinese, in a real IPython shell: ``%config TfgpuMagics.language`` and the sidebar's language (the
comm's opening) choose the language of the refusals and of the words the sidebar gets; a refusal stays one line
that starts with ``tfgpu:`` and keeps what the user typed. The message rules of issue 37 hold in Chinese too, in
display columns (a CJK character takes two)."""

from __future__ import annotations

import re

import pytest
from IPython.core.error import UsageError
from message_sweep import IMPORTS_TENSORFLOW, one_answer, sweep

from tfgpu_magic.core import i18n, words
from tfgpu_magic.ipython.comm import SidebarChannel

CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(autouse=True)
def no_language_chosen(monkeypatch):
    """An English locale and no choice; whatever a test chooses (the option, the sidebar) goes with it."""
    for var in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("LANG", "C.UTF-8")
    monkeypatch.setattr(i18n, "_comm_language", None)
    monkeypatch.setattr(i18n, "_option_language", None)


@pytest.fixture
def configurable(shell):
    """``%config TfgpuMagics...`` finds the magics as %load_ext makes them findable."""
    shell.configurables.append(shell.tfgpu)
    yield shell
    shell.configurables.remove(shell.tfgpu)
    # The shell's config outlives this test: a later test's magics would load the language from it.
    shell.config.TfgpuMagics.pop("language", None)
    shell.tfgpu.language = ""


def refusal(shell, line: str) -> str:
    with pytest.raises(UsageError) as err:
        shell.run_line_magic("tfgpu", line)
    return str(err.value)


def test_the_option_turns_a_bad_value_refusal_chinese(configurable, capsys):
    assert "expected" in refusal(configurable, "cpus two")  # English by default
    configurable.run_line_magic("config", 'TfgpuMagics.language = "zh_CN"')
    assert i18n.language() == "zh_CN"
    for line, typed in (("cpus two", "'two'"), ("limit 12XB", "'12XB'"), ("growth maybe", "'maybe'"),
                        ("visible 1,1", "'1,1'"), ("bogus", "'bogus'"), ("limit 1GB --gpu 7", "GPU 7")):
        message = refusal(configurable, line)
        first = message.splitlines()[0]
        assert first.startswith("tfgpu: ") and CJK.search(first) and typed in first, message
        assert one_answer(message) and i18n.width(first) <= 120, message
    # What became of a setting, in the language in force when it is said (never fixed at import).
    configurable.run_line_magic("tfgpu", "cpus 2")
    assert capsys.readouterr().out == "tfgpu: %tfgpu cpus 2: 等待导入 (在导入 TensorFlow 时应用)\n"
    configurable.run_line_magic("config", 'TfgpuMagics.language = "en"')
    assert refusal(configurable, "cpus two") == "tfgpu: bad CPU count 'two': expected a whole number from 1 to 256"
    configurable.run_line_magic("tfgpu", "cpus 3")
    assert capsys.readouterr().out == "tfgpu: %tfgpu cpus 3: waiting for import (applied when TensorFlow is imported)\n"


def test_a_bad_language_option_is_one_line_and_keeps_the_last_good_one(configurable, capsys):
    configurable.run_line_magic("config", 'TfgpuMagics.language = "zh_CN"')
    configurable.run_line_magic("config", "TfgpuMagics.language = ['zh']")
    # One line per magics object this test process has made (they share the shell's config): the same line.
    (line,) = set(capsys.readouterr().err.splitlines())
    assert line == ("tfgpu: TfgpuMagics.language ['zh'] 无效：应为语言代码，如 zh_CN 或 en，或用 \"\" 表示自动；"
                    "TfgpuMagics.language 保持为 'zh_CN'")  # said in the language in force
    assert i18n.language() == "zh_CN"
    configurable.run_line_magic("config", 'TfgpuMagics.language = "fr_FR"')  # no catalogue: English
    assert "expected" in refusal(configurable, "cpus two")


class OpenedComm:
    """The parts of ipykernel's Comm the channel uses (as tests/ipython/test_live_pause.py); what it sends is kept."""

    def __init__(self, comm_id: str):
        self.comm_id, self.sent = comm_id, []

    def send(self, data):
        self.sent.append(data)

    def on_close(self, cb):
        pass

    def on_msg(self, cb):
        pass

    def close(self):
        pass


def test_the_sidebars_language_switches_the_kernel_and_wins_over_the_option(configurable):
    channel = SidebarChannel(configurable.tfgpu)
    try:
        comm = OpenedComm("zh")
        channel._opened(comm, {"content": {"data": {"request": "subscribe", "version": 1, "language": "zh-CN"}}})
        state = next(m for m in comm.sent if m.get("type") == "state")
        assert state["words"]["setting_states"]["refused"]["words"] == "已拒绝"
        assert state["words"]["missing"] == words.MISSING == "不可用"
        assert CJK.search(refusal(configurable, "cpus two"))
        # JupyterLab in English: English, whatever the option says.
        configurable.run_line_magic("config", 'TfgpuMagics.language = "zh_CN"')
        english = OpenedComm("en")
        channel._opened(english, {"content": {"data": {"request": "subscribe", "version": 1, "language": "en"}}})
        assert next(m for m in english.sent if m.get("type") == "state")["words"]["missing"] == "n/a"
        assert not CJK.search(refusal(configurable, "cpus two"))
        # A sidebar that says nothing (an older one) leaves the language as it was.
        channel._opened(OpenedComm("old"), {"content": {"data": {"request": "subscribe", "version": 1}}})
        assert i18n.language() == ""
    finally:
        channel.unregister()


@pytest.mark.parametrize("machine", ["laptop", "three GPUs", "MIG"])
def test_every_refusal_keeps_the_rules_in_chinese(configurable, machine):
    """Every line the English sweep tries (tests/ipython/test_every_message.py), in Chinese: a ``tfgpu:`` answer's
    first line is within 120 display columns; most of them are Chinese."""
    import gpu_fakes

    from tfgpu_magic.core import nvml

    machines = {"laptop": nvml.snapshot, "three GPUs": gpu_fakes.three_gpus, "MIG": gpu_fakes.mig_gpus}
    configurable.tfgpu.controller._nvml_snapshot = machines[machine]
    configurable.run_line_magic("config", 'TfgpuMagics.language = "zh_CN"')
    configurable.tfgpu.controller.installed_cpu_only = lambda: True
    answers = [a for a in sweep(configurable, "before import", without=IMPORTS_TENSORFLOW)
               if a["answer"].startswith("tfgpu: ")]
    assert len(answers) > 50
    too_wide = [a for a in answers if i18n.width(a["answer"].splitlines()[0]) > 120]
    assert not too_wide, "\n".join(f"{a['line']}: {a['answer']}" for a in too_wide)
    chinese = [a for a in answers if CJK.search(a["answer"].splitlines()[0])]
    assert len(chinese) >= len(answers) // 2, [a["answer"] for a in answers if a not in chinese]


def test_a_panel_made_in_chinese_has_chinese_tabs_buttons_and_refusals(configurable):
    from tfgpu_magic.ipython.panel import Panel

    configurable.run_line_magic("config", 'TfgpuMagics.language = "zh_CN"')
    panel = Panel(model=configurable.tfgpu.live, magics=configurable.tfgpu)
    try:
        tabs = next(w for w in panel.children if hasattr(w, "titles"))
        assert list(tabs.titles) == ["内存", "设备", "单元格", "设备放置", "设置"]
        assert panel._restart.description == "重启内核并应用" and panel._resume.description == "继续"
        labels = set()
        stack = list(panel.children)
        while stack:
            widget = stack.pop()
            stack += list(getattr(widget, "children", ()))
            if type(widget).__name__ == "Label":
                labels.add(widget.value)
        assert {"显存按需增长", "显存上限", "可见 GPU", "设备放置日志"} <= labels, labels
        said = panel.apply("cpus", "two")  # the magic's own refusal, as the panel shows it
        assert said.startswith("tfgpu: ") and "'two'" in said and CJK.search(said), said
    finally:
        panel.close()
