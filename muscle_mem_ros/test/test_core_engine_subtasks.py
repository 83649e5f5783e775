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
The Python API and skills: an Engine task calls another Engine's task from inside a tool.

docs/subtasks.md says how: calls of one engine do not nest (muscle-mem's semantics), and a skill
is a second engine whose call is a tool of the first: the first records one call, and its
replay calls the tool again, which replays the skill (or asks the skill's agent).
"""

from __future__ import annotations

from muscle_mem_ros import Check, Engine
import pytest


class World:
    """A one-dimensional world: the cube's position and the gripper's."""

    def __init__(self) -> None:
        self.cube = 0.30
        self.gripper = 0.0
        self.held = False


def _skills(world: World) -> tuple[Engine, Engine, dict[str, int]]:
    """Return (the parent engine, the pick engine, the agents' call counts)."""
    asked = {'parent': 0, 'pick': 0}
    cube_check = Check(capture=lambda *a, **k: round(world.cube, 3),
                       compare=lambda current, recorded: current == recorded)
    pick = Engine()

    @pick.function(pre_check=cube_check)
    def move(x: float) -> None:
        world.gripper = x

    @pick.function()
    def grip() -> None:
        world.held = abs(world.gripper - world.cube) < 1e-9

    def pick_agent(*_args: object, **_kwargs: object) -> None:
        asked['pick'] += 1
        move(world.cube)
        grip()

    pick.set_agent(pick_agent).finalize()

    parent = Engine()

    @parent.function(pre_check=cube_check)
    def pick_skill() -> bool:
        return pick('pick')

    @parent.function()
    def drop(x: float) -> None:
        world.gripper, world.held = x, False

    def parent_agent(*_args: object, **_kwargs: object) -> None:
        asked['parent'] += 1
        pick_skill()
        drop(0.5)

    parent.set_agent(parent_agent).finalize()
    return parent, pick, asked


def test_a_skill_engine_called_from_a_tool_replays_under_its_caller():
    world = World()
    parent, pick, asked = _skills(world)
    assert not parent('restock')
    assert asked == {'parent': 1, 'pick': 1}
    world.gripper, world.held = 0.0, False
    assert parent('restock')  # the parent replays its call of the skill, the skill replays
    assert asked == {'parent': 1, 'pick': 1}
    assert world.gripper == 0.5
    assert pick('pick')  # learned once, served to any caller
    assert asked['pick'] == 1


def test_the_skill_misses_alone_when_its_world_changed():
    world = World()
    parent, pick, asked = _skills(world)
    assert not parent('restock')
    world.cube = 0.40  # every check fails: the parent misses and its agent calls the skill
    assert not parent('restock')
    assert asked == {'parent': 2, 'pick': 2}
    assert world.held is False and world.gripper == 0.5


def test_calls_of_one_engine_do_not_nest():
    engine = Engine()

    @engine.function()
    def inner() -> bool:
        return engine('other')

    engine.set_agent(lambda *a, **k: inner()).finalize()
    with pytest.raises(RuntimeError, match='engine calls do not nest'):
        engine('outer')
