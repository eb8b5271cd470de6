"""``robofollow tasks list|show|summary``: browse the benchmark registry."""

from __future__ import annotations

import argparse
from typing import Any

from robofollow_ros.benchmark import LEVELS, SCENES, EvalTask, TrainingTask, UnknownTaskError, default_registry
from robofollow_ros.cli._common import CliError, print_json


def register(subparsers: Any) -> None:
    tasks = subparsers.add_parser("tasks", help="list, show and count the benchmark's tasks")
    sub = tasks.add_subparsers(dest="tasks_command", metavar="ACTION", required=True)

    ls = sub.add_parser("list", help="one line per task")
    ls.add_argument("--scene", choices=SCENES)
    ls.add_argument("--level", choices=LEVELS, help="evaluation level (implies --split eval)")
    ls.add_argument("--split", choices=("train", "eval"), default="eval")
    ls.add_argument("--json", action="store_true", help="print the records as JSON")
    ls.set_defaults(func=_list)

    show = sub.add_parser("show", help="layout, instruction(s), arm, action and seeds of one task")
    show.add_argument("task_id", metavar="ID")
    show.add_argument("--json", action="store_true")
    show.set_defaults(func=_show)

    summary = sub.add_parser("summary", help="task counts, scene entropy, trials of the full protocol")
    summary.add_argument("--json", action="store_true")
    summary.set_defaults(func=_summary)


def _list(args: argparse.Namespace) -> int:
    reg = default_registry()
    split = "eval" if args.level else args.split
    rows: list[EvalTask | TrainingTask]
    rows = list(reg.eval_tasks(args.scene, args.level)) if split == "eval" else list(reg.training_tasks(args.scene))
    if args.json:
        print_json([_task_dict(t) for t in rows])
        return 0
    for t in rows:
        level = t.level if isinstance(t, EvalTask) else "train"
        print(f"{t.scene:7} {level:5} {t.layout:9} {t.arm:5} {t.action:21} {t.task_id}")
    return 0


def _task_dict(task: EvalTask | TrainingTask) -> dict[str, Any]:
    out = {k: v for k, v in vars(task).items() if v is not None and k != "extras"}
    for key in ("seeds", "instructions"):
        if key in out:
            out[key] = list(out[key])
    return out


def _show(args: argparse.Namespace) -> int:
    reg = default_registry()
    try:
        task = reg.task(args.task_id)
    except UnknownTaskError as exc:
        raise CliError(str(exc)) from None
    layout = reg.layout_of(task)
    info = _task_dict(task)
    info["objects"] = [
        {
            "name": o.name,
            "shape": o.shape,
            "role": o.role,
            "nominal_xy": list(o.nominal_xy),
            "color_rgb": list(o.color_rgb),
            **({"on_top_of": o.on_top_of} if o.on_top_of else {}),
            **({"in_container": o.in_container} if o.in_container else {}),
        }
        for o in layout.objects
    ]
    if args.json:
        print_json(info)
        return 0
    print(f"{task.task_id}  ({task.scene}, layout {task.layout})")
    if isinstance(task, EvalTask):
        print(f"  level        {task.level}   variant {task.instruction_variant}")
        print(f"  instruction  {task.instruction}")
    else:
        for i, text in enumerate(task.instructions):
            print(f"  instruction {i}  {text}")
    print(f"  arm          {task.arm}")
    print(f"  action       {task.action}   source {task.source}   target {task.target or '-'}")
    for key in ("via", "route_mode", "place_mode", "place_slot", "second_source", "second_arm", "expected_branch"):
        value = getattr(task, key, None)
        if value is not None:
            print(f"  {key:12} {value}")
    if isinstance(task, EvalTask):
        print(f"  seeds        {', '.join(map(str, task.seeds))}")
        if task.note:
            print(f"  note         {task.note}")
    print("  objects (nominal x, y in world):")
    for o in layout.objects:
        extra = f" on {o.on_top_of}" if o.on_top_of else (f" in {o.in_container}" if o.in_container else "")
        print(f"    {o.name:22} {o.shape:8} ({o.nominal_xy[0]:+.3f}, {o.nominal_xy[1]:+.3f}){extra}")
    return 0


def _summary(args: argparse.Namespace) -> int:
    summary = default_registry().summary()
    if args.json:
        print_json(summary)
        return 0
    ev = summary["evaluation_tasks"]
    print(f"training tasks        {summary['training_tasks']} ({summary['instruction_variants']} instruction variants)")
    print(f"evaluation tasks      {ev['total']}  (L0 {ev['L0']}, L1 {ev['L1']}, L2 {ev['L2']}, L3 {ev['L3']})")
    for scene, levels in summary["per_scene"].items():
        print(f"  {scene}            " + "  ".join(f"{lv} {n:3}" for lv, n in levels.items()))
    print(
        f"scene entropy H(T|S)  {summary['scene_entropy_bits']:.3f} bits "
        f"(LIBERO {summary['libero_scene_entropy_bits']:.3f})"
    )
    print(f"full protocol         {summary['trials_full_protocol']} trials (10 rounds)")
    return 0
