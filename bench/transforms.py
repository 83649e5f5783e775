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
Frames: what a TF lookup costs across a 50-frame tree, and what a 1 kHz /tf stream costs.

The tree is a mobile manipulator's: ``map -> odom -> base_link`` (localization, odometry), four
wheels, a lift, a pan-tilt head with its camera, a 7-joint arm with its hand, fingers and
wrist camera, the tags the two cameras see, a dock and a table with a cube in the map, and
the fixed frames between them (static, from ``/tf_static``). Every dynamic link holds
``--history`` seconds of transforms at 100 Hz, moving as joints, wheels and detections do.

One lookup is what a TF sensor's snapshot does: :meth:`TransformBuffer.lookup` between two
frames, here a random pair at a random time inside the history (interpolated on every dynamic
link of the chain), ``--lookups`` of them, after the chains were found once; the first lookup
of each pair (the chain found, then kept) and lookups at the latest common time (no time
asked) are timed apart.

The stream: robot_state_publisher at 1 kHz, each message every moving joint of the robot
(the links under ``base_link`` that move), each transform made from the message's seven
floats and set in the buffer, for ``--stream`` seconds after ``--history`` seconds of the
stream filled each link's history (so every set also drops the oldest stamp). The figure is
the buffer's CPU per message (process time, the garbage collector's passes included) and its
share of a core at 1 kHz; rclpy's deserialization of the message comes on top, in the node.

Usage: bench/transforms [--lookups 20000] [--history 10] [--stream 10] [--out FILE]
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
import platform
import random
import sys
import time

from _common import cpu_name, ms, pct
from muscle_mem_ros.transforms.buffer import TransformBuffer
from muscle_mem_ros.transforms.rotation import from_axis_angle, from_yaw, IDENTITY
from muscle_mem_ros.transforms.transform import Transform

RATE = 100.0
"""Hz of every dynamic link's history."""
TARGET_P50 = 0.2e-3
"""The issue's target for a lookup, seconds."""
TARGET_CORE = 0.05
"""The issue's target for a 1 kHz /tf stream, share of a core (the buffer's part of it)."""

Link = tuple[str, str, bool, tuple[float, float, float]]
"""parent, child, static, and the axis a dynamic link turns about ((0, 0, 0): it slides)."""
Z, Y = (0.0, 0.0, 1.0), (0.0, 1.0, 0.0)
SLIDE = (0.0, 0.0, 0.0)


def tree() -> list[Link]:
    """Return the 49 links of the 50 frames the module docstring describes."""
    links: list[Link] = [('map', 'odom', False, Z), ('odom', 'base_link', False, Z),
                         ('base_link', 'base_footprint', True, Z), ('base_link', 'imu', True, Z),
                         ('base_link', 'laser', True, Z)]
    links += [('base_link', f'wheel_{w}', False, Y) for w in ('fl', 'fr', 'rl', 'rr')]
    links += [('base_link', 'lift', False, SLIDE), ('lift', 'head_pan', False, Z),
              ('head_pan', 'head_tilt', False, Y), ('head_tilt', 'head_camera', True, Z),
              ('head_camera', 'head_camera_optical', True, Z)]
    links += [('lift', 'panda_link0', True, Z)]
    links += [(f'panda_link{i - 1}', f'panda_link{i}', False, Z if i % 2 else Y)
              for i in range(1, 8)]
    links += [('panda_link7', 'panda_link8', True, Z), ('panda_link8', 'panda_hand', True, Z),
              ('panda_hand', 'panda_leftfinger', False, SLIDE),
              ('panda_hand', 'panda_rightfinger', False, SLIDE),
              ('panda_hand', 'panda_hand_tcp', True, Z),
              ('panda_hand', 'wrist_camera', True, Z),
              ('wrist_camera', 'wrist_camera_optical', True, Z)]
    links += [('head_camera_optical', f'tag_{i}', False, Z) for i in range(6)]
    links += [('wrist_camera_optical', f'tag_{i}', False, Z) for i in range(6, 9)]
    links += [('map', 'dock', True, Z), ('map', 'table', True, Z), ('table', 'cube', False, Z),
              ('map', 'charger', True, Z), ('laser', 'laser_mount', True, Z)]
    links += [('base_link', f'sonar_{i}', True, Z) for i in range(4)]
    links += [('base_link', f'bumper_{i}', True, Z) for i in range(2)]
    return links


def robot_joints(links: list[Link]) -> list[Link]:
    """Return the dynamic links robot_state_publisher sends: the moving joints under base_link."""
    return [link for link in links if not link[2] and link[0] not in ('map', 'odom')
            and not link[1].startswith(('tag_', 'cube'))]


def value(link: Link, index: int, stamp: float) -> Transform:
    """Return a link's transform at ``stamp``: an offset, and a joint moving as a sine."""
    offset = (0.1 + 0.01 * (index % 7), 0.02 * (index % 3), 0.05)
    angle = 0.8 * math.sin(0.7 * stamp + index)
    axis = link[3]
    if axis == SLIDE:
        return Transform((offset[0], offset[1], offset[2] + 0.1 * angle), IDENTITY)
    return Transform(offset, from_axis_angle(axis, angle))


def filled(links: list[Link], history: float) -> tuple[TransformBuffer, float]:
    """Return a buffer holding ``history`` seconds of every dynamic link at 100 Hz, and its end."""
    buffer = TransformBuffer(cache_time=history)
    for i, link in enumerate(links):
        if link[2]:
            buffer.set(link[0], link[1], 0.0, Transform((0.1, 0.02 * i, 0.3), from_yaw(0.1 * i)),
                       static=True)
    ticks = int(history * RATE)
    for tick in range(ticks + 1):
        stamp = tick / RATE
        for i, link in enumerate(links):
            if not link[2]:
                buffer.set(link[0], link[1], stamp, value(link, i, stamp))
    return buffer, ticks / RATE


def time_lookups(buffer: TransformBuffer, end: float, history: float, count: int
                 ) -> dict[str, float]:
    """Return lookup timings (seconds) and the chains' mean length."""
    rng = random.Random(1)
    frames = sorted(buffer.frames)
    pairs = [(rng.choice(frames), rng.choice(frames)) for _ in range(count)]
    times = [rng.uniform(end - history + 0.05, end) for _ in range(count)]
    first: list[float] = []
    for (target, source), at in zip(sorted(set(pairs)), times):
        t0 = time.perf_counter()
        buffer.lookup(target, source, at=at)
        first.append(time.perf_counter() - t0)
    timed: list[float] = []
    lengths = 0
    for (target, source), at in zip(pairs, times):
        t0 = time.perf_counter()
        found = buffer.lookup(target, source, at=at)
        timed.append(time.perf_counter() - t0)
        lengths += len(found.links)
    latest: list[float] = []
    for target, source in pairs[:count // 4]:
        t0 = time.perf_counter()
        buffer.lookup(target, source)
        latest.append(time.perf_counter() - t0)
    snapshot: list[float] = []
    for at in times[:count // 4]:
        t0 = time.perf_counter()
        buffer.lookup('panda_hand', 'tag_7', at=at)
        buffer.lookup('map', 'cube', at=at)
        snapshot.append((time.perf_counter() - t0) / 2)
    return {'p50': pct(timed, 50), 'p99': pct(timed, 99), 'first p50': pct(first, 50),
            'first p99': pct(first, 99), 'latest p50': pct(latest, 50),
            'latest p99': pct(latest, 99), 'snapshot p50': pct(snapshot, 50),
            'links': lengths / count, 'longest': float(max(
                len(buffer.lookup(t, s, at=end).links) for t, s in set(pairs))),
            'pairs': float(len(set(pairs)))}


def time_stream(links: list[Link], history: float, seconds: float) -> dict[str, float]:
    """Return the buffer's cost of a 1 kHz robot_state_publisher, per message."""
    joints = robot_joints(links)
    buffer, end = filled(links, history)
    floats = [[(*value(link, i, end + k / 1000.0).translation,
                *value(link, i, end + k / 1000.0).rotation) for i, link in enumerate(joints)]
              for k in range(1000)]
    per_message: list[float] = []
    warm = int(history * 1000)
    messages = int(seconds * 1000)
    cpu0 = 0.0
    for k in range(1, warm + messages + 1):
        if k == warm + 1:
            cpu0 = time.process_time()
        stamp = end + k / 1000.0
        row = floats[k % 1000]
        t0 = time.perf_counter()
        for (parent, child, _, _), (x, y, z, qx, qy, qz, qw) in zip(joints, row):
            buffer.set(parent, child, stamp, Transform((x, y, z), (qx, qy, qz, qw)))
        if k > warm:
            per_message.append(time.perf_counter() - t0)
    cpu = time.process_time() - cpu0
    link = buffer.link(joints[0][1])
    assert link is not None and abs(len(link) - warm) <= 1, len(link or ())
    return {'joints': float(len(joints)), 'p50': pct(per_message, 50),
            'p99': pct(per_message, 99), 'cpu per message': cpu / messages,
            'kept': float(len(link))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--lookups', type=int, default=20000)
    parser.add_argument('--history', type=float, default=10.0)
    parser.add_argument('--stream', type=float, default=10.0)
    parser.add_argument('--out', type=Path, default=Path(__file__).with_name('transforms.md'))
    args = parser.parse_args()
    links = tree()
    frames = {frame for link in links for frame in link[:2]}
    dynamic = sum(1 for link in links if not link[2])
    assert len(frames) == 50 and len({link[1] for link in links}) == 49, len(frames)
    t0 = time.perf_counter()
    buffer, end = filled(links, args.history)
    fill = time.perf_counter() - t0
    sets = dynamic * (int(args.history * RATE) + 1)
    got = time_lookups(buffer, end, args.history, args.lookups)
    print(f'lookup p50 {ms(got["p50"])} ms', file=sys.stderr)
    stream = time_stream(links, args.history, args.stream)
    share = stream['cpu per message'] * 1000
    load = ' '.join(Path('/proc/loadavg').read_text().split()[:3]) \
        if Path('/proc/loadavg').exists() else 'unknown'
    lines = [
        '# Frames: TF lookups and the /tf stream', '',
        f'`bench/transforms` on {cpu_name()}, Python {platform.python_version()}, one run; '
        f'load average {load} at the end (the machine is shared).', '',
        f'Tree: 50 frames, 49 links ({dynamic} dynamic, {49 - dynamic} static), every dynamic '
        f'link {args.history:g} s of history at {RATE:g} Hz ({sets} transforms set in '
        f'{fill:.2f} s, {ms(fill / sets)} ms each).', '',
        '## Lookups', '',
        f'{args.lookups} lookups between random frame pairs ({got["pairs"]:.0f} distinct) at '
        f'random times inside the history, each dynamic link interpolated; chains of '
        f'{got["links"]:.1f} links on average, {got["longest"]:.0f} at most.', '',
        '| lookup | p50 ms | p99 ms |', '|---|---|---|',
        f'| at a time, chain kept | {ms(got["p50"])} | {ms(got["p99"])} |',
        f'| latest common time (no time asked) | {ms(got["latest p50"])} | '
        f'{ms(got["latest p99"])} |',
        f'| first lookup of a pair (chain found, then kept) | {ms(got["first p50"])} | '
        f'{ms(got["first p99"])} |',
        f'| one of a snapshot: panda_hand->tag_7, map->cube | {ms(got["snapshot p50"])} | |',
        '',
        f'Target: a lookup p50 under {ms(TARGET_P50)} ms: '
        f'{"met" if got["p50"] < TARGET_P50 else "NOT met"} ({ms(got["p50"])} ms).', '',
        '## A 1 kHz /tf stream', '',
        f'robot_state_publisher at 1 kHz, {stream["joints"]:.0f} moving joints per message, '
        f'{args.stream:g} s after {args.history:g} s of it filled the history (each link keeps '
        f'{stream["kept"]:.0f} stamps, so each set also drops one); each transform made from '
        "the message's floats and set.", '',
        '| per message | ms |', '|---|---|',
        f'| set, p50 | {ms(stream["p50"])} |', f'| set, p99 | {ms(stream["p99"])} |',
        f'| CPU per message (process time over the run) | {ms(stream["cpu per message"])} |',
        f'| per transform | {stream["cpu per message"] / stream["joints"] * 1e3:.4f} |', '',
        f"The buffer's share of a core at 1 kHz: {share:.1%} (the issue's budget for the "
        f"whole stream, {TARGET_CORE:.0%} above idle, also holds rclpy's deserialization and "
        'callback, measured when the node subscribes).',
    ]
    args.out.write_text('\n'.join(lines) + '\n')
    print('\n'.join(lines), file=sys.stderr)
    print(f'wrote {args.out}', file=sys.stderr)


if __name__ == '__main__':
    main()
