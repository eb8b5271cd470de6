"""``robofollow doctor``: does every part the product needs work on this machine?

Each check prints its line when it ends (the DDS round trip and SAPIEN take seconds each), one line per
check; a failing one names the package, the version found and the command that fixes it. With ``--rig``
(or ``$ROBOFOLLOW_RIG`` set) the first check is the rig: what it resolved to (its name, its YAML, the
composed URDF the simulator and the kinematics load), then each file it was built from with its SHA-256.
"""

from __future__ import annotations

import argparse
from typing import Any

from robofollow_ros.cli._common import add_rig_option, print_json


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "doctor",
        help="check numpy/matplotlib/websockets/OpenCV versions, rclpy/DDS, SAPIEN physics and rendering, "
        "torch, foxglove-sdk",
    )
    p.add_argument("--json", action="store_true", help="print the checks as JSON (at the end, no progress lines)")
    p.add_argument("--require-render", action="store_true", help="treat a missing renderer as a failure")
    p.add_argument("--quick", action="store_true",
                   help="only the package versions and APIs (numpy, matplotlib, websockets, OpenCV, foxglove-sdk): "
                   "seconds, no DDS, SAPIEN or torch")
    add_rig_option(p)
    p.set_defaults(func=_doctor)


def _line(r: Any) -> str:
    mark = "ok  " if r.ok else ("FAIL" if r.required else "off ")
    version = f" {r.version}" if r.version else (" (not found)" if not r.ok else "")
    took = f" ({r.seconds:.1f} s)" if r.seconds >= 1.0 else ""
    fix = f" -- fix: {r.fix}" if not r.ok and r.fix else ""
    return f"[{mark}] {r.name}{version}: {r.detail}{took}{fix}"


def rig_check(rig: Any) -> Any:
    """The rig ``--rig`` (or ``$ROBOFOLLOW_RIG``) resolved to, as a check: it loaded (a rig that does not is
    refused before the checks, one line naming ``--rig``); ``extra`` holds run.json's record of it."""
    from robofollow_ros.diagnostics import CheckResult

    return CheckResult("rig", ok=True, required=True, version=rig.name,
                       detail=f"{rig.source} -> URDF {rig.urdf_path} ({len(rig.files)} files)",
                       extra={**rig.provenance(), "urdf": str(rig.urdf_path)})


def _rig_lines(check: Any) -> list[str]:
    return [f"       sha256 {f['sha256']}  {f['path']}" for f in check.extra["files"]]


def _doctor(args: argparse.Namespace) -> int:
    from robofollow_ros.diagnostics import CHECKS, VERSION_CHECKS, run_checks

    rig = rig_check(args.rig_config) if getattr(args, "rig_config", None) is not None else None
    if not args.json:
        count = len(VERSION_CHECKS if args.quick else CHECKS) + (rig is not None)
        print(f"robofollow doctor: {count} checks, each printed as it ends", flush=True)
        if rig is not None:
            print("\n".join([_line(rig), *_rig_lines(rig)]), flush=True)
    results = run_checks(
        require_render=args.require_render,
        quick=args.quick,
        on_result=None if args.json else (lambda r: print(_line(r), flush=True)),
    )
    if rig is not None:
        results.insert(0, rig)
    failed = [r for r in results if r.required and not r.ok]
    if args.json:
        print_json({"ok": not failed, "checks": [r.as_dict() for r in results]})
    else:
        print("all required parts work" if not failed else f"failed: {', '.join(r.name for r in failed)}")
    return 1 if failed else 0
