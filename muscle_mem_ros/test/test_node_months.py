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
A cache that runs for months, on the real node (issue 30), on SQLite and PostgreSQL.

Repeats with a millimetre of noise fold into their branch (shadow:2 means two runs);
every replay is booked against its trajectory (completed, false hit, handed back); a
branch whose replays keep failing steps back (step_back 2/3), the agent does the task in
shadow meanwhile, and two agreeing shadow runs let it replay again.
"""

from __future__ import annotations

from action_msgs.msg import GoalStatus
from muscle_mem_interfaces.msg import CacheEvent
from muscle_mem_ros.store import open_store
from node_helpers import Harness, OBJECT_HOME
from pg_server import _make
import pytest


@pytest.fixture(scope='module', params=['sqlite', 'postgres'])
def h(request, tmp_path_factory):
    server = _make() if request.param == 'postgres' else None
    tmp = tmp_path_factory.mktemp(f'months_{request.param}')
    h = Harness(tmp=tmp)
    h.spec = server.new_url() if server is not None else str(tmp / 'cache.db')
    try:
        # bindings off: what folds here is noise, not a field following a sensor (the fold
        # holds with bindings off too), and a second situation is a branch of its own
        h.start_cache(store_path=h.spec, step_back='2/3', replay_requires='shadow:2',
                      infer_bindings=False)
        yield h
    finally:
        h.close()
        if server is not None:
            server.destroy()


@pytest.fixture
def world(h):
    h.robot.reset()
    h.set_mode('learn')
    assert h.cache is not None and h.cache.alive(), h.cache.output()
    yield h
    assert h.cache is not None and h.cache.alive(), h.cache.output()


def _books(h, task):
    with open_store(h.spec) as store:
        infos = store.trajectories(task=task)
        return infos, store.replay_books(task=task), store.agreement(task=task)[0]


def _at(h, dx: float) -> None:
    """Home the arm, and the object ``dx`` from its home (each run starts where they all do)."""
    h.robot.reset()
    h.robot.move_object((OBJECT_HOME[0] + dx, OBJECT_HOME[1], OBJECT_HOME[2]))


def test_repeats_with_noise_fold_into_one_branch_and_shadow_n_means_n_runs(world):
    h = world
    h.set_mode('shadow')
    for dx in (0.0, 0.001, 0.002):  # goals 1 and 2 mm apart: noise, not another situation
        _at(h, dx)
        run = h.run_task('fold')
        assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    infos, _, agreement = _books(h, 'fold')
    assert len(infos) == 1, [i.node_ids for i in infos]
    with open_store(h.spec) as store:
        assert [n.success_count for n in store.path(infos[0].id)] == [3, 3, 3, 3]
    assert agreement[infos[0].id].agreed == 2  # the second and third run agreed with it
    h.set_mode('learn')
    _at(h, 0.001)
    run = h.run_task('fold')  # shadow:2 met after two runs in shadow
    assert run.result.cache_hit, run.result.message
    _at(h, 0.010)  # 10 mm: goals 10 mm apart are another goal (agreement 5 mm)
    h.set_mode('shadow')
    run = h.run_task('fold')
    assert run.status == GoalStatus.STATUS_SUCCEEDED
    assert len(_books(h, 'fold')[0]) == 2


def test_replays_are_booked_and_a_failing_branch_steps_back_then_earns_its_way_back(world):
    h = world
    h.set_mode('shadow')
    for _ in range(3):  # the first run is learned, the next two agree with it (shadow:2)
        h.robot.reset()
        run = h.run_task('back')
        assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
    h.set_mode('learn')
    h.robot.reset()
    run = h.run_task('back')
    assert run.result.cache_hit, run.result.message  # completed: booked
    (info,), books, _ = _books(h, 'back')
    assert books[info.id].completed == 1
    events = len(h.events)
    for failure in range(2):  # the arm goal of step 2 aborts after its pre-check passed
        h.robot.reset()
        h.robot.abort_at = {len(h.robot.arm_goals) + 1}
        agent_calls = len(h.agent.calls)
        run = h.run_task('back')
        assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
        assert not run.result.cache_hit and len(h.agent.calls) == agent_calls + 1
    (info,), books, _ = _books(h, 'back')
    book = books[info.id]
    assert (book.completed, book.false_hits) == (1, 2), book
    assert book.stepped_back and '2 of its last 3 replays failed (2 false hits' in book.why
    (stepped,) = [e for e in h.events[events:] if e.type == CacheEvent.STEPPED_BACK]
    assert stepped.task == 'back' and stepped.trajectory_id == info.id
    assert 'stepped back' in stepped.detail
    # held: the agent does the task, in shadow, until two runs agree with the branch
    h.robot.reset()
    for _ in range(2):
        agent_calls = len(h.agent.calls)
        run = h.run_task('back')
        assert run.status == GoalStatus.STATUS_SUCCEEDED, run.result.message
        assert not run.result.cache_hit and len(h.agent.calls) == agent_calls + 1
        assert 'stepped back' in h.agent.calls[-1].resume_reason, h.agent.calls[-1]
        h.robot.reset()
    run = h.run_task('back')
    assert run.result.cache_hit, run.result.message
    (info,), books, _ = _books(h, 'back')
    assert books[info.id].completed == 2 and books[info.id].false_hits == 2
    assert len(_books(h, 'back')[0]) == 1  # nothing deleted, nothing added


def test_a_branch_learned_beside_a_trusted_one_earns_its_shadow_runs(world):
    h = world
    h.set_mode('shadow')
    for _ in range(3):  # branch A (the object at home): learned, then agreed twice
        _at(h, 0.0)
        assert h.run_task('beside').status == GoalStatus.STATUS_SUCCEEDED
    h.set_mode('learn')
    _at(h, 0.0)
    assert h.run_task('beside').result.cache_hit
    _at(h, 0.10)  # another situation: A's checks fail; the agent does it, B is learned
    run = h.run_task('beside')
    assert run.status == GoalStatus.STATUS_SUCCEEDED and not run.result.cache_hit
    infos, _, agreement = _books(h, 'beside')
    (b,) = [i for i in infos if i.id != min(i.id for i in infos)]
    for agreed in (1, 2):  # B is held (shadow:2): its runs are compared with it meanwhile
        _at(h, 0.10)
        run = h.run_task('beside')
        assert not run.result.cache_hit and 'shadow: 4 of 4 steps agreed' in run.result.message
        assert _books(h, 'beside')[2][b.id].agreed == agreed
    _at(h, 0.10)
    run = h.run_task('beside')
    assert run.result.cache_hit and run.result.trajectory_id == b.id, run.result.message
