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

"""The Python API under bindings: arguments derived from a capture are rebound at replay."""

from __future__ import annotations

from collections import namedtuple

from muscle_mem_ros import Check, Engine
import numpy as np
import pytest


class World:
    """A cube on a line (and a door), an arm that goes where it is told."""

    def __init__(self, cube=(0.30, 0.10)):
        self.cube = np.array(cube, dtype=float)
        self.door = 0
        self.arm = None
        self.sent = []


def strict(current, recorded):
    """Pass only when every leaf is what was recorded (the engine must explain a move)."""
    return (current['door'] == recorded['door']
            and np.allclose(current['cube'], recorded['cube'], rtol=0, atol=1e-9))


def build(world, **options):
    """Return an engine with one tool that moves to the cube plus an offset, and its agent."""
    engine = Engine(**options)
    agent_calls = []

    @engine.function(
        pre_check=Check(lambda x, pose, speed: {'cube': world.cube.copy(), 'door': world.door},
                        strict),
        post_check=Check(lambda x, pose, speed: {'arm': world.arm},
                         lambda current, recorded: current == recorded))
    def move_to(x, pose, speed):
        world.sent.append((x, dict(pose), speed))
        world.arm = x

    def agent():
        agent_calls.append(world.cube.copy())
        move_to(float(world.cube[0]) + 0.05, pose={'y': float(world.cube[1]) - 0.02}, speed=0.5)

    engine.set_agent(agent).finalize()
    return engine, agent_calls


def demonstrate(engine, world, spots, **call):
    """Run the engine once per cube spot; every run must need the agent (a recording)."""
    for spot in spots:
        world.cube = np.array(spot, dtype=float)
        assert engine(**call) is False, f'cube at {spot} replayed before it was learned'


@pytest.mark.parametrize('store', ['memory', 'sqlite'])
def test_inferred_from_two_recordings_then_rebound_in_a_third_situation(tmp_path, store):
    world = World()
    engine, agent_calls = build(world, store=str(tmp_path / 'cache.db')
                                if store == 'sqlite' else None)
    demonstrate(engine, world, [(0.30, 0.10), (0.34, 0.15)])
    assert len(agent_calls) == 2

    world.cube = np.array([0.37, 0.19])
    world.sent.clear()
    assert engine() is True
    assert len(agent_calls) == 2, 'the agent was called for a situation the bindings explain'
    [(x, pose, speed)] = world.sent
    assert x == pytest.approx(0.42, abs=1e-9)
    assert pose['y'] == pytest.approx(0.17, abs=1e-9)
    assert speed == 0.5
    by_field = {s.field: s for s in engine.substitutions}
    assert set(by_field) == {'args[0]', 'kwargs.pose.y'}
    assert by_field['args[0]'].source == 'capture:cube[0]'
    assert by_field['kwargs.pose.y'].source == 'capture:cube[1]'
    assert by_field['args[0]'].value == pytest.approx(0.42, abs=1e-9)
    assert by_field['args[0]'].recorded in (pytest.approx(0.35), pytest.approx(0.39))
    assert by_field['args[0]'].origin == 'inferred' and by_field['args[0]'].step == 0
    assert engine.stats.steps_rebound == 1 and engine.stats.hits == 1
    # The post-check expected the arm where the rebound argument sent it, not where it was.
    assert engine.stats.handoffs == 0

    world.cube = np.array([0.34, 0.15])  # a recorded situation: nothing to substitute
    world.sent.clear()
    assert engine() is True
    assert engine.substitutions == ()
    assert world.sent[0][0] == pytest.approx(0.39, abs=1e-9)


def test_argument_that_varied_inconsistently_is_never_bound():
    world = World()
    engine = Engine()
    agent_calls = []
    offsets = iter([0.05, 0.07, 0.02])

    @engine.function(pre_check=Check(lambda x: {'cube': world.cube.copy(), 'door': 0}, strict))
    def move_to(x):
        world.sent.append(x)

    def agent():
        agent_calls.append(1)
        move_to(float(world.cube[0]) + next(offsets))

    engine.set_agent(agent).finalize()
    demonstrate(engine, world, [(0.30, 0.10), (0.34, 0.10)])
    world.cube = np.array([0.37, 0.10])
    assert engine() is False
    assert len(agent_calls) == 3
    assert world.sent[-1] == pytest.approx(0.39)
    assert engine.substitutions == () and engine.stats.steps_rebound == 0


def test_unexplained_deviation_never_replays():
    world = World()
    engine, agent_calls = build(world)
    demonstrate(engine, world, [(0.30, 0.10), (0.34, 0.15)])
    world.cube = np.array([0.36, 0.16])
    world.door = 1  # not a source of any binding: compared as recorded
    assert engine() is False
    assert len(agent_calls) == 3
    assert engine.substitutions == ()


def test_shift_beyond_max_shift_never_replays():
    world = World()
    engine, agent_calls = build(world, binding_max_shift=0.05)
    demonstrate(engine, world, [(0.30, 0.10), (0.34, 0.15)])

    world.cube = np.array([0.36, 0.17])  # 0.02 from the second recording: within range
    assert engine() is True
    assert world.sent[-1][0] == pytest.approx(0.41, abs=1e-9)

    world.cube = np.array([0.45, 0.15])  # 0.11 from the nearest recording
    world.sent.clear()
    assert engine() is False
    assert len(agent_calls) == 3, 'a shift beyond binding_max_shift was replayed'
    assert len(world.sent) == 1 and world.sent[0][0] == pytest.approx(0.50)
    assert engine.substitutions == ()


@pytest.mark.parametrize('infer', [True, False])
def test_infer_off_replays_the_literal_arguments(infer):
    world = World()
    engine = Engine(infer_bindings=infer)

    @engine.function(pre_check=Check(
        lambda x: float(world.cube[0]), lambda current, recorded: abs(current - recorded) < 0.05))
    def move_to(x):
        world.sent.append(x)

    engine.set_agent(lambda: move_to(float(world.cube[0]) + 0.05)).finalize()
    demonstrate(engine, world, [(0.30, 0.10), (0.40, 0.10)])
    world.cube = np.array([0.42, 0.10])  # within the user's own tolerance of the second
    assert engine() is True
    if infer:
        assert world.sent[-1] == pytest.approx(0.47, abs=1e-9)
        [sub] = engine.substitutions
        assert (sub.field, sub.source) == ('args[0]', 'capture')
    else:
        assert world.sent[-1] == 0.45, 'bindings were applied with infer_bindings=False'
        assert engine.substitutions == ()


def test_param_substitution_still_works_beside_a_binding():
    world = World()
    engine = Engine()
    agent_calls = []
    placed = []

    @engine.function(pre_check=Check(lambda x, bin_name: {'cube': world.cube.copy(), 'door': 0},
                                     strict))
    def place(x, bin_name):
        placed.append((x, bin_name))

    def agent(bin_name):
        agent_calls.append(bin_name)
        place(float(world.cube[0]) + 0.05, bin_name)

    engine.set_agent(agent).finalize()
    world.cube = np.array([0.30, 0.10])
    assert engine('b1', params={'bin': 'b1'}) is False
    world.cube = np.array([0.34, 0.10])
    assert engine('b2', params={'bin': 'b2'}) is False

    world.cube = np.array([0.37, 0.10])
    assert engine('b3', params={'bin': 'b3'}) is True
    assert placed[-1][0] == pytest.approx(0.42, abs=1e-9) and placed[-1][1] == 'b3'
    assert [s.field for s in engine.substitutions] == ['args[0]']

    assert engine('b3') is False  # the parameter is missing: never replayed
    assert agent_calls == ['b1', 'b2', 'b3']


def test_method_tool_with_a_tuple_argument_and_a_namedtuple_capture():
    Reading = namedtuple('Reading', 'x y')
    world = World()
    engine = Engine()

    class Arm:

        @engine.method(pre_check=Check(
            lambda self, target: Reading(float(world.cube[0]), float(world.cube[1])),
            lambda current, recorded: current == recorded))
        def go(self, target):
            world.sent.append(target)

    arm = Arm()
    engine.set_context(arm).set_agent(
        lambda: arm.go((1, float(world.cube[1]) + 0.25))).finalize()
    demonstrate(engine, world, [(0.30, 0.10), (0.30, 0.16)])
    world.cube = np.array([0.30, 0.20])
    assert engine() is True
    assert world.sent[-1][0] == 1
    assert world.sent[-1][1] == pytest.approx(0.45, abs=1e-9)
    assert isinstance(world.sent[-1], tuple)
    [sub] = engine.substitutions
    assert (sub.field, sub.source) == ('args[0][1]', 'capture:[1]')


@pytest.mark.parametrize('option, value', [
    ('binding_max_shift', -0.1), ('binding_max_shift', 'far'), ('binding_tolerance', 0.0),
    ('binding_tolerance', float('nan')),
])
def test_bad_binding_options_name_the_parameter(option, value):
    with pytest.raises(ValueError, match=option):
        Engine(**{option: value})


def test_later_steps_are_checked_against_the_recording_moved_by_the_shift():
    world = World()
    engine = Engine()
    agent_calls = []

    def close(current, recorded):
        return current.keys() == recorded.keys() and all(
            np.isclose(current[k], recorded[k], rtol=0, atol=1e-9) for k in current)

    scene = Check(lambda *args: {'cube': float(world.cube[0]), 'arm': world.arm}, close)

    @engine.function(pre_check=scene, post_check=scene)
    def grasp(x):
        world.sent.append(('grasp', x))
        world.arm = x

    @engine.function(pre_check=scene, post_check=scene)
    def place(target):
        world.sent.append(('place', target))
        world.arm = target
        world.cube = np.array([target, world.cube[1]])

    def agent():
        agent_calls.append(float(world.cube[0]))
        grasp(float(world.cube[0]) + 0.05)
        place(0.8)

    engine.set_agent(agent).finalize()
    for spot in (0.30, 0.34):
        world.cube, world.arm = np.array([spot, 0.1]), 0.0
        assert engine() is False

    world.cube, world.arm = np.array([0.37, 0.1]), 0.0
    world.sent.clear()
    # place's pre-check sees the arm at 0.42 and the cube at 0.37, which no recording saw:
    # it passes because the grasp moved them by the shift the binding explains.
    assert engine() is True, 'the step after a rebound one was judged literally'
    assert agent_calls == [0.30, 0.34]
    assert [name for name, _ in world.sent] == ['grasp', 'place']
    assert world.sent[0][1] == pytest.approx(0.42, abs=1e-9) and world.sent[1][1] == 0.8
    assert world.arm == 0.8 and world.cube[0] == 0.8

    world.cube, world.arm = np.array([0.37, 0.1]), 0.05  # the arm is not where it was
    assert engine() is False, 'an arm the bindings do not explain was replayed'
    assert len(agent_calls) == 3


def test_one_source_is_read_as_the_whole_capture_reads_it():
    from muscle_mem_ros.engine.captures import capture_leaf, capture_leaves
    from muscle_mem_ros.records import Snapshot
    captures = [0.3, {'cube': 0.3, 'pos': np.array([0.1, 0.2]), 'ok': True, 'name': 'x'},
                (1.0, [2.0, float('nan')]), {'m': np.array([[1.0, 2.0], [3.0, 4.0]])}]
    for capture in captures:
        every = capture_leaves(Snapshot(user=capture))
        assert every and all(capture_leaf(capture, k) == v for k, v in every.items())
    assert capture_leaf({'ok': True}, 'capture:ok') is None
    assert capture_leaf((1.0, float('nan')), 'capture:[1]') is None
    assert capture_leaf({'pos': [0.1]}, 'capture:pos[3]') is None
