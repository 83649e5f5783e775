"""Run ``python -m muscle_mem_ros.cli`` as ``muscle-mem``."""

import sys

from muscle_mem_ros.cli import main

sys.exit(main())
