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
A real SQLite store with known recordings, for the command-line, export and calibration tests.

Task ``pick`` (params ``{"bin": 3}``): ``REPEATS`` successful runs of the same two
steps (an arm goal of the demo's FollowJointTrajectory type, then a
``test_msgs`` Fibonacci goal), each with pre snapshots at a known base plus
Gaussian noise (``JOINT_NOISE`` on the three joints, ``OBJECT_NOISE`` on the
object's position); and divergences: ``ROOT_DIVERGENCES`` runs whose object was
``DIVERGENCE`` metres away, so the agent sent a different arm goal (sibling
first steps), and one run that diverged at the second step (a different
Fibonacci order) under the first run's first step. Task ``wave``: one
trajectory of one ``std_srvs`` SetBool request. Counters: hits, misses, one
replay.

Goals are real CDR (rclpy serialization, padding zeroed), as the node stores them; everything
goes through the store's public API.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from builtin_interfaces.msg import Duration
from muscle_mem_demo_interfaces.action import FollowJointTrajectory
from muscle_mem_ros.records import Snapshot, Step, ToolKind
from muscle_mem_ros.ros.messages.cdr import canonical_cdr
from muscle_mem_ros.store import SqliteStore
import numpy as np
from rclpy.serialization import serialize_message
from std_srvs.srv import SetBool
from test_msgs.action import Fibonacci
from trajectory_msgs.msg import JointTrajectoryPoint

REPEATS = 10
ROOT_DIVERGENCES = 2
JOINT_BASE = (0.1, -0.4, 0.7)
OBJECT_BASE = (0.4, 0.1, 0.05)
JOINT_NOISE = 0.004
OBJECT_NOISE = 0.002
DIVERGENCE = 0.2
ARM = '/arm/follow_joint_trajectory'
ARM_TYPE = 'muscle_mem_demo_interfaces/action/FollowJointTrajectory'
FIB = '/fib'
FIB_TYPE = 'test_msgs/action/Fibonacci'
GRIPPER = '/gripper'
GRIPPER_TYPE = 'std_srvs/srv/SetBool'
SENSOR_PARAMS = {
    'joints': {'tolerance': [0.05], 'mode': 'abs'},
    'object': {'tolerance': [0.03], 'mode': 'abs'},
}


def arm_goal(positions: list[float]) -> FollowJointTrajectory.Goal:
    """Return an arm goal moving three joints to ``positions`` in one second."""
    goal = FollowJointTrajectory.Goal()
    goal.trajectory.joint_names = ['j1', 'j2', 'j3']
    goal.trajectory.points = [JointTrajectoryPoint(
        positions=positions, time_from_start=Duration(sec=1, nanosec=0))]
    return goal


def _step(tool: str, kind: ToolKind, type_name: str, message: object, data: dict,
          pre: Snapshot, post: Snapshot, duration: float) -> Step:
    return Step(tool=tool, kind=kind, type_name=type_name,
                payload=canonical_cdr(bytes(serialize_message(message)), type(message)),
                payload_json=json.dumps(data),
                pre=pre, post=post, duration=duration)


def _snap(rng: np.random.Generator, t: float, object_offset: float = 0.0) -> Snapshot:
    joints = np.asarray(JOINT_BASE) + rng.normal(0.0, JOINT_NOISE, 3)
    obj = np.asarray(OBJECT_BASE) + rng.normal(0.0, OBJECT_NOISE, 3)
    obj[0] += object_offset
    return Snapshot(features={'joints': tuple(joints.tolist()), 'object': tuple(obj.tolist())},
                    stamps={'joints': t - 0.01, 'object': t - 0.02}, taken_at=t)


def _run(store: SqliteStore, rng: np.random.Generator, *, t0: float, arm: list[float],
         order: int, object_offset: float = 0.0, parent: int | None = None,
         first: bool = True) -> int:
    steps = []
    t = t0
    if first:
        pre = _snap(rng, t, object_offset)
        post = _snap(rng, t + 1.2, object_offset)
        steps.append(_step(ARM, ToolKind.ACTION, ARM_TYPE, arm_goal(arm),
                           {'trajectory': {'points': [{'positions': arm}]}}, pre, post, 1.1))
        t += 1.5
    pre = _snap(rng, t, object_offset)
    post = _snap(rng, t + 0.3, object_offset)
    steps.append(_step(FIB, ToolKind.ACTION, FIB_TYPE, Fibonacci.Goal(order=order),
                       {'order': order}, pre, post, 0.25))
    info = store.add_trajectory(task='pick', variant='{"bin":3}', params_json='{"bin":3}',
                                steps=steps, parent=parent)
    return info.id


def build_store(path: Path, seed: int = 7) -> Path:
    """Write the store described in the module docstring to ``path``; return it."""
    rng = np.random.default_rng(seed)
    with SqliteStore(path=path) as store:
        first = None
        for i in range(REPEATS):
            tid = _run(store, rng, t0=10.0 + 100.0 * i, arm=[0.5, 0.2, 0.1], order=5)
            first = first or tid
        for i in range(ROOT_DIVERGENCES):
            _run(store, rng, t0=5000.0 + 100 * i, arm=[0.7, 0.2, 0.1], order=5,
                 object_offset=DIVERGENCE)
        root = store.trajectory(first).node_ids[0]
        _run(store, rng, t0=9000.0, arm=[], order=7, object_offset=DIVERGENCE, parent=root,
             first=False)
        gripper = SetBool.Request(data=True)
        snap = Snapshot(features={'joints': JOINT_BASE}, stamps={'joints': 1.0}, taken_at=1.0)
        store.add_trajectory(task='wave', variant='{}', params_json='{}', steps=[
            _step(GRIPPER, ToolKind.SERVICE, GRIPPER_TYPE, gripper, {'data': True}, snap, snap,
                  0.1)])
        for hit in (True, True, True, False):
            store.note_outcome(task='pick', hit=hit)
        store.note_replay(trajectory_id=first)
    return path


def fingerprint(path: Path) -> tuple[str, int, int]:
    """Return the file's sha256, size and mtime (ns): equal before and after = untouched."""
    data = path.read_bytes()
    stat = os.stat(path)
    return hashlib.sha256(data).hexdigest(), stat.st_size, stat.st_mtime_ns
