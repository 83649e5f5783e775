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

"""The Python API: muscle-mem compatibility and what it does better (tree, ranking, resume)."""

from __future__ import annotations

import logging
from pathlib import Path
import subprocess
import sys
import textwrap
import threading

from core_helpers import subprocess_env
from muscle_mem_ros import Check, Engine, Resume
import pytest

# -- builder, registration, decorators --------------------------------------------------------


def test_finalize_errors_match_the_original():
    engine = Engine()
    with pytest.raises(ValueError, match=r'^Engine must have at least one tool\. Use '
                       r'engine\.function\(\) or engine\.method\(\) to register tools$'):
        engine.finalize()

    @engine.function()
    def hello(name):
        return name

    with pytest.raises(ValueError, match=r'^Engine must have an agent to fall back to\. Use '
                       r'engine\.set_agent\(your_agent\)$'):
        engine.finalize()

    class Client:

        @engine.method()
        def ping(self):
            return 1

    engine.set_agent(lambda: None)
    with pytest.raises(ValueError, match='^Engine expects to use method-based tools, but no '
                       "runtime value was provided for 'self'. Use "
                       r'engine\.set_context\(your_dependency_instance\)$'):
        engine.finalize()
    assert engine.set_context(Client()).finalize() is engine
    for call in (lambda: engine.set_agent(print), lambda: engine.set_context(1)):
        with pytest.raises(ValueError, match='^Engine is finalized and cannot be modified$'):
            call()
    with pytest.raises(ValueError, match='cannot register new functions'):
        engine.function()
    with pytest.raises(ValueError, match='cannot register new methods'):
        engine.method()


def test_calling_unfinalized_engine_finalizes_it():
    engine = Engine()
    with pytest.raises(ValueError, match='at least one tool'):
        engine('task')


def test_duplicate_tool_is_refused():
    engine = Engine()

    def hello(name):
        return name

    engine.function()(hello)
    with pytest.raises(ValueError, match='^Attempted to register duplicate tool hello$'):
        engine.function()(hello)


def test_bare_decorators_and_tool_alias():
    engine = Engine()
    calls = []

    @engine.function
    def a(x):
        calls.append(('a', x))

    @engine.tool
    def b(x):
        calls.append(('b', x))

    @engine.tool()
    def c(x):
        calls.append(('c', x))

    class Arm:

        @engine.method
        def move(self, x):
            calls.append(('move', x))

        @engine.tool(pre_check=Check(lambda self, x: x, lambda now, then: now == then))
        def grip(self, x):
            calls.append(('grip', x))

    arm = Arm()

    def agent(n):
        a(n), b(n), c(n), arm.move(n), arm.grip(n)

    engine.set_agent(agent).set_context(arm)
    assert a.__name__ == 'a' and Arm.move.__name__ == 'move'
    a(0)  # outside an engine call: passes through, nothing recorded
    assert engine.store.trajectories() == []
    assert not engine(1)
    assert engine(2)  # replayed, the agent is not called
    assert calls[1:] == [(n, 1) for n in ('a', 'b', 'c', 'move', 'grip')] * 2
    assert engine.stats.steps_replayed == 5


def test_params_replay_with_the_new_value():
    engine = Engine()
    typed = []

    @engine.function()
    def type(text: str):  # noqa: A001 - the README's example name
        typed.append(text)

    engine.set_agent(lambda task: type(task.split(': ')[1])).finalize()
    assert not engine('fill the form with name: John', params={'name': 'John'})
    assert engine('fill the form with name: Jane', params={'name': 'Jane'})
    assert typed == ['John', 'Jane']
    assert not engine('no params: Bob')  # the learned step needs params['name']
    assert typed[-1] == 'Bob'


def test_tags_are_separate_buckets():
    done = []
    engine = Engine()

    @engine.function()
    def work(x):
        done.append(x)

    engine.set_agent(work)
    assert not engine('t', tags=['one'])
    assert engine('t', tags=['one'])
    assert not engine('t', tags=['two'])
    assert engine('t', tags=['two'])
    assert not engine('t')
    assert len(engine.store.trajectories()) == 3


# -- the tree: branch on divergence, resume ---------------------------------------------------


class World:
    """A corridor: move() advances x; an obstacle matters only at x == 2."""

    def __init__(self):
        self.x = 0
        self.obstacle = False
        self.log = []

    def sense(self, *args):
        return (self.x, self.obstacle if self.x == 2 else None)


def make_corridor(*, resumable: bool):
    engine = Engine()
    world = World()
    same = Check(lambda *a: world.sense(), lambda now, then: now == then)

    @engine.function(pre_check=same)
    def move():
        world.log.append(('move', world.x))
        world.x += 1

    @engine.function(pre_check=same)
    def detour():
        world.log.append(('detour', world.x))
        world.obstacle = False

    seen = []

    def plan(start):
        for _ in range(start, 3):
            if world.x == 2 and world.obstacle:
                detour()
            move()

    if resumable:
        def agent(task, *, resume=None):
            seen.append((resume, world.x))
            plan(resume.step if resume else 0)
    else:
        def agent(task):  # looks at the world instead of being told where to resume
            seen.append((None, world.x))
            plan(world.x)

    engine.set_agent(agent).finalize()
    return engine, world, seen


def test_divergence_stops_at_the_failed_check_and_learns_a_branch():
    engine, world, seen = make_corridor(resumable=True)
    assert not engine('walk')
    world.x = 0
    assert engine('walk') and len(seen) == 1

    world.x, world.obstacle, world.log = 0, True, []
    assert not engine('walk')
    resume, x_when_called = seen[-1]
    assert isinstance(resume, Resume)
    assert resume.step == 2 and 'pre-check at step 2' in resume.reason
    assert len(resume.replayed) == 2 and resume.replayed[0].endswith('move')
    assert x_when_called == 2  # nothing ran past the failed check
    assert world.log == [('move', 0), ('move', 1), ('detour', 2), ('move', 2)]
    assert engine.stats.handoffs == 1

    store = engine.store
    (first,) = store.children(task='[]', variant='', parent=None)
    (second,) = store.children(task='[]', variant='', parent=first.id)
    branch = store.children(task='[]', variant='', parent=second.id)
    assert [n.step.tool.rsplit('.', 1)[-1] for n in branch] == ['move', 'detour']
    assert len(store.trajectories()) == 2

    world.x, world.obstacle, world.log = 0, True, []
    assert engine('walk')  # the branch is replayed
    assert world.log == [('move', 0), ('move', 1), ('detour', 2), ('move', 2)]
    world.x, world.obstacle, world.log = 0, False, []
    assert engine('walk')  # and the original path still is
    assert world.log == [('move', 0), ('move', 1), ('move', 2)]
    assert len(seen) == 2


def test_agent_without_resume_is_called_plainly():
    engine, world, seen = make_corridor(resumable=False)
    assert not engine('walk')
    world.x, world.obstacle = 0, True
    assert not engine('walk')
    assert seen[-1] == (None, 2)  # called without resume=, after two replayed steps
    world.x, world.obstacle, world.log = 0, True, []
    assert engine('walk')
    assert world.log == [('move', 0), ('move', 1), ('detour', 2), ('move', 2)]


def test_supports_resume_attribute():
    class Agent:
        supports_resume = True

        def __init__(self):
            self.kwargs = []

        def __call__(self, task, **kwargs):
            self.kwargs.append(kwargs)
            work(task)

    engine = Engine()

    @engine.function()
    def work(task):
        return task

    agent = Agent()
    engine.set_agent(agent)
    assert not engine('t')
    assert agent.kwargs == [{'resume': None}]


# -- ranking ----------------------------------------------------------------------------------


def test_best_similarity_wins_not_insertion_order():
    engine = Engine()
    world = {'light': 0.0}
    picked = []

    def similarity(now, then):
        return max(0.0, 1.0 - abs(now - then)) if abs(now - then) <= 0.5 else 0.0

    @engine.function(pre_check=Check(lambda obj: world['light'], similarity))
    def pick(obj):
        picked.append(obj)

    engine.set_agent(lambda: pick('a' if world['light'] < 0.5 else 'b'))
    assert not engine()
    world['light'] = 1.0
    assert not engine()
    assert picked == ['a', 'b']
    world['light'] = 0.6
    assert engine() and picked[-1] == 'b'  # similarity 0.6 beats 0.4
    world['light'] = 0.4
    assert engine() and picked[-1] == 'a'


def test_ties_go_to_success_count_then_recency():
    engine = Engine()
    world = {'k': 0}
    picked = []

    @engine.function(pre_check=Check(lambda obj: world['k'], lambda a, b: abs(a - b) <= 1))
    def pick(obj):
        picked.append(obj)

    engine.set_agent(lambda: pick('a' if world['k'] == 0 else 'b'))
    assert not engine()
    world['k'] = 2
    assert not engine()
    world['k'] = 1
    assert engine() and picked[-1] == 'b'  # equal similarity and successes: most recent
    world['k'] = 0
    for _ in range(3):
        assert engine() and picked[-1] == 'a'
    world['k'] = 1
    assert engine() and picked[-1] == 'a'  # now the more successful one


def test_identical_executions_are_stored_once():
    engine = Engine()

    @engine.function(pre_check=Check(lambda: 'same', lambda now, then: False))
    def act():
        pass

    engine.set_agent(act)
    for _ in range(5):
        assert not engine()  # never replayed (compare says no), always recorded the same
    assert len(engine.store.trajectories()) == 1
    assert engine.store.children(task='[]', variant='', parent=None)[0].success_count == 5


# -- failing safe ------------------------------------------------------------------------------


@pytest.mark.parametrize('where', ['capture', 'compare'])
def test_raising_check_skips_the_candidate_and_is_counted(where, caplog):
    engine = Engine()
    world = {'boom': False, 'calls': 0}

    def capture():
        if where == 'capture' and world['boom']:
            raise RuntimeError('sensor unplugged')
        return 1

    def compare(now, then):
        if where == 'compare' and world['boom']:
            raise RuntimeError('compare exploded')
        return now == then

    @engine.function(pre_check=Check(capture, compare))
    def act():
        world['calls'] += 1

    agent_calls = []
    engine.set_agent(lambda: (agent_calls.append(1), act() if not world['boom'] else None))
    assert not engine()
    assert engine()
    world['boom'] = True
    with caplog.at_level(logging.ERROR, logger='muscle_mem_ros.engine.engine'):
        assert not engine()  # no exception escapes; the agent takes over
    assert len(agent_calls) == 2
    assert engine.stats.check_errors == 1
    assert 'raised' in caplog.text and ('unplugged' in caplog.text or 'exploded' in caplog.text)


def test_failing_post_check_and_raising_tool_hand_off():
    engine = Engine()
    world = {'x': 0, 'slip': False, 'jam': False}

    def after(*args):
        return world['x']

    @engine.function(post_check=Check(after, lambda now, then: now == then))
    def push():
        if world['jam']:
            raise OSError('motor jammed')
        world['x'] += 0 if world['slip'] else 1

    resumes = []

    def agent(*, resume=None):
        resumes.append(resume)
        world['jam'] = False  # the agent clears the jam, then pushes
        push()

    engine.set_agent(agent)
    assert not engine()
    world['x'] = 0
    assert engine()
    world.update(x=0, slip=True)
    assert not engine()
    assert resumes[-1].step == 1 and 'post-check failed after step 0' in resumes[-1].reason
    world.update(x=0, slip=False, jam=True)
    assert not engine()
    assert resumes[-1] is None  # nothing was replayed: the step raised
    assert engine.stats.tool_errors == 1


def test_agent_exception_propagates_and_nothing_is_learned():
    engine = Engine()

    @engine.function()
    def act():
        pass

    def agent():
        act()
        raise KeyError('planner crashed')

    engine.set_agent(agent)
    with pytest.raises(KeyError, match='planner crashed'):
        engine()
    assert engine.store.trajectories() == []
    assert engine.store.incomplete_recordings() == []


def test_uncapturable_run_is_not_learned():
    engine = Engine()
    fail = {'on': True}

    def capture():
        if fail['on']:
            raise ValueError('camera busy')
        return 1

    @engine.function(pre_check=Check(capture, lambda a, b: a == b))
    def act():
        return 'done'

    engine.set_agent(act)
    assert not engine()
    assert engine.store.trajectories() == [] and engine.stats.check_errors == 1
    fail['on'] = False
    assert not engine()
    assert engine()


def test_unpicklable_arguments(tmp_path):
    lock = threading.Lock()
    for store in (None, tmp_path / 'c.db'):
        engine = Engine(store=store)
        used = []

        @engine.function()
        def hold(obj, used=used):
            used.append(obj)

        engine.set_agent(lambda: hold(lock))
        assert not engine()
        if store is None:
            assert engine() and used == [lock, lock]  # in memory the object is kept as is
        else:
            assert engine.stats.record_errors == 1  # cannot pickle a lock into SQLite
            assert engine.store.trajectories() == [] and used == [lock]


def test_calls_do_not_nest():
    engine = Engine()

    @engine.function()
    def act():
        pass

    def agent():
        act()
        engine()

    engine.set_agent(agent)
    with pytest.raises(RuntimeError, match='do not nest'):
        engine()


def test_method_replay_injects_the_context():
    engine = Engine()

    class Client:

        def __init__(self, name):
            self.name = name
            self.said = []

        @engine.method()
        def hello(self, who):
            self.said.append(who)

    recorder, replayer = Client('rec'), Client('rep')
    engine.set_agent(lambda: recorder.hello('world')).set_context(replayer)
    assert not engine()
    assert engine()
    assert recorder.said == ['world'] and replayer.said == ['world']


# -- persistence -------------------------------------------------------------------------------

PERSISTENT = textwrap.dedent("""
    import sys
    from muscle_mem_ros import Check, Engine

    state = {'x': int(sys.argv[2])}
    engine = Engine(store=sys.argv[1])

    @engine.function(pre_check=Check(lambda n: state['x'], lambda a, b: a == b))
    def step(n):
        state['x'] += n

    def agent(task):
        step(1)
        step(2)

    engine.set_agent(agent).finalize()
    print(engine('go'), state['x'], flush=True)
""")


def test_persistent_store_is_used_by_the_next_process(tmp_path: Path):
    script = tmp_path / 'job.py'
    script.write_text(PERSISTENT)
    db = tmp_path / 'cache' / 'mm.db'

    def run(start: int) -> str:
        out = subprocess.run([sys.executable, str(script), str(db), str(start)],
                             env=subprocess_env(), capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert run(0) == ['False', '3']
    assert run(0) == ['True', '3']  # replayed from the file by another process
    assert run(5) == ['False', '8']  # different world: the agent again
    assert run(5) == ['True', '8']


def test_metrics_count_phases_when_enabled():
    engine = Engine()

    @engine.function(pre_check=Check(lambda: 1, lambda a, b: a == b))
    def act():
        pass

    engine.set_agent(act)
    engine()
    assert engine.metrics.report() == {}  # off by default, like the original
    engine.metrics.enable()
    assert engine()
    report = engine.metrics.report()
    assert report['lookup']['count'] == 2 and report['replay']['count'] == 1
    assert report['capture']['count'] == 1 and report['compare']['count'] == 1
    engine.metrics.reset()
    assert engine.metrics.report() == {}


def test_learned_recovery_after_a_failed_post_check_replays():
    engine = Engine()
    world = {'x': 0, 'slip': False}

    def position(*args):
        return world['x']

    def same(now, then):
        return now == then

    @engine.function(post_check=Check(position, same))
    def push():
        world['x'] += 0 if world['slip'] else 1

    @engine.function(pre_check=Check(position, same))
    def fix():
        world['x'] = 1

    resumes = []

    def agent(*, resume=None):
        resumes.append(resume)
        if resume is None:
            push()
        if world['x'] != 1:
            fix()

    engine.set_agent(agent)
    assert not engine()  # learns [push]
    world.update(x=0, slip=True)
    assert not engine()  # push slips: its post-check fails, nothing learned after it
    assert resumes[-1].step == 1 and 'post-check failed after step 0' in resumes[-1].reason
    world.update(x=0, slip=True)
    calls = len(resumes)
    assert engine()  # push slips again, and the recovery the agent taught replays
    assert world['x'] == 1 and len(resumes) == calls
