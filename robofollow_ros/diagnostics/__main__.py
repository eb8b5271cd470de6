"""``python -m robofollow_ros.diagnostics render-probe`` (tools/ensure_renderer.sh)."""

import sys

from robofollow_ros.diagnostics import main

sys.exit(main(sys.argv[1:]))
