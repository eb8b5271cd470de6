"""The run directory: where one command's run keeps its results, safely, and how it is resumed.

Every command that writes a directory of results opens it as a :class:`RunDirectory` (``directory``):
``robofollow eval`` and the ROS trial manager (through ``evaluation.results.RunWriter``),
``robofollow collect`` (a LeRobot dataset) and ``robofollow owda eval``. Its pieces:

* ``layout`` -- which files a run directory holds, named in one place; what is debris;
* ``lock`` -- one writer at a time (``flock``, naming its holder; gone with a killed holder);
* ``atomic`` -- files replaced atomically (JSON and bytes), and the sweep of a killed write's temporaries;
* ``errors`` -- refusals: :class:`RunDirError` (exit 2) and :class:`OutputUnusableError` (exit 5);
* ``identity`` -- what a resumed run must share with the one it continues, and the one check of it;
* ``store`` -- the SQLite results store (``results.sqlite``);
* ``directory`` -- :class:`RunDirectory`, which puts them together.

Low in the house: it imports only the standard library and ground-floor modules of this package
(``jsonlimits``, ``paths``) -- never ``evaluation``, ``scoring``, ``benchmark``, ``datasets`` or
``decisions``, which build on it -- and nothing of ROS, so any command and any test can use it.
"""

from robofollow_ros.rundir.directory import RunDirectory
from robofollow_ros.rundir.errors import NotEmptyError, OutputUnusableError, RunDirError
from robofollow_ros.rundir.identity import Identity

__all__ = ["Identity", "NotEmptyError", "OutputUnusableError", "RunDirError", "RunDirectory"]
