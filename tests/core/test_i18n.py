"""core/i18n.py: the package's words through the committed zh_CN catalogue, English for a language without one, the
order that picks the language (a call's > the sidebar's > the option > the locale), the server's per-call
language, which no other thread or request sees, and the command line in a Chinese locale."""

from __future__ import annotations

import json
import re
import subprocess
import threading

import pytest
from clipipes import ENTRY_POINTS
from fakenvml import three_gpus

from tfgpu_magic.core import i18n, words
from tfgpu_magic.core.plan import PlanError, parse_count, parse_size
from tfgpu_magic.core.settings.base import too_late

CJK = re.compile(r"[\u4e00-\u9fff]")
LOCALE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


@pytest.fixture(autouse=True)
def english_process(monkeypatch):
    """A process whose locale says nothing, with no language chosen; what a test chooses goes with it."""
    for var in LOCALE_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(i18n, "_comm_language", None)
    monkeypatch.setattr(i18n, "_option_language", None)


def test_the_catalogue_is_compiled_beside_the_package():
    assert (i18n.LOCALEDIR / "zh_CN" / "LC_MESSAGES" / "tfgpu_magic.mo").is_file()


@pytest.mark.parametrize(("code", "normal"), [
    ("zh-CN", "zh_CN"), ("zh_CN.UTF-8", "zh_CN"), ("zh", "zh_CN"), ("zh-Hans", "zh_CN"), ("zh_Hans_CN", "zh_CN"),
    ("en", ""), ("en_US.UTF-8", ""), ("C", ""), ("POSIX", ""), ("C.UTF-8", ""), ("fr_FR", "fr_FR"), (3, ""),
])
def test_codes_are_normalized(code, normal):
    assert i18n.normalize(code) == normal


def test_a_word_in_chinese_and_the_same_word_in_english():
    assert words.setting_state("refused") == "refused" and words.MISSING == "n/a"
    i18n.set_language("zh-CN")
    assert words.setting_state("refused") == "已拒绝"
    assert words.MISSING == "不可用" and CJK.search(words.NO_NAME)
    assert words.missing("no_permission") == "不可用（无权限）"
    assert words.to_dict()["tf_states"]["not_imported"] == "未导入"
    assert words.setting_state("some_new_state") == "some new state"  # a key without words reads as itself


def test_a_language_without_a_catalogue_reads_english():
    for code in ("fr_FR", "de", "xx-YY", "en", "C"):
        i18n.set_language(code)
        assert words.setting_state("pending") == "waiting for import"
        assert i18n._("TensorFlow's runtime has started") == "TensorFlow's runtime has started"
        assert i18n.ngettext("{n} process", "{n} processes", 2) == "{n} processes"


def test_the_order_a_call_then_the_sidebar_then_the_option_then_the_locale(monkeypatch):
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    assert i18n.language() == "zh_CN"  # the locale
    monkeypatch.setenv("LC_ALL", "C")
    assert i18n.language() == ""  # gettext's order: LC_ALL before LANG
    monkeypatch.setenv("LANGUAGE", "zh_CN:en")
    assert i18n.language() == "zh_CN"  # LANGUAGE first, its first entry
    i18n.set_option("en")
    assert i18n.language() == ""  # the option over the locale
    i18n.set_language("zh-CN")
    assert i18n.language() == "zh_CN"  # JupyterLab's language over the option
    with i18n.using("en"):
        assert i18n.language() == "" and words.MISSING == "n/a"  # one call's over everything
    assert i18n.language() == "zh_CN"
    i18n.set_language(None)
    assert i18n.language() == ""  # forgotten: the option decides again
    i18n.set_option("")
    assert i18n.language() == "zh_CN"  # "" is automatic: the locale


def test_a_refusal_in_chinese_keeps_its_ascii_start_and_what_was_typed():
    i18n.set_language("zh_CN")
    message = str(too_late("%tfgpu cpus 2", i18n._("TensorFlow's runtime has started")))
    assert message.startswith("tfgpu: `%tfgpu cpus 2` ") and CJK.search(message) and "\n" not in message
    with pytest.raises(PlanError) as err:
        parse_size("12XB", what="limit")
    first = str(err.value).splitlines()[0]
    assert first.startswith("tfgpu: ") and "'12XB'" in first and "MiB" in first and CJK.search(first)
    with pytest.raises(PlanError) as err:
        parse_count("two", what=i18n._("CPU count"))
    assert "'two'" in str(err.value) and "256" in str(err.value) and CJK.search(str(err.value))
    with i18n.using("en"):
        assert str(too_late("%tfgpu cpus 2", "x")) == (
            "tfgpu: `%tfgpu cpus 2` is too late: x; restart the kernel and run it first")


def test_a_long_refusal_is_measured_in_display_columns():
    assert i18n.width("tfgpu") == 5 and i18n.width("为时已晚") == 8
    i18n.set_language("zh_CN")
    why = i18n._("TensorFlow has listed its devices")
    # A command whose Chinese refusal has at most 120 characters but more than 120 columns: two lines.
    command = next(c for c in ("%tfgpu visible " + "0," * n + "1" for n in range(60))
                   if len(str(too_late(c, why)).replace("\n  ", "; ")) <= 120 < i18n.width(
                       str(too_late(c, why)).replace("\n  ", "; ")))
    first, *more = str(too_late(command, why)).splitlines()
    assert i18n.width(first) <= 120 and more == ["  " + i18n._("restart the kernel and run it first")]


def test_the_servers_language_is_per_call_and_per_thread():
    seen: dict[str, str] = {}
    started, release = threading.Event(), threading.Event()

    def other_request():
        with i18n.using("en"):
            started.set()
            release.wait(5)
            seen["other"] = words.MISSING

    thread = threading.Thread(target=other_request)
    thread.start()
    started.wait(5)
    with i18n.using("zh-CN"):
        release.set()
        thread.join(5)
        seen["this"] = words.MISSING
    assert seen == {"other": "n/a", "this": "不可用"}
    assert words.MISSING == "n/a"  # neither call's language stays behind
    with i18n.using(None):
        assert i18n.language() == ""  # no language asked: the usual rule


def test_a_shared_answer_is_said_again_in_a_callers_language_and_left_as_it_was():
    from tfgpu_magic.core import idle

    work = idle.gpu_work([idle.Device(1, 40, (idle.Use("k", 4242, True, 2048, 60),))])["k"]
    answer = {"kernels": [{"activity": idle.describe(running=False, idle_s=90, work=None)},
                          {"activity": idle.describe(running=False, idle_s=None, work=work)}],
              "figures": (1, 2), "note": "plain"}
    english = json.dumps(answer)  # a said sentence is a str to JSON
    assert [k["activity"]["text"] for k in answer["kernels"]] == [
        "idle 1 min", "busy on GPU 1 (child pid 4242, 60% SM)"]
    with i18n.using("zh-CN"):
        chinese = i18n.localize(answer)
    assert [k["activity"]["text"] for k in chinese["kernels"]] == [
        "空闲 1 min", "在 GPU 1 上忙碌（子进程 pid 4242，60% SM）"]
    assert chinese["figures"] == (1, 2) and chinese["note"] == "plain"
    assert json.dumps(answer) == english  # the shared answer keeps its language
    with i18n.using("en"):
        assert i18n.localize(chinese) == chinese  # plain strings stay as they are


def test_the_command_line_speaks_its_locales_language(fake_nvml):
    fake_nvml.write(three_gpus())
    base = {k: v for k, v in fake_nvml.env.items() if k not in LOCALE_VARS}

    def status(lang: str) -> str:
        proc = subprocess.run([*ENTRY_POINTS["tfgpu"], "status"], capture_output=True, text=True, timeout=120,
                              env={**base, "LANG": lang})
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        return proc.stdout

    chinese, english = status("zh_CN.UTF-8"), status("C.UTF-8")
    assert "进程（*：本命令）" in chinese and "名称" in chinese and "显存" in chinese, chinese
    assert "processes (*: this command)" in english and not CJK.search(english), english
    # The table's columns line up in display columns: each row's GPU name starts where the head's "名称" does.
    lines = chinese.splitlines()
    head = next(line for line in lines if "名称" in line)
    column = i18n.width(head[:head.index("名称")])
    rows = [line for line in lines if "Tesla" in line or "NVIDIA" in line]
    assert rows and all(i18n.width(row[:row.index(row.split()[2])]) == column for row in rows), chinese
    # Sentences wrap at 100 columns as in English, between Chinese characters where there are no spaces.
    assert "然后重启使用它的内核" in "".join(line.strip() for line in lines), chinese  # the shell's words
    assert max(i18n.width(line) for line in lines) <= 100, chinese
