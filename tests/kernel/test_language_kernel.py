"""The kernel's words in Chinese, in real kernels with a user's environment: the locale (LANG=zh_CN.UTF-8) makes the
too-late refusal Chinese after TensorFlow started; the sidebar's language (the comm's opening) makes an English
kernel's words and refusals Chinese. (The command line in a Chinese locale: tests/core/test_i18n.py.)"""

from __future__ import annotations

import re

import nbclient
import nbformat
import pytest
from harness import kernel_folder, user_env
from test_sidebar_comm import Frontend

pytestmark = pytest.mark.kernel

CJK = re.compile(r"[\u4e00-\u9fff]")
LOCALE_VARS = ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG")


def env_in(lang: str) -> dict[str, str]:
    env = {k: v for k, v in user_env().items() if k not in LOCALE_VARS}
    return {**env, "LANG": lang}


@pytest.mark.tf
def test_a_chinese_locale_refuses_cpus_after_tensorflow_started_in_chinese():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in (
        "%load_ext tfgpu_magic", "import tensorflow as tf\nx = tf.constant(1) + 1", "%tfgpu cpus 2")]
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120, allow_errors=True,
                                     resources={"metadata": {"path": kernel_folder()}})
    with client.setup_kernel(env=env_in("zh_CN.UTF-8"), cwd=kernel_folder()):
        for index, cell in enumerate(nb.cells):
            client.execute_cell(cell, index)
    said = "".join(o.get("text", "") for o in nb.cells[-1].outputs if o.output_type == "stream")
    said += "".join(o.get("evalue", "") for o in nb.cells[-1].outputs if o.output_type == "error")
    line = next(line for line in said.splitlines() if "tfgpu:" in line)
    first = line[line.index("tfgpu:"):]
    assert first.startswith("tfgpu: `%tfgpu cpus 2` ") and CJK.search(first), said
    assert "too late" not in said


def test_the_sidebars_language_makes_an_english_kernel_chinese():
    fe = Frontend()
    try:
        fe.run("%load_ext tfgpu_magic")
        english = fe.run("try:\n    get_ipython().run_line_magic('tfgpu', 'cpus two')\n"
                         "except Exception as err:\n    print(err)")
        assert english.startswith("tfgpu: bad CPU count 'two'") and not CJK.search(english), english
        comm_id = fe.open({"request": "subscribe", "version": 1, "language": "zh-CN"})
        state = next(m for m in fe.comm_messages(comm_id, lambda got: any(m.get("type") == "state" for m in got))
                     if m.get("type") == "state")
        assert state["words"]["setting_states"]["refused"]["words"] == "已拒绝"
        assert state["words"]["tf_states"]["not_imported"] == "未导入"
        chinese = fe.run("try:\n    get_ipython().run_line_magic('tfgpu', 'cpus two')\n"
                         "except Exception as err:\n    print(err)")
        assert chinese.startswith("tfgpu: ") and "'two'" in chinese and CJK.search(chinese), chinese
    finally:
        fe.close()

