# Copyright 2026 muscle_mem_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""
``sim_demo --record-bag``: a bag of the agent doing the task without the cache, to learn from.

What a team already has on disk is a recording of its robot doing tasks with no cache in
front of it: teleop sessions, an agent's runs. This records one: the sim robot and the demo
agent run alone (the agent sends its goals to the robot's own servers, with service
introspection on, as ``ros2 bag record --all-services`` would capture it), and the agent
does ``pick_and_place`` three times with the cube at three positions. The recorder is
:class:`~muscle_mem_ros.ros.bags.recorder.BagRecorder` (``ros2 bag`` is not on the PyPI
wheels): every sensor topic and every tool's events of the cache's params file (the
demo's ``config/sim_demo.yaml``), the agent's ExecuteTask events (so ``muscle-mem learn``
splits the bag into its three tasks) and ``/robot_description`` (the body). Then it prints
the commands that learn the task from the bag and show what was learned.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
import sys
import time
from typing import Any

from muscle_mem_demo.physics import OBJECT_START
from muscle_mem_demo.processes import ChildProcesses, config_path
from muscle_mem_demo.story import Expectation, RunMode, RunSpec, TASK

__all__ = ['RECORDED_POSITIONS', 'record_bag']

RECORDED_POSITIONS: tuple[tuple[float, float, float], ...] = (
    OBJECT_START,
    (OBJECT_START[0] - 0.045, OBJECT_START[1] + 0.04, OBJECT_START[2]),
    (OBJECT_START[0] + 0.04, OBJECT_START[1] - 0.05, OBJECT_START[2]),
)
"""Where the cube is for each recorded pick_and_place (3 positions: bindings are inferred)."""
AGENT = '/demo_agent'
ROBOT = '/sim_robot'


def _commands(args: argparse.Namespace) -> dict[str, list[str]]:
    python = sys.executable
    return {
        'sim_robot': [python, '-m', 'muscle_mem_demo.robot_node', '--ros-args',
                      '-p', f'rtf:={float(args.rtf)}'],
        'demo_agent': [python, '-m', 'muscle_mem_demo.agent_node', '--ros-args',
                       '-p', f'think_time:={float(args.think_time)}',
                       '-p', 'introspection:=true'],
    }


def _topics(params_file: Path) -> dict[str, tuple[str, object]]:
    """Return what to record: the params file's sensors and tools, the agent, the body."""
    from muscle_mem_ros.ros.bags.command import read_config
    from muscle_mem_ros.ros.bags.recorder import sensor_topics, tool_topics
    from std_msgs.msg import String

    config = read_config(params_file)
    topics: dict[str, tuple[str, object]] = sensor_topics(config.sensors)
    for tool in config.tools:
        topics.update(tool_topics(tool.server, tool.type_name))
    topics.update(tool_topics(f'{AGENT}/execute_task', 'muscle_mem_interfaces/action/ExecuteTask'))
    topics['/robot_description'] = ('std_msgs/msg/String', String)
    return topics


def record_bag(args: argparse.Namespace, say: Callable[[str], None]) -> bool:
    """
    Record the bag (``<output-dir>/demo.mcap``); return True when every run placed the cube.

    :raises NodeProcessError: a node exited early.
    :raises DriverError: a node did not come up or stopped answering.
    """
    from muscle_mem_demo.driver import StoryDriver
    from muscle_mem_ros.ros.bags.recorder import BagRecorder
    import rclpy

    output: Path = args.output_dir
    output.mkdir(parents=True, exist_ok=True)
    bag = output / 'demo.mcap'
    params_file = args.params_file or config_path('sim_demo.yaml')
    topics = _topics(params_file)
    say(f'recording {bag}: the agent alone, {len(RECORDED_POSITIONS)} x {TASK} '
        f'(think time {args.think_time} s/step, rtf {args.rtf})')
    held = True
    rclpy.init(args=[])
    try:
        with ChildProcesses(log_dir=output / 'logs') as children:
            for name, command in _commands(args).items():
                children.start(name, command)
            driver = StoryDriver(cache_action=f'{AGENT}/execute_task', agent=AGENT)
            recorder = None
            try:
                driver.wait_ready(timeout=args.startup_timeout, alive=children.check,
                                  cache=False)
                recorder = BagRecorder(bag, topics, context=driver.context)
                _wait_publishers(driver, topics, children.check)
                timeout = 60.0 + 15.0 * (args.think_time + 3.0 / args.rtf)
                for number, position in enumerate(RECORDED_POSITIONS, 1):
                    spec = RunSpec(number=number, title=f'cube at {position[:2]}',
                                   nudge=position, expect=Expectation(
                                       mode=RunMode.MISS, replayed=0, by_agent=8,
                                       agent_calls=(0,)))
                    driver.prepare(spec)
                    outcome = driver.execute(spec, timeout=timeout)
                    placed = outcome.success and outcome.placed
                    held = held and placed
                    say(f'  {number}. cube at ({position[0]:.3f}, {position[1]:.3f}): agent did '
                        f'{outcome.by_agent} steps in {outcome.wall_time:.1f} s, cube '
                        f'{outcome.placement_error * 1000:.1f} mm from the target: '
                        f"{'PASS' if placed else 'FAIL ' + outcome.message}")
                    children.check()
                time.sleep(0.3)  # the last messages of the last run
            finally:
                if recorder is not None:
                    recorder.close()
                children.stop()
                driver.close()
    finally:
        rclpy.try_shutdown()
    counts = recorder.counts if recorder is not None else {}
    say(f'wrote {bag}: {sum(counts.values())} messages on {sum(1 for c in counts.values() if c)} '
        'topics')
    say('learn the task from it, then see what was learned:')
    say(f'  muscle-mem learn {bag} --params-file {params_file} --task {TASK} '
        f'--store {output / "learned.db"}')
    say(f'  muscle-mem tree {output / "learned.db"} {TASK}')
    return held


def _wait_publishers(node: Any, topics: dict[str, tuple[str, object]],
                     alive: Callable[[], None], timeout: float = 15.0) -> None:
    """
    Wait until the recorder's subscriptions are matched by the publishers' processes.

    Discovery runs in each process: this one seeing a publisher does not mean the
    publisher's process has matched the new subscription, and what it sends before that is
    lost (the first goal's events). The round trip of
    :func:`~muscle_mem_ros.ros.rclfix.matching.wait_for_node_matched` (a client created
    after the subscriptions, answered by each publishing node) closes that gap.
    """
    from muscle_mem_ros.ros.rclfix.matching import wait_for_node_matched

    wanted = [t for t in topics if 'feedback' not in t and '/_action/status' not in t]
    deadline = time.monotonic() + timeout
    while any(node.count_publishers(t) == 0 for t in wanted):
        alive()
        if time.monotonic() > deadline:
            missing = [t for t in wanted if node.count_publishers(t) == 0]
            raise RuntimeError(f'nothing publishes {", ".join(missing)}')
        time.sleep(0.05)
    for peer in (AGENT, ROBOT):
        if not wait_for_node_matched(node, peer, max(1.0, deadline - time.monotonic())):
            raise RuntimeError(f'{peer} did not answer: the recording may miss its events')
