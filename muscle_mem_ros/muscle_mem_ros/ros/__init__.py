"""
The ROS 2 layer: the behavior-cache node, its sensor capture, proxies and replay.

Everything here imports rclpy; the package above it never does. Start the node
with :func:`muscle_mem_ros.ros.main.main` (console script ``behavior_cache``).
"""

__all__: list[str] = []
