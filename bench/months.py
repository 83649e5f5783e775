#!/usr/bin/env python3
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
A fleet's year in a few minutes: the cache's store and learning code, run after run.

Workload: ``--tasks`` tasks, ``--runs`` runs each, spread over 365 simulated days
and interleaved at random (a fleet's robots sharing one store). No ROS graph: the
world, the agent and the robot are simulated; the cache is the library's own code,
as the node calls it. Every task has a seeded world of a few distinct situations (an
object on a 20 cm grid; 3 to 6 at a time); each run picks one. A run has three
action steps (approach above the object, go down to it, place it in a bin); every
step's pre and post snapshots are the object's position (tolerance 20 mm) and six
joint angles (tolerance 0.05 rad), each with Gaussian noise of 1 mm (1 mrad); the
agent's goals are the object's position as it perceives it (noise 1 mm) plus its
plan's offsets, and the bin's position (not sensed).

Over the year, per task and at seeded random runs: a situation is retired and a new
one appears elsewhere (1.5 a year on average: the old branch goes stale); the bin of
a situation moves (2 a year: a hidden change, the sensors see the same world, the
place step of a branch learned before fails: a false hit); the agent changes its plan
(1 a year: the approach height moves by 2 to 4 cm).

One run, as the node's ExecuteTask does it (ros/execution/tasks.py): the tree read
once (``Trees.view``: bindings learned from what was committed since), the gate
asked (``gate_tree``, with every trajectory's replay book); when the gate holds
every trajectory of the task, the agent runs in shadow (``replay.shadow``: the
cache's predictions compared, ``note_shadow``), and so it does after a walk that
missed at its first step while the gate holds some trajectories back; otherwise the walk
(``replay.walk.walk``) with a judge built as the node's (the gate's filter, the
Matcher while nothing is bound, the BindingJudge otherwise) and an executor whose
step fails when the simulated world says so. A complete walk is counted
(``note_replay``); every walk that executed a step is booked
(``outcome_of``, ``book_replay`` with ``booked``, step_back 3/5). When the walk did not
complete, the agent does the rest from where it stopped, and its run is filed
(``file_steps`` with agreement 5 mm: a repeat folds into its branch) and added
(``add_trajectory``), as ``Recorder.finish`` with ``Replayer.file`` does. Half the
tasks run under ``replay_requires: none``, half under ``shadow:2``.

The store's clock is the simulation's: the store modules' ``time`` is replaced by
one whose ``time()`` is the simulated wall time (recency, ``last_used``), and the
booking's ``now`` is the same; latencies are measured with ``time.perf_counter``.

Usage: bench/months [--quick] [--tasks 20] [--runs 2000] [--postgres URL|auto]
"""

from __future__ import annotations

import argparse
from collections import Counter, defaultdict
import contextlib
from dataclasses import dataclass, field
import importlib
import json
import os
from pathlib import Path
import platform
import sys
import tempfile
import time
from typing import Any

from _common import cpu_name, ms, pct, pg_server
from muscle_mem_ros import Matcher, SensorSpec, Snapshot, SqliteStore, Step, ToolKind
from muscle_mem_ros.bindings.filing import file_steps
from muscle_mem_ros.bindings.judge import BindingJudge, checked, Observation, SensorSenses
from muscle_mem_ros.bindings.rules import element_tolerances, sensor_sources
from muscle_mem_ros.checks.tolerance import ToleranceCheck
from muscle_mem_ros.cli.prune import select
from muscle_mem_ros.records import ReplayOutcome, StepStatus
from muscle_mem_ros.replay.booking import booked, outcome_of, StepBack
from muscle_mem_ros.replay.gates import Gate, gate_tree
from muscle_mem_ros.replay.shadow import followed, shadow
from muscle_mem_ros.replay.treeview import Trees
from muscle_mem_ros.replay.walk import blamed, Miss, Verdict, walk
from muscle_mem_ros.resume import FailureKind
from muscle_mem_ros.store import open_store
import numpy as np

DAY = 86400.0
YEAR = 365 * DAY
START = 1_767_225_600.0  # 2026-01-01 00:00 UTC
NOISE = 0.001
AGREEMENT = 0.005
SENSORS = (SensorSpec('object', (0.02,)), SensorSpec('joints', (0.05,)))
TOOLS = ('/arm/approach', '/arm/descend', '/arm/place')
TYPE = 'sim_msgs/action/MoveTo'
HOME = np.array([0.0, -0.8, 1.2, 0.0, 0.9, 0.0])
STEP_BACK = StepBack(3, 5)
GATES = (Gate(), Gate.parse('shadow:2'))
MODULES = ('muscle_mem_ros.store.merge', 'muscle_mem_ros.store.sqlite',
           'muscle_mem_ros.store.memory', 'muscle_mem_ros.store.trustsql',
           'muscle_mem_ros.store.postgres.store')


class SimClock:
    """The ``time`` module, its ``time()`` the simulated wall time."""

    def __init__(self) -> None:
        self.now = START

    def time(self) -> float:
        return self.now

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


CLOCK = SimClock()


def patch_clock() -> None:
    """Make the store's modules read the simulated wall time."""
    for name in MODULES:
        with contextlib.suppress(ImportError):
            module = importlib.import_module(name)
            if hasattr(module, 'time'):
                module.time = CLOCK


@dataclass
class World:
    """One task's world: situations (object positions), bins, the agent's plan."""

    rng: np.random.Generator
    active: list[int]
    grid: list[np.ndarray]
    bins: dict[int, np.ndarray] = field(default_factory=dict)
    hidden: dict[int, int] = field(default_factory=dict)
    plan: int = 0
    approach: float = 0.10
    approaches: list[float] = field(default_factory=lambda: [0.10])

    def bin_of(self, s: int) -> np.ndarray:
        if s not in self.bins:
            self.bins[s] = self.rng.uniform(-0.3, 0.3, 2)
        return self.bins[s]


def make_world(seed: int) -> World:
    rng = np.random.default_rng(seed)
    cells = [np.array([0.3 + 0.2 * i, -0.4 + 0.2 * j, 0.05 + 0.2 * k])
             for i in range(4) for j in range(5) for k in range(2)]
    order = rng.permutation(len(cells))
    grid = [cells[i] for i in order]
    count = int(rng.integers(3, 7))
    return World(rng=rng, active=list(range(count)), grid=grid)


def snapshot(rng: np.random.Generator, obj: np.ndarray, k: int, at: float) -> Snapshot:
    joints = HOME + 0.3 * k
    return Snapshot(features={'object': tuple((obj + rng.normal(0, NOISE, 3)).tolist()),
                              'joints': tuple((joints + rng.normal(0, NOISE, 6)).tolist())},
                    stamps={'object': at, 'joints': at}, taken_at=at)


def agent_steps(world: World, s: int, first: int, at: float) -> list[Step]:
    """Return the agent's steps ``first``.. of a run at situation ``s`` (perception noise)."""
    rng = world.rng
    obj = world.grid[s]
    seen = obj + rng.normal(0, NOISE, 3)
    bin_xy = world.bin_of(s)
    goals = [
        {'target': {'x': seen[0], 'y': seen[1], 'z': seen[2] + world.approach}, 'speed': 0.5},
        {'target': {'x': seen[0], 'y': seen[1], 'z': seen[2]}, 'speed': 0.2},
        {'bin': {'x': bin_xy[0] + rng.normal(0, NOISE), 'y': bin_xy[1] + rng.normal(0, NOISE)},
         'speed': 0.5},
    ]
    steps = []
    for k in range(first, 3):
        text = json.dumps(goals[k], sort_keys=True)
        steps.append(Step(tool=TOOLS[k], kind=ToolKind.ACTION, type_name=TYPE,
                          payload=text.encode(), payload_json=text,
                          pre=snapshot(rng, obj, k, at), post=snapshot(rng, obj, k + 1, at),
                          duration=1.0))
    return steps


@dataclass
class Ran:
    """How a simulated step ended (the walk's ``Outcome``)."""

    status: StepStatus
    ended: float
    detail: str = ''
    kind: FailureKind | None = None


class SimJudge(SensorSenses):
    """
    The judge and executor of one walk: the node's WalkJudge with the world simulated.

    Candidates the gate holds are dropped; the rest are judged by the Matcher while
    nothing is bound and the world has not moved, else by the BindingJudge.
    """

    def __init__(self, sim: Sim, task: str, s: int, plans: Any, trusted: Any,
                 started: float) -> None:
        super().__init__(sim.tolerance)
        self.sim, self.task, self.s = sim, task, s
        self.bindings = BindingJudge(plans=plans, params={}, senses=self)
        self.trusted = trusted
        self.started = started
        self.decided = 0.0
        self.failed: int | None = None
        self.executed: list[int] = []
        self._seen: Observation | None = None

    def _now(self, k: int) -> Snapshot:
        return snapshot(self.sim.worlds[self.task].rng, self.sim.worlds[self.task].grid[self.s],
                        k, CLOCK.now)

    def prepare(self, reporter: Any) -> None:
        pass

    def pick(self, candidates: Any, step: int) -> Verdict:
        verdict = self._pick(candidates, step)
        if step == 0:
            self.decided = time.perf_counter() - self.started
        return verdict

    def _pick(self, candidates: Any, step: int) -> Verdict:
        if self.trusted is not None:
            allowed = [c for c in candidates if c.id in self.trusted]
            if not allowed and candidates:
                return Verdict((), Miss(FailureKind.NO_CANDIDATE, 'gate'))
            candidates = allowed
        if not candidates:
            return Verdict((), Miss(FailureKind.NO_CANDIDATE, f'nothing learned for {step}'))
        now = self._now(step)
        if self.bindings.literal(candidates):
            sel = self.sim.matcher.select(candidates, now, now_time=CLOCK.now)
            if sel.node is not None:
                return Verdict(((sel.node, sel.result.score if sel.result else 0.0),))
            return Verdict((), Miss(FailureKind.PRE_CHECK, f'pre-check failed at {step}'))
        self._seen = Observation(now, self.bindings.current(now))
        passing, failures = self.bindings.pick(candidates, step)
        if passing:
            return Verdict(tuple(passing))
        worst = blamed(failures)
        return Verdict((), Miss(FailureKind.PRE_CHECK, f'pre-check failed at {step}',
                                worst[1] if worst else None))

    def observe(self, node: Any) -> Observation | None:
        return self._seen

    def compare(self, node: Any, expected: Any, seen: Observation, bound: Any) -> Any:
        return checked(self.sim.check, expected, seen.now, now_time=CLOCK.now, bound=bound,
                       unchecked=False)

    def post_check(self, node: Any, step: int, ended: float) -> Miss | None:
        expected = self.bindings.expected_post(node)
        result = self.sim.check.evaluate(expected, self._now(step + 1), now_time=CLOCK.now)
        return None if result.passed else Miss(FailureKind.POST_CHECK, 'post-check failed')

    def execute(self, node: Any, step: int, cancel: Any) -> Ran:
        """Run the step in the simulated world: a place whose bin moved since fails."""
        self.executed.append(node.id)
        tag = self.sim.tags.get(node.id)
        world = self.sim.worlds[self.task]
        if tag is not None and step == 2 and tag[0] == self.s and \
                tag[1] != world.hidden.get(self.s, 0):
            self.failed = node.id
            return Ran(StepStatus.FAILED, 0.0, 'nothing under the gripper at the bin')
        if tag is not None and tag[0] != self.s:
            self.sim.cross += 1
        self.bindings.ran(node)
        return Ran(StepStatus.SUCCEEDED, 0.0)

    def event(self, **kwargs: Any) -> None:
        pass

    def progress(self, **kwargs: Any) -> None:
        pass


class Sim:
    """The fleet's year against one store."""

    def __init__(self, store: Any, tasks: int, seed: int) -> None:
        self.store = store
        self.check = ToleranceCheck(sensors=list(SENSORS))
        self.tolerance = element_tolerances(SENSORS)
        self.matcher = Matcher(check=self.check)
        self.trees = Trees(store, tolerance=self.tolerance, sources=sensor_sources(SENSORS),
                           learned_with=repr(SENSORS))
        self.names = [f'task_{i:02d}' for i in range(tasks)]
        self.gates = {name: GATES[i % len(GATES)] for i, name in enumerate(self.names)}
        self.worlds = {name: make_world(seed * 1000 + i) for i, name in enumerate(self.names)}
        self.tags: dict[int, tuple[int, int, int]] = {}
        """Learned node -> (situation, bin version, plan) the agent recorded it in."""
        self.owner: dict[int, int] = {}
        """Learned node -> the trajectory first made of it (the simulation's own record)."""
        self.keys: dict[str, set[tuple[int, int, int]]] = defaultdict(set)
        self.met: dict[str, set[int]] = defaultdict(set)
        self.truth: Counter[str] = Counter()
        self.true_false_hits: Counter[int] = Counter()
        self.true_completed: Counter[int] = Counter()
        self.lookups: list[float] = []
        self.hit_lookups: list[float] = []
        self.changed: dict[tuple[str, int], int] = {}
        """(task, situation) -> run index of the task at its last hidden change."""
        self.changed_sit: dict[tuple[str, int], int] = {}
        self.task_runs: Counter[str] = Counter()
        self.sit_runs: Counter[tuple[str, int]] = Counter()
        self.stepped: list[dict[str, Any]] = []
        self.cross = 0
        self.events: Counter[str] = Counter()

    def run(self, task: str) -> str:
        """Run the task once in a situation of its world; return what happened."""
        world = self.worlds[task]
        s = int(world.rng.choice(world.active))
        self.met[task].add(s)
        self.task_runs[task] += 1
        self.sit_runs[(task, s)] += 1
        started = time.perf_counter()
        view = self.trees.view(task, '')
        trust = gate_tree(self.gates[task], self.store, view)
        if trust.nodes is not None and not trust.nodes and view.trajectories:
            return self._shadow_run(task, s, view)
        judge = SimJudge(self, task, s, view.plans, trust.nodes, started)
        result = walk(store=self.store, task=task, variant='', judge=judge, executor=judge,
                      reporter=judge, tree=view)
        self.lookups.append(judge.decided)
        if result.complete and result.trajectory_id:
            self.hit_lookups.append(judge.decided)
            self.store.note_replay(trajectory_id=result.trajectory_id)
        self._book(task, s, result, judge)
        if result.complete:
            return 'hit'
        if not judge.executed and trust.reasons:  # a miss beside held branches: compared
            return self._shadow_run(task, s, view)
        parent = result.last_node.id if result.last_node is not None else None
        self._learn(task, s, agent_steps(world, s, result.resume.step, CLOCK.now), parent)
        return 'false hit' if judge.failed is not None else (
            'miss' if not judge.executed else 'handed back')

    def _book(self, task: str, s: int, result: Any, judge: SimJudge) -> None:
        if judge.executed:
            if judge.failed is not None:
                self.truth['false_hit'] += 1
                self.true_false_hits[self.owner.get(judge.failed, 0)] += 1
            elif len(judge.executed) == 3:
                self.truth['completed'] += 1
                self.true_completed[self.owner.get(judge.executed[-1], 0)] += 1
            else:
                self.truth['handed_back'] += 1
        found = outcome_of(complete=result.complete, trajectory_id=result.trajectory_id,
                           on_trajectory=result.on_trajectory, kind=result.kind)
        if found is None:
            return
        trajectory_id, outcome = found
        now = CLOCK.now
        book = self.store.book_replay(task=task, trajectory_id=trajectory_id,
                                      booker=lambda b, agreed: booked(b, outcome, STEP_BACK,
                                                                      now=now, agreed=agreed))
        if book.stepped_back == now and outcome is not ReplayOutcome.COMPLETED:
            at = self.changed.get((task, s))
            self.stepped.append({
                'task': task, 'trajectory': trajectory_id, 'hidden': at is not None,
                'task_runs': self.task_runs[task] - at if at is not None else -1,
                'sit_runs': self.sit_runs[(task, s)] - self.changed_sit.get((task, s), 0),
                'book': book})

    def _shadow_run(self, task: str, s: int, view: Any) -> str:
        world = self.worlds[task]
        steps = agent_steps(world, s, 0, CLOCK.now)
        found = shadow(steps, params={}, plans=view.plans,
                       children=lambda at: self.store.children(task=task, variant='', parent=at),
                       check=self.check, tolerance=self.tolerance,
                       agreement=lambda tool: AGREEMENT)
        trajectory_id, agreed = followed(found, view.trajectories)
        bindings = [(e.node_id, f, ok) for e in found if e.node_id is not None
                    for f, ok in e.bindings]
        if trajectory_id or bindings:
            self.store.note_shadow(task=task, trajectory_id=trajectory_id, agreed=agreed,
                                   bindings=bindings)
        self.events['shadow agreed' if agreed else 'shadow disagreed'] += 1
        self._learn(task, s, steps, None)
        return 'shadow'

    def _learn(self, task: str, s: int, steps: list[Step], parent: int | None) -> None:
        """File and add the agent's run (Recorder.finish with Replayer.file)."""
        world = self.worlds[task]
        trees = self.trees
        variant, at, rest = file_steps(
            variant='', parent=parent, steps=steps, params={},
            plans=lambda v: trees.plans(task, v),
            children=lambda v, p: self.store.children(task=task, variant=v, parent=p),
            check=self.check, tolerance=trees.tolerance, declared=trees.declared,
            infer=trees.infer, others=lambda: trees.literal_trees(task, ''),
            agreement=lambda tool: AGREEMENT)
        before = len(self.owner)
        key = (s, world.hidden.get(s, 0), world.plan)
        seen = key in self.keys[task]
        info = self.store.add_trajectory(task=task, variant=variant, params_json='{}',
                                         steps=rest, parent=at)
        for node_id in info.node_ids:
            if node_id not in self.tags:
                self.tags[node_id] = key
                self.owner[node_id] = info.id
        self.keys[task].add(key)
        self.events['folded' if len(self.owner) == before else 'learned'] += 1
        if len(self.owner) != before and seen:
            self.events['sibling'] += 1

    def change(self, task: str, what: str) -> None:
        """Change the world of ``task``: retire a situation, move a bin, or a new plan."""
        world = self.worlds[task]
        self.events[what] += 1
        if what == 'retire':
            old = int(world.rng.choice(world.active))
            world.active.remove(old)
            world.active.append(max(world.active + [old]) + 1)
        elif what == 'bin':
            s = int(world.rng.choice(world.active))
            world.hidden[s] = world.hidden.get(s, 0) + 1
            world.bins[s] = world.rng.uniform(-0.3, 0.3, 2)
            self.changed[(task, s)] = self.task_runs[task]
            self.changed_sit[(task, s)] = self.sit_runs[(task, s)]
        else:
            world.plan += 1
            world.approach += float(world.rng.choice([-1, 1]) * world.rng.uniform(0.02, 0.04))
            world.approach = max(0.05, world.approach)
            world.approaches.append(world.approach)


def schedule(sim: Sim, runs: int, seed: int) -> list[tuple[str, str | None]]:
    """Return the fleet's runs in order: (task, world change before it, or None)."""
    rng = np.random.default_rng(seed)
    order = np.repeat(np.arange(len(sim.names)), runs)
    rng.shuffle(order)
    changes: dict[int, list[str]] = defaultdict(list)
    for t in range(len(sim.names)):
        mine = np.flatnonzero(order == t)
        for what, rate in (('retire', 1.5), ('bin', 2.0), ('plan', 1.0)):
            for _ in range(int(rng.poisson(rate))):
                changes[int(mine[int(rng.integers(len(mine) // 20, len(mine)))])].append(what)
    out: list[tuple[str, str | None]] = []
    for i, t in enumerate(order):
        for what in changes.get(i, []):
            out.append((sim.names[t], what))
        out.append((sim.names[t], None))
    return out


def store_bytes(path: Path | None) -> int:
    if path is None:
        return 0
    return sum(p.stat().st_size for p in path.parent.glob(path.name + '*'))


def trajectories(store: Any) -> dict[str, int]:
    return Counter(t.task for t in store.trajectories())


def simulate(spec: str, path: Path | None, args: argparse.Namespace,
             label: str) -> dict[str, Any]:
    """Run the year on one store; return its figures."""
    CLOCK.now = START
    store = open_store(spec)
    sim = Sim(store, args.tasks, args.seed)
    plan = schedule(sim, args.runs, args.seed)
    total = sum(1 for _, what in plan if what is None)
    months: list[dict[str, Any]] = []
    outcomes: Counter[str] = Counter()
    by_gate: dict[str, Counter[str]] = defaultdict(Counter)
    done = 0
    mark = 0
    wall = time.perf_counter()
    for task, what in plan:
        if what is not None:
            sim.change(task, what)
            continue
        CLOCK.now = START + YEAR * done / total
        what = sim.run(task)
        outcomes[what] += 1
        by_gate[str(sim.gates[task])][what] += 1
        done += 1
        if done * 12 // total > mark or done == total:
            mark = done * 12 // total
            counts = trajectories(store)
            window = sim.lookups[-max(1, total // 12):]
            months.append({
                'month': mark, 'runs': done, 'trajectories': sum(counts.values()),
                'max_task': max(counts.values(), default=0),
                'keys': sum(len(k) for k in sim.keys.values()),
                'met': sum(len(m) for m in sim.met.values()),
                'bytes': store_bytes(path), 'p50': pct(window, 50),
                'stepped': len(sim.stepped), 'outcomes': dict(outcomes)})
            print(f'[{label}] month {mark:2d}: {done} runs, {months[-1]["trajectories"]} '
                  f'trajectories, lookup p50 {ms(months[-1]["p50"])} ms, '
                  f'{time.perf_counter() - wall:.0f} s', flush=True)
    elapsed = time.perf_counter() - wall
    books = store.replay_books()
    booked_counts = Counter()
    for b in books.values():
        booked_counts.update(completed=b.completed, false_hit=b.false_hits,
                             handed_back=b.handed_back, canceled=b.canceled)
    by_traj = {tid: (b.false_hits, b.completed) for tid, b in books.items()
               if b.false_hits or b.completed}
    truth_by = {tid: (sim.true_false_hits.get(tid, 0), sim.true_completed.get(tid, 0))
                for tid in set(sim.true_false_hits) | set(sim.true_completed)}
    agree = dict(booked_counts) == {k: sim.truth.get(k, 0) for k in booked_counts} and \
        by_traj == truth_by
    per_task = trajectories(store)
    bounds = {t: len(sim.keys[t]) for t in sim.names}
    end = CLOCK.now
    result: dict[str, Any] = {
        'label': label, 'months': months, 'elapsed': elapsed, 'runs': total,
        'outcomes': dict(outcomes), 'by_gate': {g: dict(c) for g, c in by_gate.items()},
        'events': dict(sim.events), 'per_task': per_task,
        'bounds': bounds, 'met': {t: len(sim.met[t]) for t in sim.names},
        'lookup_p50': pct(sim.lookups, 50), 'lookup_p99': pct(sim.lookups, 99),
        'hit_p50': pct(sim.hit_lookups, 50), 'booked': dict(booked_counts),
        'truth': dict(sim.truth), 'agree': agree, 'by_traj': len(by_traj),
        'stepped': sim.stepped, 'cross': sim.cross,
        'bytes': store_bytes(path), 'file_bytes': path.stat().st_size if path else 0,
        'gates': {str(g): [t for t in sim.names if sim.gates[t] == g] for g in GATES},
        'held_tasks': _held(sim),
    }
    result['prune'] = prune_figures(store, sim, end)
    for task in sim.names:  # the node runs on after the prune, then stops: its plans are kept
        sim.trees.plans(task, '')
    sim.trees.keep()
    store.close()
    if path is not None:
        result['bytes_after_prune'] = store_bytes(path)
    result['restart'] = restart(spec, sim, args)
    return result


def _held(sim: Sim) -> dict[str, int]:
    """Return, for the gated tasks, how many trajectories the gate holds at the end."""
    out = {}
    for task in sim.names:
        view = sim.trees.view(task, '')
        trust = gate_tree(sim.gates[task], sim.store, view)
        out[task] = len(trust.reasons)
    return out


def prune_figures(store: Any, sim: Sim, end: float) -> dict[str, Any]:
    """Ask prune what it would remove, sort it by what the simulation knows, then prune."""
    books = store.replay_books()
    infos = store.trajectories()
    active = {t: set(sim.worlds[t].active) for t in sim.names}

    key_of = {i.id: sim.tags.get(i.node_ids[-1], (-1, 0, 0)) for i in infos}
    first: dict[tuple[str, int, int, int], int] = {}
    for i in sorted(infos, key=lambda i: i.id):
        first.setdefault((i.task, *key_of[i.id]), i.id)

    def kind(info: Any) -> str:
        situation, version, plan = key_of[info.id]
        world = sim.worlds[info.task]
        if books.get(info.id) is not None and books[info.id].stepped_back:
            return 'stepped back'
        if situation not in active[info.task]:
            return 'retired situation'
        if version != world.hidden.get(situation, 0):
            return 'bin moved since'
        if abs(world.approaches[plan] - world.approach) > AGREEMENT:
            return 'older plan'
        if first[(info.task, situation, version, plan)] != info.id:
            return 'noise sibling'
        return 'current'

    out: dict[str, Any] = {'total': len(infos),
                           'kinds': dict(Counter(kind(i) for i in infos))}
    for name, how in (('unused_30', {'unused_for': 30.0}), ('unused_90', {'unused_for': 90.0}),
                      ('keep_6', {'keep': 6})):
        gone = select(store, task=None, now=end, **how)
        out[name] = dict(Counter(kind(t) for t, _ in gone))
    gone = select(store, task=None, now=end, unused_for=30.0)
    t0 = time.perf_counter()
    removed = sum(store.forget(task=t.task, trajectory_id=t.id) for t, _ in gone)
    out['forget_s'] = time.perf_counter() - t0
    out['removed'] = removed
    out['left'] = len(store.trajectories())
    return out


def first_lookup(store: Any, trees: Trees, sim: Sim, task: str) -> tuple[float, bool]:
    """Time the first lookup of ``task`` (tree view, gate, the first step's pick)."""
    world = sim.worlds[task]
    s = world.active[0]
    started = time.perf_counter()
    view = trees.view(task, '')
    trust = gate_tree(sim.gates[task], store, view)
    judge = SimJudge(sim, task, s, view.plans, trust.nodes, started)
    verdict = judge.pick(store.children(task=task, variant='', parent=None), 0)
    return time.perf_counter() - started, bool(verdict.passing)


def restart(spec: str, sim: Sim, args: argparse.Namespace) -> dict[str, Any]:
    """Reopen the store as a restarted node would: first lookups cold, then after warming."""
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    store = open_store(spec)
    out['open'] = time.perf_counter() - t0
    sim.matcher = Matcher(check=sim.check)
    trees = Trees(store, tolerance=sim.tolerance, sources=sensor_sources(SENSORS),
                  learned_with=repr(SENSORS))
    out['first'], out['first_hit'] = first_lookup(store, trees, sim, sim.names[0])
    t0 = time.perf_counter()
    for task in sim.names[1:]:
        first_lookup(store, trees, sim, task)
    out['all_first'] = out['first'] + time.perf_counter() - t0
    out['warm_again'] = pct([first_lookup(store, trees, sim, sim.names[0])[0]
                             for _ in range(50)], 50)
    trees.close()
    store.close()
    store = open_store(spec)
    sim.matcher = Matcher(check=sim.check)
    trees = Trees(store, tolerance=sim.tolerance, sources=sensor_sources(SENSORS),
                  learned_with=repr(SENSORS))
    t0 = time.perf_counter()
    store.preload()
    for task in sim.names:
        sim.matcher.warm(store.children(task=task, variant='', parent=None))
        trees.plans(task, '')
    out['warm_up'] = time.perf_counter() - t0
    out['after_warm'] = first_lookup(store, trees, sim, sim.names[0])[0]
    trees.close()
    store.close()
    return out


def pg_url(arg: str, stack: contextlib.ExitStack) -> str:
    """Return the PostgreSQL URL to use (``auto``: a server started here, as the tests do)."""
    if arg != 'auto':
        return arg
    return str(pg_server(stack).new_url())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[1])
    parser.add_argument('--tasks', type=int, default=20)
    parser.add_argument('--runs', type=int, default=2000, help='runs of each task in the year')
    parser.add_argument('--seed', type=int, default=30)
    parser.add_argument('--quick', action='store_true', help='a smoke run: 6 tasks x 150 runs')
    parser.add_argument('--postgres', default='',
                        help='also run on PostgreSQL: a URL, or auto (start a server)')
    parser.add_argument('--out', type=Path, default=None)
    args = parser.parse_args()
    if args.quick:
        args.tasks, args.runs = 6, 150
    patch_clock()
    results = []
    with tempfile.TemporaryDirectory(prefix='mm_months_') as tmp, contextlib.ExitStack() as st:
        path = Path(tmp) / 'fleet.db'
        SqliteStore(path=path).close()
        results.append(simulate(str(path), path, args, 'sqlite'))
        if args.postgres:
            results.append(simulate(pg_url(args.postgres, st), None, args, 'postgres'))
    report = render(results, args)
    if args.out:
        args.out.write_text(report)
        print(f'wrote {args.out}')
    else:
        print(report)
    return 0 if all(r['agree'] for r in results) else 1


def render(results: list[dict[str, Any]], args: argparse.Namespace) -> str:
    import scipy
    return '\n'.join(_render(results, args, scipy.__version__))


def _render(results: list[dict[str, Any]], args: argparse.Namespace, scipy_v: str) -> list[str]:
    r = results[0]
    lines = [
        "# A fleet's year (bench/months)", '',
        'Generated by `bench/months` (`bench/months.py`); numbers below are from one run on:',
        f'{cpu_name()}, {os.cpu_count()} cores, Python {platform.python_version()}, '
        f'NumPy {np.__version__}, SciPy {scipy_v}, SQLite '
        f'{__import__("sqlite3").sqlite_version}; load average {os.getloadavg()[0]:.1f} at '
        'the end (other jobs shared the machine).', '',
        f'Run: {args.tasks} tasks x {args.runs} runs = {r["runs"]:,} runs over 365 simulated '
        f'days, seed {args.seed}{" (--quick)" if args.quick else ""}; '
        f'{r["elapsed"]:.0f} s of machine time on SQLite.', '',
        '## Workload', '',
        (__doc__ or '').split('\n\n', 1)[1].split('\nUsage:')[0].strip(), '',
    ]
    lines += _targets(results)
    for res in results:
        lines += _figures(res)
    lines += _reading(results)
    lines += ['## Setup', '',
              'Run `bench/months` (about 2.5 minutes on 2 cores; `--quick`: 6 tasks x 150 runs, '
              'about 5 s). `--postgres auto` runs the same year on a PostgreSQL server it starts '
              '(`initdb`/`pg_ctl` from the Debian binaries, as the test suite does), '
              '`--postgres URL` on one you name. The store is a fresh SQLite file in a '
              'temporary directory (WAL, synchronous=NORMAL). The script exits 1 when the '
              "booked outcomes and the simulation's disagree.", '']
    return lines


def _stepped_runs(res: dict[str, Any]) -> list[int]:
    return [e['task_runs'] for e in res['stepped'] if e['hidden']]


def _targets(results: list[dict[str, Any]]) -> list[str]:
    lines = ['## Targets', '', '| target | store | figure | met |', '|---|---|---|---|']
    for res in results:
        over = {t: n - res['bounds'][t] for t, n in res['per_task'].items()
                if n > res['bounds'][t]}
        lines.append(
            f'| tree size bounded by distinct situations (trajectories <= the (situation, bin, '
            f'plan) keys the agent recorded in, per task) | {res["label"]} | '
            f'{sum(res["per_task"].values())} trajectories for {sum(res["bounds"].values())} '
            f'keys after {res["runs"]:,} runs; tasks over: {len(over)} '
            f'(by {sum(over.values())}), each a sibling of a repeat that did not fold '
            f'({res["events"].get("sibling", 0)} of '
            f'{res["events"].get("sibling", 0) + res["events"].get("folded", 0)} repeats) | '
            f'{"met" if not over else "NOT met"} |')
        b, t = res['booked'], res['truth']
        fb = b.get('false_hit', 0) / max(1, sum(b.values()))
        ft = t.get('false_hit', 0) / max(1, sum(t.values()))
        lines.append(
            f'| booked false-hit rate = the simulation\'s | {res["label"]} | booked '
            f'{b.get("false_hit", 0)}/{sum(b.values())} = {fb:.4%}, true '
            f'{t.get("false_hit", 0)}/{sum(t.values())} = {ft:.4%}; per trajectory '
            f'({res["by_traj"]} trajectories) | {"met" if res["agree"] else "NOT met"} |')
        rs = res['restart']
        lines.append(
            f'| first lookup after a restart < 200 ms and within 10x of a warm one (plans '
            f'kept; the store, pruned, holds {res["prune"]["left"]}; bench/lookup measures '
            f'it at 100,000) | {res["label"]} | '
            f'{ms(rs["first"])} ms '
            f'vs warm {ms(rs["warm_again"])} ms ({rs["first"] / rs["warm_again"]:.0f}x) | '
            f'{"met" if rs["first"] < 0.2 and rs["first"] < 10 * rs["warm_again"] else "NOT met"}'
            ' |')
    return lines + ['']


def _figures(res: dict[str, Any]) -> list[str]:
    label = res['label']
    lines = [f'## Month by month ({label})', '',
             '| month | runs | trajectories | largest task | keys recorded in (bound) | '
             'situations met | store size | lookup p50 (ms, that month) | stepped back | '
             'hits / false hits / misses / shadow runs so far |',
             '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|']
    for m in res['months']:
        o = m['outcomes']
        size = f'{m["bytes"] / 1e6:.2f} MB' if m['bytes'] else 'n/a'
        lines.append(f'| {m["month"]} | {m["runs"]:,} | {m["trajectories"]} | {m["max_task"]} | '
                     f'{m["keys"]} | {m["met"]} | {size} | {ms(m["p50"])} | {m["stepped"]} | '
                     f'{o.get("hit", 0)} / {o.get("false hit", 0)} / {o.get("miss", 0)} / '
                     f'{o.get("shadow", 0)} |')
    ev = res['events']
    lines += ['', f'World changes: {ev.get("retire", 0)} situations retired (a new one each), '
              f'{ev.get("bin", 0)} bins moved, {ev.get("plan", 0)} plan changes. Agent runs '
              f'filed: {ev.get("learned", 0)} added a trajectory, {ev.get("folded", 0)} folded '
              f'into a branch; shadow runs: {ev.get("shadow agreed", 0)} agreed, '
              f'{ev.get("shadow disagreed", 0)} did not. Steps replayed in a situation other '
              f'than the one recorded (bindings): {res["cross"]}.', '']
    lines += ['| gate | runs | replayed to the end | false hits | handed back | '
              'agent: a miss | agent: in shadow |', '|---|---:|---:|---:|---:|---:|---:|']
    for gate, c in sorted(res['by_gate'].items()):
        lines.append(f'| `{gate}` ({len(res["gates"][gate])} tasks) | {sum(c.values()):,} | '
                     f'{c.get("hit", 0):,} | {c.get("false hit", 0)} | '
                     f'{c.get("handed back", 0)} | {c.get("miss", 0):,} | '
                     f'{c.get("shadow", 0)} |')
    lines += ['', '| figure | value |', '|---|---:|']
    lines.append(f'| lookup p50 / p99 over the year (tree view, gate, first step judged) | '
                 f'{ms(res["lookup_p50"])} / {ms(res["lookup_p99"])} ms |')
    lines.append(f'| lookup p50 of the runs that replayed to the end | {ms(res["hit_p50"])} ms |')
    if res['bytes']:
        lines.append(f'| store size at the end of the year: file + WAL (the file alone) | '
                     f'{res["bytes"] / 1e6:.2f} MB ({res["file_bytes"] / 1e6:.2f} MB) |')
    b, t = res['booked'], res['truth']
    for k in ('completed', 'false_hit', 'handed_back', 'canceled'):
        lines.append(f'| replays {k.replace("_", " ")}: booked / simulated | '
                     f'{b.get(k, 0)} / {t.get(k, 0)} |')
    runs = _stepped_runs(res)
    lines.append(f'| trajectories stepped back | {len(res["stepped"])} ({len(runs)} after a '
                 'moved bin) |')
    if runs:
        sits = [e['sit_runs'] for e in res['stepped'] if e['hidden']]
        lines.append(f'| runs from the bin moving to its branch stepping back, median / max: '
                     f'of the task; of that situation | {int(np.median(runs))} / {max(runs)}; '
                     f'{int(np.median(sits))} / {max(sits)} |')
    held = {t: n for t, n in res['held_tasks'].items() if n}
    lines.append('| trajectories the gate holds at the end (per gate) | ' + ', '.join(
        f'{g}: {sum(held.get(t, 0) for t in tasks)}' for g, tasks in res['gates'].items())
        + ' |')
    rs = res['restart']
    lines.append(f'| restart: open the store | {ms(rs["open"])} ms |')
    lines.append(f'| restart: first lookup of one task, nothing warmed (its kept plans, '
                 f'indexes its first steps) | {ms(rs["first"])} ms |')
    lines.append(f'| restart: first lookup of every task, in turn | {ms(rs["all_first"])} ms |')
    lines.append(f'| restart: warming the whole store as the node does at start (preload, '
                 f'index, learn) | {ms(rs["warm_up"])} ms |')
    lines.append(f'| restart: first lookup after warming / warm lookup p50 | '
                 f'{ms(rs["after_warm"])} / {ms(rs["warm_again"])} ms |')
    p = res['prune']
    lines += ['', f'Prune at the end of the year ({p["total"]} trajectories: ' + ', '.join(
        f'{n} {k}' for k, n in sorted(p['kinds'].items())) + '):', '',
        '| prune | would remove | of which current |', '|---|---|---:|']
    for name, text in (('unused_30', '--unused-for 30'), ('unused_90', '--unused-for 90'),
                       ('keep_6', '--keep 6')):
        gone = p[name]
        lines.append(f'| `{text}` | {sum(gone.values())}: ' + (', '.join(
            f'{n} {k}' for k, n in sorted(gone.items())) or 'none') +
            f' | {gone.get("current", 0)} |')
    after = (f'; store file {res["bytes_after_prune"] / 1e6:.2f} MB after (SQLite does not '
             'shrink without VACUUM)' if res.get('bytes_after_prune') else '')
    lines += ['', f'`--unused-for 30` applied (`forget` of each, as `muscle-mem prune --yes`): '
              f'{p["removed"]} removed in {p["forget_s"]:.2f} s, {p["left"]} left{after}.', '']
    return lines


def _reading(results: list[dict[str, Any]]) -> list[str]:
    r = results[0]
    return [
        '## Reading the results', '',
        '"Keys recorded in" is the simulation\'s count of the distinct (situation, bin '
        'version, plan version) in which the agent recorded anything: the most trajectories '
        'a tree that grows with situations, not runs, may hold. A trajectory is a branch '
        'learned in one of them; a run the agent repeats there folds (its goals within 5 mm, '
        'its snapshots within tolerance) and only counts one more success. The month table '
        'shows the trajectories following the keys, not the runs: what the tree gains over '
        'the year is world changes (a retired situation brings a new one, a moved bin a '
        'sibling of the place step, a plan change a branch in each situation the agent '
        'still does itself). The store size is mostly the WAL (SQLite checkpoints it at 1,000 '
        'pages and does not truncate it): the file itself is the second figure.', '',
        "The booked outcomes are the store's replay books (`replay_books`), summed; the "
        'simulated ones are counted by the simulated executor itself (a step it failed is a '
        'false hit; three steps executed, a completed replay) and attributed to the '
        'trajectory that first made the failing (last) step, which the simulation records '
        'when it adds a run. Both count the same events, so they must agree exactly, per '
        'trajectory too; the script exits 1 when they do not.', '',
        'A moved bin is a hidden change: the place step of the branch learned before fails '
        '(a false hit), the agent places the object and its run becomes a sibling of that '
        'step. At the fork the walk takes the closest pre snapshot (then the most '
        'successes), so the old branch keeps being tried until it fails 3 of its last 5 '
        'replays and steps back (3 false hits, always: every replay of it fails now); the '
        'runs that took are counted of the whole task (which visits 3 to 6 situations) and '
        'of the situation whose bin moved.', '',
        "Under `shadow:2` a run that misses while the gate holds some of its task's "
        'trajectories back is compared with them (ros/execution/tasks.py, mirrored here), '
        'so a branch learned beside a trusted one earns its two agreeing runs; '
        '"trajectories the gate holds at the end" counts those that did not.', '',
        'Prune: each trajectory is sorted by what the simulation knows of it at the end: '
        'stepped back; its situation retired; its bin moved since; an older plan (its '
        "approach is not the agent's plan now, beyond 5 mm: two plan changes can bring "
        'back an earlier one); a noise sibling (a second trajectory of the same situation, '
        'bin and plan); else current. `--unused-for` goes by `last_used`, which a complete '
        'replay and a run folded into the branch move; a current trajectory it removes is '
        'one whose situation was not met for that long, or that a sibling wins every time.',
        '',
        'Restart (measured on the store the `--unused-for 30` prune left): the first '
        'lookup of a task after reopening the store reads its rows, '
        "learns its tree's bindings and indexes its first steps; issue 30's fifth item "
        '(keep what learning found with the store) is not done in this branch, so this is '
        "today's cost, at this year's small trees. The node warms every tree in a "
        'background thread at start (`Replayer.warm`); the figure after warming is what a '
        'first task meets once that finished.', '',
        f'Lookup p50 is measured on every run that walked ({len(r["months"])} monthly '
        "windows above): from reading the tree to the first step's verdict, what the node "
        'does before it sends a first goal. The simulation itself (noise, snapshots, the '
        'agent) is outside the timed span, except the snapshot the judge takes.', '',
    ]


if __name__ == '__main__':
    sys.exit(main())
