"""Muscle memory for robots: a behavior cache in front of a planning agent.

The top-level package is the ROS-free core: importing it never imports rclpy.
"""
