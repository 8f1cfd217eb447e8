#!/usr/bin/env bash
# The wheel as a user gets it: built from a clean clone of HEAD by `pip wheel .` (Node.js needed here, for the
# sidebar), then installed into a new virtual environment and run with no Node.js on PATH. Prints what
# `jupyter labextension list` and `jupyter server extension list` say, and the wheel's sidebar files; leaves
# the environment in $WORK/user-venv and the wheel in $WORK/dist. Usage: scripts/check_wheel.sh [WORK_DIR]
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
WORK="${1:-$(mktemp -d /tmp/tfgpu-wheel.XXXX)}"
PYTHON="${PYTHON:-python3}"
git clone -q "$repo" "$WORK/src"
start=$(date +%s)
(cd "$WORK/src" && "$PYTHON" -m pip wheel . --no-deps -q -w "$WORK/dist" 2>&1 | grep -v "^WARNING: Location" || true)
echo "pip wheel: $(( $(date +%s) - start )) s"
wheel=$(ls "$WORK"/dist/tfgpu_magic-*.whl)
echo "wheel: $wheel ($(du -k "$wheel" | cut -f1) KB)"
"$PYTHON" -m zipfile -l "$wheel" | awk '{print $1}' | grep -E "labextensions/tfgpu_magic/(package.json|install.json|static/style.js|schemas/.*sidebar.json)|jupyter_server_config.d/tfgpu_magic.json|dist-info/licenses/LICENSE|core/_version.py"
# The version (from package.json, the one source) and the licence as the wheel's metadata says them.
unzip -p "$wheel" '*.dist-info/METADATA' | grep -E "^(Version|License-Expression|License-File):"
"$PYTHON" -m venv "$WORK/user-venv"
start=$(date +%s)
"$WORK/user-venv/bin/pip" install -q "$wheel" jupyterlab 2>&1 | grep -v "^WARNING: Location" || true
echo "pip install: $(( $(date +%s) - start )) s"
# No Node.js from here on: only the new environment's bin and the basic tools.
nonode="$WORK/nonode-bin"
mkdir -p "$nonode"
for tool in sh bash env cat ls grep awk; do ln -sf "$(command -v $tool)" "$nonode/$tool"; done
export PATH="$WORK/user-venv/bin:$nonode"
if command -v node >/dev/null; then echo "node is still on PATH"; exit 1; fi
echo "node on PATH: none"
jupyter labextension list 2>&1 | grep -E "tfgpu_magic|Other labextensions|extensions in"
jupyter server extension list 2>&1 | grep -A2 "tfgpu_magic"
echo "WORK=$WORK"
