"""Run ``python -m muscle_mem_ros.cli`` as ``muscle-mem``."""

import sys

from muscle_mem_ros.cli import main

if __name__ == '__main__':
    sys.exit(main())
