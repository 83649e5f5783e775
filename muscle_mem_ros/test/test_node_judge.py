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
The node's judge (ros/execution/judge.py) on a real tree: each step's candidates judged once.

The Replayer, its SensorJudge and the walk are the node's own, over a real MemoryStore
tree; the sensor hub and the tool are small stand-ins (the values a sensor reads, a
server that succeeds), so no ROS graph is needed. End to end the same judge runs in
the test_node_* modules against real servers and sensors.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
import inspect
import json
import time
from typing import Any

from muscle_mem_ros import MemoryStore
from muscle_mem_ros.bindings.rules import Declared
from muscle_mem_ros.records import SensorSpec, Snapshot, Step, StepStatus, ToolKind
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.ros.capture.forwarding import CallOutcome
from muscle_mem_ros.ros.execution.judge import SensorJudge
from muscle_mem_ros.ros.execution.replay import Replayer
from muscle_mem_ros.ros.rclfix.sync import CancelToken
import pytest

TASK = 'judged'
TOOL = '/arm/move'


class Hub:
    """The sensor hub as the judge reads it: one sensor, ``object``, reading ``value``."""

    names = ('object',)

    def __init__(self, value: float) -> None:
        self.value = value
        self.problem = ''

    @staticmethod
    def now() -> float:
        return time.monotonic()

    def silent(self) -> list[str]:
        return []

    def wait_first(self, timeout: float) -> list[str]:
        return []

    def wait_newer(self, since: float, timeout: float) -> bool:
        return True

    def lagging(self, since: float) -> list[str]:
        return []

    def problems(self) -> dict[str, str]:
        return {'object': self.problem} if self.problem else {}

    def capture(self) -> Snapshot:
        now = self.now()
        return Snapshot(features={'object': (self.value,)}, stamps={'object': now},
                        taken_at=now)


@dataclass
class Tool:
    """A tool proxy whose server succeeds; it keeps the fields each call set."""

    sent: list[dict[str, Any] | None] = field(default_factory=list)

    def call(self, payload: bytes, *, timeout: float, cancel: CancelToken,
             fields: dict[str, Any] | None = None, watch: Any = None,
             say: Any = None) -> CallOutcome:
        self.sent.append(dict(fields) if fields else None)
        now = time.monotonic()
        return CallOutcome(StepStatus.SUCCEEDED, '', now, now)


@dataclass
class Reporter:
    events: list[Any] = field(default_factory=list)

    def event(self, **kwargs: Any) -> None:
        self.events.append(kwargs)

    def progress(self, *, step: int, total: int, detail: str) -> None:
        pass


def snap(value: float) -> Snapshot:
    return Snapshot(features={'object': (value,)}, stamps={'object': 0.0})


def learn(store: MemoryStore, steps: int) -> None:
    """Record one trajectory of ``steps`` moves to the object (at 0.0), each seeing it."""
    recording = store.begin(task=TASK, variant='', params_json='{}', parent=None)
    for i in range(steps):
        goal = json.dumps({'x': 0.0, 'i': i})
        recording.append(Step(tool=TOOL, kind=ToolKind.ACTION, type_name='t/action/Move',
                              payload=goal.encode(), payload_json=goal, pre=snap(0.0),
                              post=snap(0.0)))
    recording.commit()


def counted(monkeypatch: pytest.MonkeyPatch, name: str) -> Counter[int]:
    """Count the calls of ``SensorJudge.<name>`` by step, the real method still judging."""
    calls: Counter[int] = Counter()
    real = getattr(SensorJudge, name)
    signature = inspect.signature(real)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls[signature.bind(*args, **kwargs).arguments['step']] += 1
        return real(*args, **kwargs)
    monkeypatch.setattr(SensorJudge, name, wrapper)
    return calls


def replayer(store: MemoryStore, hub: Hub, tool: Tool, **kwargs: Any) -> Replayer:
    return Replayer(store=store, hub=hub, tools={TOOL: tool},  # type: ignore[arg-type]
                    sensors=[SensorSpec('object', (0.01,))], allow_unchecked_replay=False,
                    step_timeout=1.0, post_timeout=0.1, infer_bindings=False, **kwargs)


def walked(node: Replayer) -> Any:
    return node.walk(tree=node.trees.view(TASK, ''), reporter=Reporter(),
                     cancel=CancelToken())


def test_a_literal_walk_judges_each_step_once(monkeypatch):
    store = MemoryStore()
    learn(store, 3)
    unusable = counted(monkeypatch, 'unusable')
    matched = counted(monkeypatch, 'pick')
    tool = Tool()
    result = walked(replayer(store, Hub(0.0), tool))
    assert result.complete and result.steps_replayed == 3, result.reason
    assert tool.sent == [None, None, None]  # sent as recorded
    assert matched == {0: 1, 1: 1, 2: 1}  # the literal path: the matcher judged each step
    # one check of the tools and the sensors per step, the step after the last included
    assert unusable == {0: 1, 1: 1, 2: 1, 3: 1}


def test_a_bound_walk_judges_each_step_once(monkeypatch):
    store = MemoryStore()
    learn(store, 2)
    unusable = counted(monkeypatch, 'unusable')
    matched = counted(monkeypatch, 'pick')
    tool = Tool()
    node = replayer(store, Hub(0.2), tool,
                    declared=[Declared(TOOL, 'x', 'sensor:object[0]', 0.5)])
    result = walked(node)
    assert result.complete and result.steps_replayed == 2, result.reason
    assert [sent and round(sent['x'], 6) for sent in tool.sent] == [0.2, 0.2]
    assert not matched  # the binding judge judged every step
    assert unusable == {0: 1, 1: 1, 2: 1}


def test_a_broken_sensor_stops_the_walk_with_its_text(monkeypatch):
    store = MemoryStore()
    learn(store, 1)
    unusable = counted(monkeypatch, 'unusable')
    hub = Hub(0.0)
    hub.problem = 'no message yet'
    result = walked(replayer(store, hub, Tool()))
    assert not result.complete
    assert result.resume.kind is FailureKind.PRE_CHECK
    assert result.reason == 'pre-check failed at step 0: no message yet'
    assert unusable == {0: 1}
