import sys

from robofollow_ros.cli import main

sys.exit(main())
