"""
The ``muscle-mem`` command line: inspect, export, calibrate and prune a store.

ROS-free except where a command needs ROS itself: ``calibrate --live`` talks to
a running node, and ``export`` serializes snapshot messages with rclpy; both
import it only when they run.
"""

from __future__ import annotations

from .app import build_parser, main

__all__ = ['build_parser', 'main']
