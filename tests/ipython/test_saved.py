"""Settings saved in a notebook's metadata (tfgpu_magic/core/saved.py, applied by tfgpu_magic/ipython/apply.py):
their shape, the magics' checks of their values, applying them all or nothing (in a shell, and in a real kernel
the way the sidebar does at kernel start), what a refusal makes a restart apply, whichever face was refused, and
the first cell written for running the notebook elsewhere."""

from __future__ import annotations

import json
import shutil
import subprocess

import gpu_fakes
import nbclient
import nbformat
import pytest
from fakenvml import three_gpus
from harness import ROOT, frontend_code, kernel_folder, run_tf, user_env

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
    ({"settings": {"gpus": "1"}}, "tfgpu: unknown saved setting 'gpus'; valid: visible, cpus, cpumem, growth, limit, "
                                  "virtual, placement"),
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


# -- in a real kernel, as the sidebar does it ------------------------------------------------------------------


def silent_apply(client, document: dict) -> dict:
    """The sidebar's call at kernel start: silent, not in the history, the result through user_expressions."""
    code, expression = frontend_code(document)
    msg_id = client.execute(code, silent=True, store_history=False, user_expressions={"tfgpu": expression})
    reply = client.get_shell_msg(timeout=60)
    assert reply["parent_header"]["msg_id"] == msg_id
    return reply["content"]


@pytest.mark.kernel
@pytest.mark.tf
def test_silent_apply_at_kernel_start_runs_before_the_first_cell_and_leaves_no_trace():
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder())
    try:
        reply = silent_apply(client, {"version": 1, "apply_on_start": True,
                                      "settings": {"cpus": "3", "placement": "on"}})
        assert reply["status"] == "ok", reply
        result = reply["user_expressions"]["tfgpu"]["data"]["application/json"]
        assert result["ok"] is True and result["outcomes"][0]["status"] == "pending", result
        out = []
        # A lesson's own first line: silent, the saved settings loaded the extension already.
        first = client.execute_interactive(
            "%load_ext tfgpu_magic\nimport tensorflow as tf\n"
            "print([d.name for d in tf.config.list_logical_devices('CPU')])",
            timeout=120, output_hook=lambda m: out.append(m["content"].get("text", "")) if m["msg_type"] == "stream"
            else None)
        assert first["content"]["status"] == "ok"
        assert first["content"]["execution_count"] == 1  # the silent call took no number and no history
        text = "".join(out)
        assert "'/device:CPU:2'" in text and "'/device:CPU:3'" not in text, text
        assert "cpus 3: applied (3 logical CPUs)" in text  # the import's cell says what became of them
        assert "already loaded" not in text, text
        # The frontend reconnecting (a page reload) sends the same document: the first result, nothing again.
        again = silent_apply(client, {"version": 1, "apply_on_start": True,
                                      "settings": {"cpus": "3", "placement": "on"}})
        assert again["user_expressions"]["tfgpu"]["data"]["application/json"] == result
        # Another document once the user has run cells is not applied: it would undo what they typed since.
        later = silent_apply(client, {"settings": {"cpus": "2"}})
        refused = later["user_expressions"]["tfgpu"]["data"]["application/json"]
        assert refused["ok"] is False and "has run cells already" in refused["message"], refused
        assert refused["reason"] == "ran_cells"  # not a refusal of the settings: the sidebar says it neutrally
        # From the lesson's `%load_ext` on, IPython's extension manager knows it: `%unload_ext` undoes it.
        out.clear()
        client.execute_interactive("%unload_ext tfgpu_magic\n%tfgpu", timeout=60, output_hook=lambda m: out.append(
            m["content"].get("text", "") or m["content"].get("evalue", "")) if m["msg_type"] in ("stream", "error")
            else None)
        assert "not loaded" not in "".join(out) and "Line magic function `%tfgpu` not found" in "".join(out), out
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


# -- the first cell, run elsewhere -------------------------------------------------------------------------------


DEVICES = "import tensorflow as tf\nprint(json.dumps([d.name for d in tf.config.list_logical_devices()]))"


def devices_by_first_cell(first_source: str) -> list[str]:
    """Run the written first cell and a device listing with nbclient, as nbconvert or papermill would."""
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(first_source), nbformat.v4.new_code_cell("import json\n" + DEVICES)]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120,
                                     resources={"metadata": {"path": kernel_folder()}})
    with client.setup_kernel(env=user_env(), cwd=kernel_folder()):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    printed = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.get("name") == "stdout")
    return json.loads(next(line for line in printed.splitlines() if line.startswith("[")))


def devices_by_silent_apply(document: dict) -> list[str]:
    """Apply as the sidebar does at kernel start, then list the devices in the first cell."""
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env=user_env(), cwd=kernel_folder())
    try:
        assert silent_apply(client, document)["user_expressions"]["tfgpu"]["data"]["application/json"]["ok"]
        out = []
        client.execute_interactive("import json\n" + DEVICES, timeout=120, output_hook=lambda m: out.append(
            m["content"].get("text", "")) if m["msg_type"] == "stream" else None)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return json.loads(next(line for line in "".join(out).splitlines() if line.startswith("[")))


def first_cell_by_the_sidebar(document: dict) -> str:
    """What the sidebar's "Write as first cell" writes: labextension/src/model/saved.ts's firstCellSource, compiled."""
    node = shutil.which("node")
    assert node and (ROOT / "lib" / "model" / "index.js").exists(), "needs Node.js and lib/ (make setup builds it)"
    script = ("import('./lib/model/index.js')"
              ".then(m => process.stdout.write(m.firstCellSource(JSON.parse(process.argv[1]))))")
    proc = subprocess.run([node, "-e", script, json.dumps(document)], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("document", [
    {"version": 1, "apply_on_start": True, "settings": {"placement": "on", "cpus": "3", "visible": "all"}},
    {"settings": {"limit": ["1GB --gpu 0", "2GB --gpu 1"], "virtual": "2x1GB --gpu 2", "growth": "off",
                  "cpumem": "on"}},
])
def test_the_sidebar_writes_the_first_cell_the_kernel_would(document):
    assert first_cell_by_the_sidebar(document) == saved.first_cell(document)


@pytest.mark.kernel
@pytest.mark.tf
def test_the_written_first_cell_gives_the_devices_that_applying_gives():
    document = {"version": 1, "apply_on_start": True, "settings": {"cpus": "3"}}
    by_cell = devices_by_first_cell(first_cell_by_the_sidebar(document))
    assert by_cell == devices_by_silent_apply(document) == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]


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
            assert verdict["check"].startswith("tfgpu: ") and "\n" not in verdict["check"]


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
