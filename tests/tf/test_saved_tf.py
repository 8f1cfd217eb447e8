"""Settings saved in a notebook's metadata, applied in a shell with real TensorFlow in a fresh process: all or
nothing and before TensorFlow starts, what a refusal makes a restart apply whichever face was refused, and a
document that arrives after TensorFlow's import (the rest, without TensorFlow, is tests/ipython/test_saved.py)."""

from __future__ import annotations

import json

import pytest
from harness import run_tf

# -- applying in a shell ---------------------------------------------------------------------------------------


@pytest.mark.tf
def test_apply_is_all_or_nothing_and_lands_before_tensorflow_starts():
    run_tf("""
import json, os, sys
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
_c = Config(); _c.HistoryManager.hist_file = ":memory:"
ip = InteractiveShell.instance(config=_c)
from tfgpu_magic.ipython import apply as saved

# One bad value: nothing applied, the extension loaded all the same, nothing in the environment.
env_before = dict(os.environ)
bad = saved.apply({"settings": {"cpus": "3", "cpumem": "on", "limit": "2XB"}}, ip)
assert bad["ok"] is False and bad["message"].startswith("tfgpu: ") and "2XB" in bad["message"], bad
from tfgpu_magic.ipython.context import LOADED
m = LOADED[id(ip)]
assert m.controller.plan.is_empty() and dict(os.environ) == env_before
assert "tfgpu" in ip.magics_manager.magics["line"]

good = saved.apply_json(json.dumps({"version": 1, "apply_on_start": True,
                                   "settings": {"cpus": "3", "placement": "on"}}), ip)
assert good is saved.last_result() and good["ok"] is True, good
assert [(o["setting"], o["asked"], o["status"]) for o in good["outcomes"]] == [("cpus", "3", "pending")]
assert good["placement"] == "on" and m.placement.mode == "on"
assert "tensorflow" not in sys.modules  # applying imports no TensorFlow
ip.run_cell("import tensorflow as tf; n = len(tf.config.list_logical_devices('CPU'))")
assert ip.user_ns["n"] == 3

# Too late now: refused whole, with the magic's message.
late = saved.apply({"settings": {"cpus": "2"}}, ip)
assert late["ok"] is False and "is too late" in late["message"], late
assert json.loads(json.dumps(late._repr_json_())) == dict(late)
print("ok")
""")


@pytest.mark.tf
def test_a_refusal_makes_the_restart_settings_and_the_panel_says_the_two_steps():
    proc = run_tf("""
import json
""" + __import__("harness").SHELL_PRELUDE + """
from tfgpu_magic.ipython.context import LOADED
m = LOADED[id(ip)]
magic("cpus 2")
magic("placement on")
cell("import tensorflow as tf; tf.constant(1)")
r = cell("%tfgpu cpus 3")
assert not r.success and "is too late" in str(r.error_in_exec)
m.live.set_placement(m.placement.live_section())  # as a view does when it opens
m.live.refresh()
kernel = m.live.state()["kernel"]
print(json.dumps({"refused": kernel["refused"], "wanted": kernel["wanted"]}))
from tfgpu_magic import Panel
p = Panel()
print(json.dumps({"shown": p._restart.layout.display, "text": p.restart_and_apply(),
                  "html": p._html["message"].value}))
magic("cpus 2")  # the value in force again: nothing to restart for
print(json.dumps(m.live.state()["kernel"]["refused"]))
p.close()
""")
    first, panel, after = (json.loads(line) for line in proc.stdout.strip().splitlines() if line[:1] in "[{")
    assert first["refused"] == [{"setting": "cpus", "asked": "3", "message": first["refused"][0]["message"]}]
    assert first["refused"][0]["message"].startswith("tfgpu: `%tfgpu cpus 3` is too late")
    assert first["wanted"] == {"cpus": "3", "placement": "on"}
    assert panel["shown"] == ""
    # The code to paste one line a line, exactly as typed: joined by "; " it failed (`%load_ext` took the rest).
    said, _, code = panel["text"].partition("\n")
    assert said == ("tfgpu: no GPUs sidebar is listening to this kernel; do it in two steps: restart the kernel "
                    "(Kernel > Restart Kernel), then run this cell first:")
    assert code == "%load_ext tfgpu_magic\n%tfgpu cpus 3\n%tfgpu placement on"
    assert panel["html"].count("<pre") == 1 and f">{code}</pre>" in panel["html"]
    assert after == []
    pasted = run_tf(__import__("harness").SHELL_PRELUDE.replace('ip.run_line_magic("load_ext", "tfgpu_magic")', "")
                    + f"r = ip.run_cell({code!r})\nassert r.success, r.error_in_exec\n"
                      "from tfgpu_magic.ipython.context import LOADED\n"
                      "print(LOADED[id(ip)].controller.settings())")
    assert "'setting': 'cpus', 'asked': '3'" in pasted.stdout, pasted.stdout


# -- every face's refusal reaches the views -------------------------------------------------------------------
@pytest.mark.tf
@pytest.mark.parametrize("face", ["api", "saved", "panel"])
def test_a_refusal_from_any_face_shows_the_panels_restart_button(face):
    """The controller records a refusal as too late whichever face asked, so the panel (open before it, or
    opened after) offers "Restart kernel and apply" with that setting; before this, only the magic's did."""
    proc = run_tf("""
import json
""" + __import__("harness").SHELL_PRELUDE + """
import tfgpu_magic
from tfgpu_magic import Panel
from tfgpu_magic.ipython import apply
cell("import tensorflow as tf; tf.constant(1)")
early = Panel()  # open before the refusal: it must follow
face = FACE
if face == "api":
    try:
        tfgpu_magic.configure(cpus=3)
        raise SystemExit("configure(cpus=3) was not refused")
    except ValueError as err:
        assert "is too late" in str(err), err
elif face == "saved":
    result = apply.apply({"settings": {"cpus": "3"}}, ip)
    assert result["ok"] is False and "is too late" in result["message"], result
else:
    said = early.apply("cpus", "3")
    assert "is too late" in said, said
late = Panel()  # opened after it
print(json.dumps({"early": early._restart.layout.display, "late": late._restart.layout.display,
                  "wanted": early._state["kernel"]["wanted"], "refused": [r["asked"] for r in
                  early._state["kernel"]["refused"]]}))
tfgpu_magic.configure(cpus=1)  # the value in force: the refusal is moot
print(json.dumps({"after": early._restart.layout.display, "refused": early._state["kernel"]["refused"]}))
early.close(); late.close()
""".replace("FACE", repr(face)))
    shown, moot = (json.loads(line) for line in proc.stdout.strip().splitlines() if line.startswith("{"))
    assert shown == {"early": "", "late": "", "wanted": {"cpus": "3"}, "refused": ["3"]}, shown
    assert moot == {"after": "none", "refused": []}, moot


# -- TensorFlow imported before the saved settings arrive ---------------------------------------------------
@pytest.mark.tf
def test_after_tensorflow_was_imported_a_refused_document_applied_nothing():
    """TensorFlow imported before the saved settings arrive (a startup file): {cpus 3, growth on, limit 2GB} is
    refused by the rules Check & save runs too (growth with a limit), before any of it reaches TensorFlow, so
    "none applied" is true: one logical CPU, no setting in force."""
    proc = run_tf("""
import json
import tensorflow as tf
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
c = Config(); c.HistoryManager.hist_file = ":memory:"
ip = InteractiveShell.instance(config=c)
from tfgpu_magic.ipython import apply
from tfgpu_magic.ipython.magics import extension_magics
result = apply.apply({"settings": {"cpus": "3", "growth": "on", "limit": "2GB"}}, ip)
m = extension_magics(ip)
print(json.dumps({"ok": result["ok"], "outcomes": result["outcomes"], "message": result["message"],
                  "cpus": len(tf.config.list_logical_devices("CPU")), "settings": m.controller.settings()}))
""")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["ok"] is False and out["outcomes"] == [] and "conflicts with growth on" in out["message"], out
    assert out["cpus"] == 1 and out["settings"] == [], out


