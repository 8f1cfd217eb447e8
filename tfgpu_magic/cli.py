"""``tfgpu status|devices [--json]`` (also ``python -m tfgpu_magic``): the same snapshot the magics
show, for a terminal or a script."""

from __future__ import annotations

import argparse
import json
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tfgpu", description="TensorFlow's devices and this machine's GPUs.")
    parser.add_argument("command", nargs="?", default="status", choices=("status", "devices"),
                        help="status: GPUs and settings, without importing TensorFlow; "
                             "devices: also TensorFlow's physical devices (imports it, never starts its runtime)")
    parser.add_argument("--json", action="store_true", help="print the snapshot as JSON (shape: see README)")
    args = parser.parse_args(argv)

    from . import state as state_module
    from .runtime import TFState, probe

    if args.command == "devices" and probe().state is TFState.NOT_IMPORTED:
        # Quiet TensorFlow's start-up chatter; it is read only during import.
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import tensorflow  # noqa: F401

    snap = state_module.take(list_devices=args.command == "devices")
    if args.json:
        json.dump(snap.to_dict(), sys.stdout, indent=2)
        print()
    elif args.command == "devices":
        print(snap.devices_text())
    else:
        print(snap.to_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
