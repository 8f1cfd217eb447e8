"""Hardening checks that need real TensorFlow (its runtime starts once per process) or a whole
IPython started from its own profile: each runs in a fresh process."""

import re
import subprocess
import sys
import textwrap

import pytest
from harness import SHELL_PRELUDE, run_tf, tf_env

NO_COLOR = SHELL_PRELUDE.replace('_c.HistoryManager.hist_file = ":memory:"',
                                 '_c.HistoryManager.hist_file = ":memory:"; _c.InteractiveShell.colors = "NoColor"')


def test_defaults_in_a_profiles_ipython_config_load_and_give_three_cpus(tmp_path):
    """Item 1's acceptance: `ipython` itself, its profile's ipython_config.py setting default_cpus."""
    profile = tmp_path / "ipython" / "profile_default"
    profile.mkdir(parents=True)
    (profile / "ipython_config.py").write_text("c.TfgpuMagics.default_cpus = 3\nc.TfgpuMagics.default_growth = True\n")
    script = tmp_path / "session.ipy"
    script.write_text(textwrap.dedent("""\
        %load_ext tfgpu_magic
        import tensorflow as tf
        print("cpus", [d.name.split("device:")[-1] for d in tf.config.list_logical_devices("CPU")])
        %tfgpu status
        """))
    ipython = [sys.executable, "-m", "IPython", f"--ipython-dir={tmp_path / 'ipython'}", "--no-banner",
               "--HistoryManager.hist_file=:memory:", str(script)]
    proc = subprocess.run(ipython, capture_output=True, text=True, env=tf_env(), timeout=180)
    assert proc.returncode == 0, proc.stderr
    assert "cpus ['CPU:0', 'CPU:1', 'CPU:2']" in proc.stdout, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr and "AttributeError" not in proc.stderr
    assert re.search(r"growth\s+on\s+no GPU to apply to", proc.stdout), proc.stdout  # the vocabulary's words


def test_bad_defaults_from_a_config_or_percent_config_are_one_line_and_change_nothing():
    proc = run_tf("""
import sys
from IPython.core.interactiveshell import InteractiveShell
from traitlets.config import Config
c = Config(); c.HistoryManager.hist_file = ":memory:"
c.TfgpuMagics.default_cpus = -1
c.TfgpuMagics.default_growth = "maybe"
ip = InteractiveShell.instance(config=c)
ip.run_line_magic("load_ext", "tfgpu_magic")
m = ip.magics_manager.registry["TfgpuMagics"]
print("after load", m.default_cpus, m.default_growth, m.controller.plan.is_empty())
for value in ("100000", "-1", "'three'", "[3]", "10**5000"):
    ip.run_line_magic("config", f"TfgpuMagics.default_cpus = {value}")
print("after config", m.default_cpus, m.controller.plan.is_empty())
ip.run_line_magic("config", "TfgpuMagics.default_cpus = 2")
import tensorflow as tf
print("cpus", len(tf.config.list_logical_devices("CPU")))
""")
    err = [line for line in proc.stderr.splitlines() if line.startswith("tfgpu:")]
    assert len(err) == 7, proc.stderr  # two from the config, five from %config: one line each
    assert all("TfgpuMagics." in line and "stays" in line for line in err), err
    assert "Traceback" not in proc.stderr and "ERROR" not in proc.stderr
    assert "after load 0 False True" in proc.stdout
    assert "after config 0 True" in proc.stdout
    assert proc.stdout.strip().splitlines()[-1] == "cpus 2"


@pytest.mark.parametrize("warm", [True, False], ids=["core-loaded", "first-call-during-import"])
def test_configure_and_snapshot_from_a_thread_while_tensorflow_imports(warm):
    """A thread polls snapshot() and configure() while the main thread imports TensorFlow. Warm: its first
    call came before, so it sees the half-imported module and must say "importing". Cold: its first call
    (which imports tfgpu's core) races the import: it must wait, not deadlock in CPython's import locks."""
    proc = run_tf(f"""
import threading, time, collections
import tfgpu_magic
seen, errors = collections.Counter(), []
started = threading.Event()
stop = threading.Event()

def poke():
    if {warm}:
        tfgpu_magic.snapshot()
        tfgpu_magic.configure(cpus=2)
    started.set()
    while not stop.is_set():
        try:
            seen[tfgpu_magic.snapshot().to_dict()["tensorflow"]["state"]] += 1
            tfgpu_magic.configure(cpus=2)
        except Exception as err:  # the failure this test is about
            errors.append(repr(err))

worker = threading.Thread(target=poke)
worker.start()
started.wait()
import tensorflow as tf
time.sleep(0.2)
stop.set()
worker.join()
print("errors", errors[:3])
print("states", sorted(seen))
print("cpus", len(tf.config.list_logical_devices("CPU")))
""", timeout=150)
    out = proc.stdout
    assert "errors []" in out, out
    assert out.strip().splitlines()[-1] == "cpus 2"


def test_a_snapshot_during_a_slow_import_says_importing(tmp_path):
    """Deterministic: a stand-in `tensorflow` whose import takes a second (real TensorFlow spends most of
    its import inside one C call that holds the GIL, so a poller may never run while it is half made)."""
    package = tmp_path / "tensorflow"
    package.mkdir()
    (package / "__init__.py").write_text("import time\ntime.sleep(1.0)\n__version__ = '0.0-standin'\n")
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent("""
        import threading, collections
        import tfgpu_magic
        tfgpu_magic.snapshot()  # the core is loaded before the import starts
        seen, errors, stop = collections.Counter(), [], threading.Event()
        def poll():
            while not stop.is_set():
                try:
                    seen[tfgpu_magic.snapshot().to_dict()["tensorflow"]["state"]] += 1
                except Exception as err:
                    errors.append(repr(err))
        worker = threading.Thread(target=poll)
        worker.start()
        import tensorflow
        stop.set()
        worker.join()
        print(errors, sorted(seen))
        """)], capture_output=True, text=True, timeout=60, env={**tf_env(), "PYTHONPATH": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().startswith("[] ") and "'importing'" in proc.stdout, proc.stdout


def test_device_cell_errors_look_exactly_like_a_plain_cells():
    proc = run_tf(NO_COLOR + """
cell("%tfgpu cpus 2")
cell("import tensorflow as tf")
for source in ["x = (\\n", "def f():\\n    return 1/0\\nf()", "import nosuchmodule_tfgpu"]:
    for prefix in ("", "%%tfgpu device /CPU:1\\n"):
        print("=== start")
        result = ip.run_cell(prefix + source)
        print("=== end", result.success)
""")
    blocks = proc.stdout.split("=== start")[1:]
    assert len(blocks) == 6, proc.stdout
    for plain, device in zip(blocks[::2], blocks[1::2], strict=True):
        assert "=== end False" in plain and "=== end False" in device, (plain, device)
        assert "tfgpu_magic" not in device and "interactiveshell.py" not in device and "magic" not in device, device
        # The same lines, but for line numbers: the device cell's body starts on its second line.
        strip = [line for line in plain.splitlines() if line.strip() and "line" not in line and "---->" not in line]
        other = [line for line in device.splitlines() if line.strip() and "line" not in line and "---->" not in line
                 and "tfgpu placement" not in line]
        assert [x.split()[-1] for x in strip] == [x.split()[-1] for x in other], (plain, device)


def test_reload_ext_says_what_it_dropped_placement_included():
    proc = run_tf(SHELL_PRELUDE + """
cell("%tfgpu cpus 2")
cell("%tfgpu placement on")
cell("%reload_ext tfgpu_magic")
""")
    line = [x for x in proc.stdout.splitlines() if "unloaded" in x]
    assert line and "cpus" in line[0] and "placement capture is off" in line[0], proc.stdout
