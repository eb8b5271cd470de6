"""``robofollow doctor``: does every part the product needs work on this machine?"""

from __future__ import annotations

import argparse
from typing import Any

from robofollow_ros.cli._common import print_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor", help="check rclpy/DDS, SAPIEN physics and rendering, torch, OpenCV, foxglove-sdk"
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON")
    p.add_argument("--require-render", action="store_true", help="treat a missing renderer as a failure")
    p.set_defaults(func=_doctor)


def _doctor(args: argparse.Namespace) -> int:
    from robofollow_ros.diagnostics import run_checks

    results = run_checks(require_render=args.require_render)
    failed = [r for r in results if r.required and not r.ok]
    if args.json:
        print_json({"ok": not failed, "checks": [r.as_dict() for r in results]})
    else:
        for r in results:
            mark = "ok  " if r.ok else ("FAIL" if r.required else "off ")
            version = f" {r.version}" if r.version else ""
            print(f"[{mark}] {r.name}{version}: {r.detail}")
            if not r.ok:
                print(f"       fix: {r.fix}")
        print("all required parts work" if not failed else f"missing: {', '.join(r.name for r in failed)}")
    return 1 if failed else 0
