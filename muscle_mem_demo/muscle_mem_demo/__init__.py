"""
The MuJoCo demo of muscle_mem_ros: the demo robot, the demo planning agent, the story.

Its own colcon package, so the behavior cache (muscle_mem_ros) needs neither MuJoCo nor
matplotlib; its interfaces are in muscle_mem_demo_interfaces.

ROS-free modules: :mod:`.kinematics` (arm geometry), :mod:`.trajectory` (joint paths),
:mod:`.physics` (the simulation, stepped in its own thread), :mod:`.planner` (pick-and-place
one step at a time), :mod:`.story` (the demo's runs and their verdict), :mod:`.report`
(table and PNG), :mod:`.processes` (child processes). ROS nodes: :mod:`.robot_node`
(console script ``sim_robot``), :mod:`.agent_node` (``demo_agent``); the demo:
:mod:`.demo` (``sim_demo``) with its ROS client :mod:`.driver`. The model is ``arm.xml``.
Importing this package imports neither rclpy nor mujoco.
"""

__all__: list[str] = []
