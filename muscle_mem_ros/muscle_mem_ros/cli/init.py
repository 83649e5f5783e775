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
``muscle-mem init FILE``: write the node's params file from the running robot's graph.

With the robot running and at rest: read the graph (servers, agents, topics), sample
the readable topics for ``--duration`` seconds, and write a commented params file that
starts the node as it is (the rules: :mod:`.initrules` for sensors, :mod:`.initcameras` for
cameras, :mod:`.initframes` for TF frames, :mod:`.inittools` for tools, their stops and the
description's wait). ``--sensor`` and ``--frame`` pick what is sampled: given either, only the
topics and frames they name are written. Never
overwrites a file, and never writes one from a robot that moved while sampled. On an
empty graph it gives up after ``--discovery`` plus
:data:`~muscle_mem_ros.cli.survey.MAX_SETTLE` seconds
(:data:`EMPTY_WAIT` at the default), and says so in ``--help``.
Gates: ``replay_requires: none``, so that the file learns and replays at once (the
point of a first try, watched by whoever ran init); the file says to raise it to
``shadow:3`` or ``approval`` before the robot replays unattended.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
import time
from typing import Any, TYPE_CHECKING

from .initcameras import Camera, camera_from, camera_lines
from .initframes import description_links, frame_from, frame_lines, FrameSensor
from .initrules import (
    choose_key, moving, Sensor, sensor_from, Skipped, tolerance_note, Tool,
)
from .inittools import description_timeout, sort_servers, Stop, stop_of
from .output import Output
from ..errors import MuscleMemError

if TYPE_CHECKING:
    from .survey import Survey

__all__ = ['EMPTY_WAIT', 'add_parser', 'render', 'run']

DISCOVERY = 2.0
"""Default seconds to wait for the graph."""
SETTLE_MORE = 10.0
"""Most seconds waited after ``--discovery`` for a graph to hold a node and settle (the
survey's MAX_SETTLE, which a test keeps equal)."""
EMPTY_WAIT = DISCOVERY + SETTLE_MORE
"""Seconds init takes on an empty graph at the default ``--discovery``."""


def add_parser(cmd: argparse.ArgumentParser) -> None:
    """Add the init arguments to its subparser."""
    cmd.add_argument('file', metavar='FILE', help='params file to write (never overwritten)')
    cmd.add_argument('--tool', action='append', metavar='SERVER',
                     help='only this action server or service (repeatable; default: all found)')
    cmd.add_argument('--sensor', action='append', metavar='TOPIC',
                     help='only this topic (repeatable; default: every readable one; with '
                     '--frame only, none)')
    cmd.add_argument('--frame', action='append', metavar='FRAME',
                     help='only this TF frame, even a robot link (repeatable; default: every '
                     'frame on /tf that is not a link of the description; with --sensor only, '
                     'none)')
    cmd.add_argument('--agent', metavar='ACTION',
                     help="the agent's ExecuteTask server (default: the one found)")
    cmd.add_argument('--duration', type=float, default=3.0, metavar='S',
                     help='seconds to sample the sensors, robot still (default 3)')
    cmd.add_argument('--discovery', type=float, default=DISCOVERY, metavar='S',
                     help=f'seconds to wait for the graph (default {DISCOVERY:g}), then up to '
                     f'{SETTLE_MORE:g} s more for it to hold a node and settle: an empty graph '
                     f'is given up on after {EMPTY_WAIT:g} s at the default')
    cmd.add_argument('--node-name', default='muscle_mem',
                     help="the node's name: top key and proxy prefix (default muscle_mem)")
    cmd.add_argument('--store', default='~/.ros/muscle_mem/cache.db', metavar='PATH',
                     help='store_path (default ~/.ros/muscle_mem/cache.db)')
    cmd.set_defaults(run=run)


def _q(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _numbers(values: tuple[float, ...]) -> str:
    return '[' + ', '.join(f'{v:g}' for v in values) + ']'


def _sensor_lines(key: str, s: Sensor) -> list[str]:
    sampled = s.sampled
    lines = [f'      # {sampled.topic}: {sampled.kind.why};',
             f'      # {s.rate:.3g} Hz heard, largest std at rest {s.noise:.2g};',
             f'      # {tolerance_note(s)}',
             f'      {key}:', f'        topic: {_q(sampled.topic)}',
             f'        type: {sampled.type}',
             f"        fields: [{', '.join(_q(f) for f in sampled.kind.fields)}]"]
    if sampled.joints:
        lines.append(f"        joints: [{', '.join(_q(j) for j in sampled.joints)}]")
    lines += [f'        tolerance: {_numbers(s.tolerance)}',
              f'        mode: {sampled.kind.mode.value}', f'        max_age: {s.max_age:g}']
    return lines


def _tool_lines(key: str, tool: Tool, node_name: str, stop: Stop | None) -> list[str]:
    lines = [f'      # served by {tool.node}']
    if stop is not None:
        lines.append(f'      # {stop.note}')
    lines += [f'      {key}:', f'        server: {_q(tool.server)}', f'        type: {tool.type}',
              f'        proxy: {_q("/" + node_name + tool.server)}']
    if stop is not None and stop.service:
        lines.append(f'        stop_service: {_q(stop.service)}')
        if stop.service_type:
            lines.append(f'        stop_service_type: {stop.service_type}')
    return lines


def _description_lines(found: Survey) -> list[str]:
    if not found.description:
        return ['    # no /robot_description in the graph: the body is the joint names and tools,',
                '    # and the node does not wait for a description (one it waited for and',
                '    # missed would keep every branch from replaying until it came). A robot',
                f'    # that publishes one later: set this to {description_timeout(None):g}.',
                '    robot_description_timeout: 0.0']
    heard = found.description_heard
    timeout = description_timeout(heard)
    said = (f'heard after {heard:.2f} s' if heard is not None else
            'has a publisher but was not heard while sampled (is it transient local?)')
    return [f'    # /robot_description {said}. The node waits for it at start, and a',
            '    # description it misses makes it another body (every branch learned misses):',
            '    # the wait ends when it arrives, so it is long.',
            f'    robot_description_timeout: {timeout:g}']


def _frames_lines(found: Survey, frames: dict[str, FrameSensor], described: bool) -> list[str]:
    if not frames:
        return []
    out = []
    if not described:
        why = ('no robot description was heard' if not found.description_text else
               'the robot description names no <link> (not a URDF or SDF)')
        out = [f"      # {why}: the robot's own links could not be told apart, so every",
               "      # frame on /tf is proposed; remove the robot's (robot_state_publisher's)."]
    for key, sensor in frames.items():
        out += frame_lines(key, sensor, described=described)
    return out


def render(*, found: Survey, sensors: dict[str, Sensor], skipped: list[Skipped],
           tools: dict[str, Tool], agent: str, agent_note: str, node_name: str,
           store: str, stops: dict[str, Stop] | None = None,
           cameras: dict[str, Camera] | None = None,
           frames: dict[str, FrameSensor] | None = None, described: bool = True) -> str:
    """
    Return the params file's text.

    :param frames: TF sensors (:mod:`.initframes`).
    :param described: Whether the robot's links were known from its description.
    """
    out = [
        f'# Written by muscle-mem init from the ROS graph ({len(found.nodes)} nodes) and '
        'the sensors sampled at rest.',
        '# Start: behavior_cache --ros-args --params-file THIS_FILE',
        '# The reference of every parameter: muscle_mem_ros/config/behavior_cache.yaml.',
        '#',
        '# Before trusting it:',
        '# - point the agent at the proxies below (remap its clients), not at the servers;',
        '# - a tolerance is 6 x the noise heard at rest, a floor where a sensor was',
        '#   quieter, or a default where it made no noise (each sensor says which): run a',
        '#   task twice and read muscle-mem calibrate STORE TASK for what varies between runs;',
        "#   a camera's is 1.5 x its largest cell deviation at rest, light removed, or a floor;",
        "#   a TF frame's, [metres, radians], 6 x its pose's noise at rest, or a floor;",
        '# - replay_requires is none (a learned task replays at once: the point of a first',
        '#   try, watched). Before the robot replays unattended set shadow:3 or approval.',
    ]
    if found.caches:
        out.append(f"# Caches already running, left out: {', '.join(found.caches)} (their "
                   'servers, their proxies and their hidden helper nodes).')
    out += [f'{node_name}:', '  ros__parameters:', '    autostart: true',
            f'    store_path: {_q(store)}', f'    # {agent_note}',
            f'    agent_action: {_q(agent)}', '    cache_mode: learn',
            '    replay_requires: none', *_description_lines(found), '    sensors:']
    for key, sensor in sensors.items():
        out += _sensor_lines(key, sensor)
    for key, camera in (cameras or {}).items():
        out += camera_lines(key, camera)
    out += _frames_lines(found, frames or {}, described)
    for kind in ('action', 'service'):
        chosen = {k: t for k, t in tools.items() if t.kind == kind}
        if chosen:
            out.append(f'    {kind}s:')
            for key, tool in chosen.items():
                out += _tool_lines(key, tool, node_name, (stops or {}).get(key))
    if skipped:
        out.append('# Left out:')
        out += [f'#   {s.name} ({s.type}): {s.reason}' if s.type else f'#   {s.name}: {s.reason}'
                for s in skipped]
    return '\n'.join(out) + '\n'


def _choose(args: argparse.Namespace, tools: list[Tool],
            found: Survey) -> tuple[dict[str, Tool], str, str]:
    if args.tool:  # named: taken even where a rule would leave it out
        missing = [t for t in args.tool if t not in {x.server for x in found.servers}]
        if missing:
            raise MuscleMemError(f"no server {', '.join(missing)} in the graph (found: "
                                 f"{', '.join(t.server for t in tools) or 'none'})")
        tools = sorted((t for t in found.servers if t.server in args.tool),
                       key=lambda t: t.server)
    taken: set[str] = set()
    chosen = {choose_key(t.server, taken): t for t in tools}
    if args.agent:
        agent, note = args.agent, 'the agent named with --agent'
    elif len(found.agents) == 1:
        agent, note = found.agents[0], 'the ExecuteTask server found in the graph'
    elif found.agents:
        agent = ''
        note = (f"{len(found.agents)} ExecuteTask servers found ({', '.join(found.agents)}): "
                'none chosen, name one here (a miss fails until then)')
    else:
        agent, note = '', 'no agent found: a miss fails until one is named here'
    return chosen, agent, note


def run(args: argparse.Namespace, out: Output) -> int:
    """Survey the graph and write the file."""
    path = Path(args.file).expanduser()
    if path.exists():
        raise MuscleMemError(f'{path} exists: init never overwrites a file')
    for name in ('duration', 'discovery'):
        if not getattr(args, name) > 0:
            raise ValueError(f'--{name} must be > 0')
    began = time.monotonic()
    found = _survey(args, out)
    domain = os.environ.get('ROS_DOMAIN_ID', '0')
    if not found.nodes:
        raise MuscleMemError(f'no ROS node found in ROS_DOMAIN_ID={domain} after '
                             f'{time.monotonic() - began:.0f} s: is the robot running, in '
                             'this domain?')
    moved = [m for m in (moving(s) for s in found.sampled) if m]
    if moved:
        raise MuscleMemError('the robot is moving: run init with it still ('
                             + '; '.join(moved) + ')')
    robot_tools, stop_services, left_out = sort_servers(found.servers)
    tools, agent, note = _choose(args, robot_tools, found)
    if not tools:
        raise MuscleMemError(f'{len(found.nodes)} node(s) in ROS_DOMAIN_ID={domain}, but no '
                             'action server or service for the cache to proxy')
    stops = {k: stop_of(t, stop_services) for k, t in tools.items() if t.kind == 'action'}
    sensors: dict[str, Sensor] = {}
    skipped = list(found.skipped) + left_out
    taken: set[str] = set()
    for sampled in found.sampled:
        entry = sensor_from(sampled)
        if isinstance(entry, str):
            skipped.append(Skipped(sampled.topic, sampled.type, entry))
        else:
            sensors[choose_key(sampled.topic, taken)] = entry
    cameras: dict[str, Camera] = {}
    for sample in found.cameras:
        camera = camera_from(sample)
        if isinstance(camera, str):
            skipped.append(Skipped(sample.topic, sample.type, camera))
        else:
            cameras[choose_key(sample.topic, taken)] = camera
    links = description_links(found.description_text) if found.description_text else None
    frames = _frames(args, found, links or frozenset(), taken, skipped)
    held = [tools[k].server for k, stop in stops.items() if stop.hold]
    if held and not any(s.sampled.type == 'sensor_msgs/msg/JointState' for s in sensors.values()):
        raise MuscleMemError(
            f"{', '.join(held)}: a FollowJointTrajectory tool's stop holds the joints where a "
            'JointState sensor says they are, and no JointState topic was sampled (the node '
            'would refuse to start): add --sensor with the joint states, or leave the tool out '
            'with --tool')
    text = render(found=found, sensors=sensors, skipped=skipped, tools=tools, agent=agent,
                  agent_note=note, node_name=args.node_name, store=args.store, stops=stops,
                  cameras=cameras, frames=frames, described=bool(links))
    with open(path, 'x', encoding='utf-8') as stream:
        stream.write(text)
    summary: dict[str, Any] = {
        'file': str(path), 'agent': agent, 'sensors': sorted([*sensors, *cameras, *frames]),
        'tools': sorted(tools), 'left_out': [s.name for s in skipped],
        'cameras': {k: {'topic': c.sample.topic, 'encoding': c.encoding, 'width': c.width,
                        'height': c.height, 'cell': c.cell, 'roi': c.roi,
                        'tolerance': c.tolerance, 'rule': c.rule, 'noise': c.noise,
                        'frames': c.frames, 'dropped': c.dropped}
                    for k, c in cameras.items()},
        'frames': {k: {'frame': f.sample.frame, 'relative_to': f.sample.root,
                       'tolerance': list(f.tolerance), 'rules': list(f.rules),
                       'rms': list(f.rms), 'widest': list(f.widest), 'max_age': f.max_age,
                       'readings': len(f.sample.readings)} for k, f in frames.items()},
        'described': bool(links)}
    if out.json_mode:
        out.json(summary)
        return 0
    out.print(f'wrote {path}: {len(sensors) + len(cameras) + len(frames)} sensor(s), '
              f'{len(tools)} tool(s), '
              f"agent {agent or 'none'}")
    for key, c in cameras.items():
        out.print(f'camera {key}: {c.width}x{c.height} {c.encoding}, cell {c.cell}, tolerance '
                  f'{c.tolerance:g} ({c.rule}), region of interest '
                  f"{list(c.roi) if c.roi else 'the whole view'}")
    if not agent:
        out.print(note)
    if frames and not links:
        out.print("no robot description: every frame on /tf was proposed, the robot's links "
                  'too; remove them from the file')
    if not sensors and not cameras and not frames:
        out.print('no sensor found: nothing is checked, so nothing replays')
    out.print(json.dumps({'left out': summary['left_out']}))
    return 0


def _frames(args: argparse.Namespace, found: Survey, links: frozenset[str], taken: set[str],
            skipped: list[Skipped]) -> dict[str, FrameSensor]:
    """Return the TF sensors proposed; add the frames left out, with why, to ``skipped``."""
    named = set(args.frame or ())
    if found.tf:
        skipped.append(Skipped('/tf', 'tf2_msgs/msg/TFMessage', found.tf))
    heard = {s.frame for s in found.frames}
    skipped += [Skipped(f'frame {f}', '', 'named with --frame, not heard on /tf or /tf_static')
                for f in sorted(named - heard)]
    chosen: dict[str, FrameSensor] = {}
    for sample in found.frames:
        if named and sample.frame not in named:
            continue
        entry = frame_from(sample, links, named=sample.frame in named)
        if isinstance(entry, str):
            skipped.append(Skipped(f'frame {sample.frame}', '', entry))
        else:
            chosen[choose_key(sample.frame, taken)] = entry
    return chosen


def _survey(args: argparse.Namespace, out: Output) -> Survey:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor

    from .survey import survey
    context = rclpy.Context()
    rclpy.init(context=context)
    try:
        node = rclpy.create_node('muscle_mem_init', context=context,
                                 start_parameter_services=False)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        with out.progress(f'reading the graph, then sampling for {args.duration:g} s', 1):
            return survey(node=node, executor=executor, discovery=args.discovery,
                          duration=args.duration, topics_only=tuple(args.sensor or ()),
                          topics=bool(args.sensor) or not args.frame,
                          frames=bool(args.frame) or not args.sensor)
    finally:
        rclpy.try_shutdown(context=context)
