"""What a run's ``run.json`` says about what ran: the official manifest's fields, and ours beside them.

The official evaluator (AutoLab-SAI-SJTU/RoboFollow at a867718) writes its run manifest in
``evaluate.py`` (the ``run`` dict, lines 115-122, with ``runinfo.metadata()``, ``runinfo.py`` lines
23-48). ``run.json`` here holds every one of those fields under the official name, with the official
value wherever the official code's meaning carries over (docs/scoring.md says, field by field, what
each means here), and beside them what the official manifest does not say: the run's schema version,
the policy (SPEC, kwargs, its server's own metadata, the observation keys it was sent), whether it
was given privileged state, render settings, seeds, the step budget, the rig (its name, its YAML and
every file it was built from with its SHA-256: :func:`rig_record`), this package's version and git
commit (and whether the tree was dirty), Python and the platform, and what each resume ran.

Everything about this process's code (versions, digests, git) is computed once per process
(:func:`environment`); the rig's files are the active rig's (``ROBOFOLLOW_RIG``, which ``--rig`` sets)
when the record is made. Nothing here imports SAPIEN, torch or rclpy.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import os
import platform
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from robofollow_ros.benchmark.seeds import DEFAULT_BASE_SEED
from robofollow_ros.contract import CAMERA_NAMES, CAMERA_OBS_KEYS, DEFAULT_IMAGE_SIZE

#: run.json's layout; a resume refuses a run written with another one (docs/scale-out.md). Runs written
#: before it existed have none: version 1 is that layout.
RUN_SCHEMA_VERSION = 2
#: The official code whose rules this package follows (scoring, protocol, manifest).
REFERENCE = {"repository": "AutoLab-SAI-SJTU/RoboFollow", "commit": "a867718ec847bc0842b37db7a92db33fefeadbc5"}
#: Packages whose versions run.json records: the official list (runinfo.py:26-27), then what this
#: package runs on besides (ROS, the live view, Ray, the wires' codecs, OpenCV).
VERSION_PACKAGES = ("numpy", "sapien", "torch", "mplib", "toppra", "h5py", "transforms3d", "imageio",
                    "imageio-ffmpeg", "nvidia-curobo", "warp-lang", "rclpy", "foxglove-sdk", "ray", "websockets",
                    "msgpack", "opencv-python")
#: Where a ROS install's rclpy is known to pip by another name.
_DISTRIBUTION_ALIASES = {"rclpy": ("rclpy", "ros-rclpy")}
#: ``--stepper`` -> the official ``stepper`` value (evaluate.py:119): our TOPP stepper is RoboTwin's.
OFFICIAL_STEPPER = {"topp": "robotwin-topp", "direct": "direct"}
#: The official ``--sim-steps`` (evaluate.py:54): physics steps per row of the direct stepper; ours is
#: ``sim.world.DIRECT_STEPS`` (a test keeps them equal; this module must not import the simulator).
SIM_STEPS = 15
#: The official manifest of replaced RoboTwin assets; this simulator loads no RoboTwin asset (every
#: object is built from primitives), so it replaces none: the manifest's format, no files.
ASSET_OVERRIDES: dict[str, Any] = {"version": 1, "files": []}
#: The seed rule (benchmark/seeds.py; evaluate.py:128).
SEED_RULE = "base_seed + 100 * round + md5_32(task) % 1000"
#: Keys of policy kwargs whose values are secrets: recorded as ``"<redacted>"``, never written.
SECRET_WORDS = ("key", "token", "password", "secret", "credential", "auth")
#: Largest JSON rendering of a server's metadata kept in run.json (a hostile server could send megabytes).
MAX_SERVER_METADATA_BYTES = 64 * 1024

ROOT = Path(__file__).resolve().parents[2]  # the checkout (or site-packages) holding robofollow_ros/
PACKAGE_DIR = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class RunSettings:
    """What defines a run of ``robofollow eval`` besides its trial selection (``--resume`` compares them)."""

    policy: str
    policy_kwargs: Mapping[str, Any] = field(default_factory=dict)
    #: None where the writer is not told (the ROS trial manager does not know the sim's render setting).
    max_steps: int | None = 10
    actions_per_step: int | None = 50
    render: bool | None = True
    #: Whether the policy was handed privileged state: the run's ``--privileged``, or the built policy's own
    #: declaration (``needs_privileged``, read by the worker that built it: ``TrialWorker.info``). None: not known
    #: yet (before the policy is built; ``--resume`` then leaves it to the check made after).
    privileged: bool | None = False
    #: What made it privileged: ``"--privileged"`` (the flag), ``"policy"`` (the policy declares it) or None.
    privileged_source: str | None = None
    base_seed: int = DEFAULT_BASE_SEED
    #: The policy server's metadata (openpi's handshake; None where the protocol has none): provenance,
    #: not a defining setting.
    server_metadata: Mapping[str, Any] | None = None
    #: run.json's ``execution`` (``evaluation.execution_mode``): lock-step or realtime with the executor's
    #: settings; None: lock-step.
    execution: Mapping[str, Any] | None = None


# -- this process -----------------------------------------------------------------------------------
def package_versions() -> dict[str, str | None]:
    """``{distribution: version or None}`` for :data:`VERSION_PACKAGES`, read from the installed metadata."""
    out: dict[str, str | None] = {}
    for name in VERSION_PACKAGES:
        out[name] = None
        for dist in _DISTRIBUTION_ALIASES.get(name, (name,)):
            try:
                out[name] = metadata.version(dist)
                break
            except metadata.PackageNotFoundError:
                continue
    return out


def code_sha256() -> str:
    """SHA-256 over this package's Python sources and benchmark data files, in path order."""
    digest = hashlib.sha256()
    for path in sorted([*PACKAGE_DIR.rglob("*.py"), *PACKAGE_DIR.glob("benchmark/data/*.json")]):
        digest.update(str(path.relative_to(PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def active_rig() -> Any:
    """The rig this process runs (``robot.rig_config.RigConfig``): ``ROBOFOLLOW_RIG``'s, else the built-in one."""
    from robofollow_ros.robot.rig_config import load_rig_config

    return load_rig_config()


def rig_record(rig: Any = None) -> dict[str, Any]:
    """run.json's ``rig``: the name, the rig YAML and every file the rig was built from (the YAML, the
    description, its meshes, calibration files) with its SHA-256 (``RigConfig.provenance``); the active rig's
    when ``rig`` is None."""
    return dict((rig if rig is not None else active_rig()).provenance())


def config_sha256(rig: Any = None) -> dict[str, str]:
    """run.json's ``config_sha256``, as the official one hashes its camera and embodiment configs: ``{file:
    SHA-256}`` of every file the (active) rig was built from, those of this package named relative to its
    share folder (``config/robot/rig.yaml``, ``urdf/robofollow_rig.urdf``), the others by their path."""
    from robofollow_ros.paths import package_share

    try:
        share: Path | None = package_share().resolve()
    except FileNotFoundError:
        share = None
    out = {}
    for entry in rig_record(rig)["files"]:
        path = Path(entry["path"]).resolve()
        if share is not None and path.is_relative_to(share):
            out[str(path.relative_to(share))] = entry["sha256"]
        else:
            out[str(path)] = entry["sha256"]
    return out


def curobo_source_sha256() -> str | None:
    """As the official (runinfo.py:35-45): SHA-256 over cuRobo's Python sources when cuRobo is installed.

    This package plans with TOPP and never imports cuRobo; the digest says whether one was installed
    beside it all the same. None without cuRobo (the usual case). The module is located, not imported."""
    try:
        spec = importlib.util.find_spec("curobo")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin:
        return None
    root = Path(spec.origin).parent
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """``{"commit", "dirty"}`` of the checkout this package runs from; both None outside a checkout.

    Only a checkout whose top is ``root`` counts (a package installed inside some other repository is
    not that repository's code). ``dirty``: tracked files differ from the commit (``git status
    --untracked-files=no``); untracked files (results, virtual environments) do not count, and the
    code that ran is in ``code_sha256`` either way."""
    none: dict[str, Any] = {"commit": None, "dirty": None}
    if not (root / "package.xml").is_file() and not (root / ".git").exists():
        return none
    try:
        top = _git(root, "rev-parse", "--show-toplevel")
        if top is None or Path(top).resolve() != root.resolve():
            return none
        commit = _git(root, "rev-parse", "HEAD")
        status = _git(root, "status", "--porcelain", "--untracked-files=no")
    except OSError:
        return none
    return {"commit": commit, "dirty": None if status is None else bool(status)}


def _git(root: Path, *args: str) -> str | None:
    done = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30,
                          env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})  # a status must not take git's lock
    return done.stdout.strip() if done.returncode == 0 else None


def package_info() -> dict[str, Any]:
    try:
        version: str | None = metadata.version("robofollow_ros")
    except metadata.PackageNotFoundError:
        version = None
    return {"name": "robofollow_ros", "version": version}


def platform_info() -> dict[str, Any]:
    return {"system": platform.system(), "release": platform.release(), "machine": platform.machine(),
            "python_implementation": platform.python_implementation(), "libc": "-".join(platform.libc_ver()) or None}


def environment() -> dict[str, Any]:
    """What this process runs: the official ``metadata()`` fields, then ours. The code's are computed once;
    ``config_sha256`` is the active rig's now (a loaded rig is cached per file and modification time)."""
    return {**_code_environment(), "config_sha256": config_sha256()}


@functools.lru_cache(maxsize=1)
def _code_environment() -> dict[str, Any]:
    git = git_state()
    return {
        "upstream_commit": git["commit"],
        "code_sha256": code_sha256(),
        "versions": package_versions(),
        "curobo_source_sha256": curobo_source_sha256(),
        "asset_overrides": ASSET_OVERRIDES,
        "package": package_info(),
        "git": git,
        "python": platform.python_version(),
        "platform": platform_info(),
    }


#: The fields of :func:`environment` that name the code that ran: a resume compares them (and warns).
CODE_FIELDS = ("upstream_commit", "code_sha256", "config_sha256", "package", "git", "versions", "python")


# -- the official arguments -------------------------------------------------------------------------
#: The official ``arguments`` keys in evaluate.py's order (its argparse options, lines 43-68).
OFFICIAL_ARGUMENTS = ("scene", "levels", "tasks", "limit", "rounds", "base_seed", "max_steps", "actions_per_step",
                      "runtime", "direct_step", "sim_steps", "gpu", "output", "video", "video_fps", "remote",
                      "policy_factory", "policy_kwargs", "host", "port", "policy_timeout", "list", "dry_run")


def official_arguments(*, scenes: list[str] | tuple[str, ...] | None = None, levels: list[str] | tuple[str, ...] | None
                       = None, tasks: list[str] | tuple[str, ...] | None = None, limit: int | None = None,
                       rounds: int | None = None, base_seed: int = DEFAULT_BASE_SEED, max_steps: int | None = None,
                       actions_per_step: int | None = None, stepper: str | None = None, output: str | None = None,
                       policy: str | None = None, policy_kwargs: Mapping[str, Any] | None = None,
                       policy_timeout: float | None = None, video: bool = False) -> dict[str, Any]:
    """The official ``arguments`` object (evaluate.py:120, ``vars(args)``) for a run of ours, key for key.

    Our flags map onto the official ones; what has no counterpart here takes the official default
    (``list``, ``dry_run``: False, since a run directory is never written by them). ``video`` is ours
    (``eval --record --video``: ``videos/<trial>.mp4`` at the recorded frame times, so ``video_fps`` stays the
    official default it has no counterpart of).
    ``policy_factory`` is the ``module:function`` our SPEC loads (``policy.spec.factory_of``);
    ``remote`` / ``host`` / ``port`` are set for ``tcp://`` (the official RemotePolicy's protocol)."""
    from robofollow_ros.benchmark import SCENES
    from robofollow_ros.policy.spec import factory_of

    target = factory_of(policy or "", dict(policy_kwargs or {}))
    remote = target["remote"]
    scene = None if scenes is None else ("all" if tuple(scenes) == tuple(SCENES) else ",".join(scenes))
    gpu = os.environ.get("CUDA_VISIBLE_DEVICES")
    return {
        "scene": scene,
        "levels": None if levels is None else ",".join(levels),
        "tasks": ",".join(tasks) if tasks else None,
        "limit": limit,
        "rounds": rounds,
        "base_seed": base_seed,
        "max_steps": max_steps,
        "actions_per_step": actions_per_step,
        "runtime": "fixed",
        "direct_step": None if stepper is None else stepper == "direct",
        "sim_steps": SIM_STEPS,
        "gpu": gpu,
        "output": output,
        "video": video,
        "video_fps": 25,
        "remote": remote is not None,
        "policy_factory": target["factory"],
        "policy_kwargs": json.dumps(redacted(target["kwargs"]) if remote is None else redacted(policy_kwargs or {}),
                                    ensure_ascii=False),
        "host": remote[0] if remote else "127.0.0.1",
        "port": remote[1] if remote else 8999,
        "policy_timeout": policy_timeout,
        "list": False,
        "dry_run": False,
    }


#: Official arguments whose value is the same for every run of this package (what no flag here changes).
CONSTANT_ARGUMENTS: dict[str, Any] = {"base_seed": DEFAULT_BASE_SEED, "runtime": "fixed", "video": False,
                                      "video_fps": 25, "list": False, "dry_run": False}


def run_arguments(arguments: Mapping[str, Any], stepper: str | None = None) -> dict[str, Any]:
    """run.json's ``arguments``: every official key first (from ``arguments``; else what every run of ours
    has, or ``direct_step`` from ``stepper``; else None), then the others under their own names."""
    known = {**CONSTANT_ARGUMENTS, "direct_step": None if stepper is None else stepper == "direct"}
    out = {key: arguments[key] if key in arguments else known.get(key) for key in OFFICIAL_ARGUMENTS}
    out.update((key, value) for key, value in arguments.items() if key not in out)
    return jsonable(out)


# -- ours -------------------------------------------------------------------------------------------
def redacted(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the value of every key that names a secret (``api_key``, ``token``, ...) replaced."""
    return {key: "<redacted>" if any(word in str(key).lower() for word in SECRET_WORDS) and value is not None
            else value for key, value in kwargs.items()}


def render_settings(enabled: bool) -> dict[str, Any]:
    """What the evaluator's simulator renders: ``SimWorld(render=...)`` with the default ``CameraSettings``."""
    width, height = DEFAULT_IMAGE_SIZE
    return {"enabled": bool(enabled), "width": width if enabled else None, "height": height if enabled else None,
            "cameras": list(CAMERA_NAMES) if enabled else [], "depth": False, "segmentation": False}


def seed_settings(base_seed: int) -> dict[str, Any]:
    """run.json's ``seeds``: the base seed and the rule every trial's seed follows (results.json has each one)."""
    return {"base_seed": int(base_seed), "rule": SEED_RULE}


def observation_keys(spec: str, privileged: bool, kwargs: Mapping[str, Any] | None = None) -> list[str]:
    """The keys of every observation the policy is sent, as dotted paths: what its transport hands its codec
    for one predict call (``tcp://``: ``wire_observation``, the ``privileged.*`` keys included in a run
    with ``--privileged``; ``openpi://``: the ALOHA request; ``act+http://``, ``vla-eval://``, ``gr00t://``,
    ``xpolicylab://``: the peer's request under its own keys, built by the client from the SPEC and
    ``kwargs`` as a run builds it), or what an in-process policy is handed. Computed by running the
    transport's own conversion on an observation of the evaluator's shape, so that it follows the code."""
    import numpy as np

    image = np.zeros((240, 320, 3), dtype=np.uint8)
    obs: dict[str, Any] = {"observation": {key: {"rgb": image} for key in CAMERA_OBS_KEYS.values()},
                           "joint_action": {"vector": np.zeros(14)}, "instruction": "x"}
    if privileged:
        obs["privileged"] = {"task_id": "", "objects": {}, "object_quats": {}}
    return _paths(wire_payload(spec, obs, privileged, dict(kwargs or {})))


def wire_payload(spec: str, obs: dict[str, Any], privileged: bool, kwargs: dict[str, Any]) -> Mapping[str, Any]:
    """What the SPEC's transport sends for ``obs`` (the observation itself for an in-process policy)."""
    scheme = spec.strip().split("://", 1)[0] if "://" in spec else None
    if scheme == "tcp":
        from robofollow_ros.policy.wire.robofollow.client import wire_observation

        return wire_observation(obs, "x", forward_privileged=privileged)
    if scheme == "openpi":
        from robofollow_ros.policy.wire.openpi.observation import to_openpi_observation

        return to_openpi_observation(obs, "x", 2)
    if scheme == "vla-eval":
        from robofollow_ros.policy.wire.vlaeval.observation import to_vlaeval_observation

        return to_vlaeval_observation(obs, "x")
    if scheme in ("act+http", "gr00t", "xpolicylab"):
        return _peer_request(spec, scheme, obs, kwargs)
    return obs


def _peer_request(spec: str, scheme: str, obs: dict[str, Any], kwargs: dict[str, Any]) -> Mapping[str, Any]:
    """The request of a peer's client whose keys depend on its options (preset, key map, cameras): the
    client is built as a run builds it (no connection is made) and its own conversion is run."""
    from robofollow_ros.policy.remote import parse_remote
    from robofollow_ros.policy.spec import FORWARD_PRIVILEGED

    remote = parse_remote(spec)
    assert remote is not None  # a scheme of REMOTE_CLIENTS
    options = remote.client_kwargs({k: v for k, v in kwargs.items() if k != FORWARD_PRIVILEGED})
    if scheme == "act+http":
        from robofollow_ros.policy.wire.act.client import ActHttpPolicy
        from robofollow_ros.policy.wire.act.presets import to_request

        return to_request(ActHttpPolicy(**options).preset, obs, "x")
    if scheme == "gr00t":
        from robofollow_ros.policy.wire.gr00t.client import Gr00tZmqPolicy
        from robofollow_ros.policy.wire.gr00t.observation import to_gr00t_observation

        client = Gr00tZmqPolicy(**options)
        try:
            return to_gr00t_observation(obs, "x", client.keys, client.api)
        finally:
            client._context.term()  # nothing was connected: the ZMQ context alone to free
    from robofollow_ros.policy.wire.xpolicylab.client import XPolicyLabPolicy
    from robofollow_ros.policy.wire.xpolicylab.observation import to_xpolicylab_observation

    return to_xpolicylab_observation(obs, "x", XPolicyLabPolicy(**options).cameras)


def _paths(value: Mapping[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, Mapping) and item and not path.startswith("privileged."):
            out.extend(_paths(item, path + "."))
        else:
            out.append(path)
    return out


def policy_record(settings: RunSettings, evaluator: bool = True) -> dict[str, Any]:
    """run.json's ``policy``: SPEC, kwargs (secrets redacted), the server's metadata, the observation keys.

    ``evaluator``: the policy is fed by this package's evaluator (whose observations :func:`observation_keys`
    describes); a run of the ROS graph, whose policy node builds its own, records null there."""
    return {"spec": settings.policy, "kwargs": jsonable(redacted(settings.policy_kwargs)),
            "server_metadata": server_metadata(settings.server_metadata),
            "observation_keys": observation_keys(settings.policy, bool(settings.privileged), settings.policy_kwargs)
            if evaluator else None}


def server_metadata(value: Mapping[str, Any] | None) -> Any:
    """A server's metadata as JSON (bytes and arrays described, not copied), bounded in size."""
    if value is None:
        return None
    data = jsonable(dict(value))
    size = len(json.dumps(data, ensure_ascii=False).encode())
    if size > MAX_SERVER_METADATA_BYTES:
        return {"truncated": True, "bytes": size, "keys": sorted(map(str, value))[:100]}
    return data


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON: mappings and sequences walked, bytes and arrays described, the rest ``str``."""
    if depth > 32:
        return "<nested too deep>"
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [jsonable(v, depth + 1) for v in items]
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        if getattr(value, "size", 0) <= 64 and hasattr(value, "tolist"):
            return jsonable(value.tolist(), depth + 1)
        return f"<array {dtype} {tuple(shape)}>"
    if hasattr(value, "item"):  # a NumPy scalar
        return jsonable(value.item(), depth + 1)
    return str(value)
