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
A behavior tree document as YAML: written for a person, read back with its shape checked.

The layout of ``format: muscle_mem_bt/1`` is described in :mod:`.document`. :func:`dump` puts a
comment above each step (its trajectories, success count and bindings) and a head
comment saying what may be edited; :func:`load` checks the shape, names a bad step by its
path and id, and refuses an edit of a bound field (:meth:`.document.BtStep.refused_edit`).
A step's ``trace`` (what run-bt watches its goal against) is written last, in the form of
:mod:`.traces`. The trees subtask steps call (:mod:`.subtrees`) follow the steps, under
``subtrees``, each with its task, params, variant and steps, in the same form.
"""

from __future__ import annotations

import json
import math
from typing import Any

import yaml

from .document import bound_leaves, BtDocument, BtStep
from .subtrees import call_of, documents, key_text
from .traces import load_trace, trace_data
from ..bindings.rules import Binding, is_number, param_leaves
from ..bindings.variants import Variant
from ..errors import ConfigError
from ..records import ToolKind

__all__ = ['dump', 'FORMAT', 'load']

FORMAT = 'muscle_mem_bt/1'
"""The document format written and read here."""


def dump(doc: BtDocument) -> str:
    """Return the document as YAML, a comment above each step."""
    head = {'format': FORMAT, 'task': doc.task, 'params': doc.params, 'variant': doc.variant,
            **({'body': doc.body} if doc.body else {}), 'sensors': doc.sensors}
    lines = [f'# muscle_mem behavior tree of task {doc.task!r}: edit goals, params or',
             '# branches, then run it (muscle-mem run-bt) or bring it back (muscle-mem import).',
             '# An edited goal field is sent as edited, and the post elements its step lists',
             '# under follows for that field are expected moved by the same amount, there and',
             '# in later checks; those under unpredictable follow no field: an edit cannot say',
             '# where they end. Leave learned as it is (edits are measured against it). A',
             '# field with a binding is computed at run time: edit params or the offset of',
             '# a sensor binding, not the goal (such an edit is refused).',
             "# A step's trace is what its sensors did while it was recorded: run-bt watches",
             '# its goal against it and cancels it when the world leaves it (delete the trace',
             '# to run the step unwatched).',
             *_params_comment(doc),
             *(_SUBTASKS if doc.subtrees else []),
             _yaml(head).rstrip(), *_steps_lines(doc)]
    if doc.subtrees:
        lines.append('subtrees:')
    for name, sub in doc.subtrees.items():
        lines += [f'  # subtree {name}: task {sub.task!r}'
                  + (', not learned: the agent is asked for it' if not sub.steps else ''),
                  f'  {key_text(name)}:']
        head = {'task': sub.task, 'params': sub.params, 'variant': sub.variant}
        lines += [f'    {line}' for line in _yaml(head).rstrip().split('\n')]
        lines += [f'    {line}' for line in _steps_lines(sub)]
    return '\n'.join(lines) + '\n'


_SUBTASKS = [
    '# A subtask step (kind subtask) calls another task through the cache: its goal is the',
    "# subtask's task and params; the tree it calls is under subtrees (by its subtree name):",
    '# run-bt runs it there, and an import brings each subtree back as its own task.',
]


def _steps_lines(doc: BtDocument) -> list[str]:
    lines = ['steps:' if doc.steps else 'steps: []']
    for depth, step, _ in doc.walk():
        lines.extend(_step_lines(step, depth))
    return lines


def _params_comment(doc: BtDocument) -> list[str]:
    pattern = Variant.parse(doc.variant).pattern
    if not isinstance(pattern, dict):
        return []
    bound = bound_leaves(pattern)
    if not bound:
        return ['# params: none bound (one recording is not evidence that a goal follows one):',
                '# with other values no learned step runs and the agent is asked.']
    return [f'# params: {", ".join(bound)} bound (any value runs this tree); the other leaves',
            '# as learned, else no learned step runs and the agent is asked.']


def _step_lines(step: BtStep, depth: int) -> list[str]:
    pad = '  ' * (2 * depth)
    bound = ', '.join(f'{b.field} <- {b.source}' for b in step.bindings) or 'none'
    trajectories = ', '.join(str(t) for t in step.trajectories) or '-'
    body: dict[str, Any] = {
        'id': step.id, 'tool': step.tool, 'kind': step.kind.value, 'type': step.type_name,
        'goal': step.goal,
    }
    if step.learned is not None:
        body['learned'] = step.learned
    body['bindings'] = [_binding_data(b) for b in step.bindings]
    if step.ahead:
        body['ahead'] = [{'source': s, 'max_shift': m} for s, m in step.ahead]
    if step.follows:
        body['follows'] = [{'element': e, 'field': f} for e, f in step.follows]
    if step.unpredictable:
        body['unpredictable'] = list(step.unpredictable)
    body.update({'pre': step.pre, 'post': step.post, 'successes': step.successes,
                 'trajectories': list(step.trajectories), 'end': step.end})
    if step.trace is not None:
        body['trace'] = trace_data(step.trace)
    what = step.tool
    if step.kind is ToolKind.SUBTASK:
        body['subtree'] = step.subtree
        params = step.goal.get('params') if isinstance(step.goal, dict) else None
        what = (f'subtask {step.tool} {json.dumps(params, separators=(",", ":"))} '
                f'(its tree: subtrees {step.subtree or "-"})')
    text = _yaml(body).rstrip().split('\n')
    out = [f'{pad}# step {depth}: {what}, trajectory {trajectories}, succeeded '
           f'{step.successes} times; bound: {bound}',
           f'{pad}- ' + text[0]]
    out.extend(f'{pad}  {line}' for line in text[1:])
    out.append(f'{pad}  then:' + ('' if step.then else ' []'))
    return out


def _binding_data(b: Binding) -> dict[str, Any]:
    data = {'field': b.field, 'source': b.source, 'offset': b.offset,
            'max_shift': b.max_shift, 'origin': b.origin}
    if b.turn is not None:  # an orientation binding: the goal's rotation in its frame's
        data['turn'] = list(b.turn)
    return data


def _turn(value: Any) -> tuple[float, float, float, float] | None:
    """Return a binding's ``turn`` as read (four numbers), None when it has none."""
    if value is None:
        return None
    x, y, z, w = (float(v) for v in value)
    return (x, y, z, w)


def _yaml(value: Any) -> str:
    return str(yaml.safe_dump(value, sort_keys=False, default_flow_style=None, width=100,
                              allow_unicode=True))


def load(text: str, *, source: str = 'the tree') -> BtDocument:
    """
    Read a document, checking its shape; errors name the step (its path and id).

    :raises ConfigError: not YAML, another format, or a step that lacks or mistypes a field.
    """
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:  # one line: where, and the problem (its context after)
        mark = getattr(err, 'problem_mark', None)
        where = f'line {mark.line + 1}, column {mark.column + 1}: ' if mark else ''
        problem = getattr(err, 'problem', None) or ' '.join(str(err).split())
        context = getattr(err, 'context', None)
        raise ConfigError(f'{source}: not YAML: {where}{problem}'
                          + (f' ({context})' if context else '')) from err
    if not isinstance(data, dict) or data.get('format') != FORMAT:
        raise ConfigError(f'{source}: not a muscle_mem behavior tree (format: {FORMAT})')
    for key, kind in (('task', str), ('params', dict), ('steps', list)):
        if not isinstance(data.get(key), kind):
            raise ConfigError(f'{source}: {key}: missing or not a {kind.__name__}')
    param_leaves(data['params'])
    sensors = data.get('sensors') or {}
    if not isinstance(sensors, dict):
        raise ConfigError(f'{source}: sensors: not a map')
    if not isinstance(data.get('body', ''), str):
        raise ConfigError(f'{source}: body: not a string (the key of a body, as '
                          'muscle-mem bodies lists it)')
    doc = _load_tree(data, '', source, sensors)
    doc.body = str(data.get('body') or '')
    subtrees = data.get('subtrees') or {}
    if not isinstance(subtrees, dict):
        raise ConfigError(f'{source}: subtrees: not a map')
    for name, sub in subtrees.items():
        where = f'subtrees.{name}.'
        if not isinstance(sub, dict):
            raise ConfigError(f'{source}: {where[:-1]}: not a map')
        for key, kind in (('task', str), ('params', dict), ('steps', list)):
            if not isinstance(sub.get(key), kind):
                raise ConfigError(f'{source}: {where}{key}: missing or not a {kind.__name__}')
        param_leaves(sub['params'])
        doc.subtrees[str(name)] = _load_tree(sub, where, source, sensors)
    try:
        doc.tolerance()
    except (TypeError, ValueError, AttributeError) as err:
        raise ConfigError(f'{source}: sensors: {err}') from err
    for name, tree in documents(doc):
        for depth, step, _ in tree.walk():
            where = f'{source}: {f"subtrees.{name}: " if name else ""}step {depth} ' \
                    f'(learned step {step.id})'
            why = step.refused_edit()
            if why:
                raise ConfigError(f'{where}: {why}')
            if step.kind is ToolKind.SUBTASK:
                if step.subtree and step.subtree not in doc.subtrees:
                    raise ConfigError(f'{where}: subtree {step.subtree!r} is not under subtrees')
                try:
                    call_of(step)  # its goal calls its tool, with params
                except ConfigError as err:
                    raise ConfigError(f'{where}: {err}') from err
    return doc


def _load_tree(data: dict[str, Any], where: str, source: str,
               sensors: dict[str, Any]) -> BtDocument:
    seen: set[int] = set()
    steps = [_load_step(s, f'{where}steps[{i}]', source, seen)
             for i, s in enumerate(data['steps'])]
    return BtDocument(task=data['task'], params=data['params'],
                      variant=str(data.get('variant') or ''), sensors=sensors, steps=steps)


def _load_step(data: Any, where: str, source: str, seen: set[int]) -> BtStep:
    def bad(text: str) -> ConfigError:
        name = f' (id {data.get("id")})' if isinstance(data, dict) else ''
        return ConfigError(f'{source}: {where}{name}: {text}')
    if not isinstance(data, dict):
        raise bad('not a map')
    for key, kind in (('id', int), ('tool', str), ('kind', str), ('type', str)):
        if not isinstance(data.get(key), kind):
            raise bad(f'{key}: missing or not a {kind.__name__}')
    if data['id'] in seen:
        raise bad('id: used twice')
    seen.add(data['id'])
    try:
        tool_kind = ToolKind(data['kind'])
    except ValueError:
        raise bad(f"kind: {data['kind']!r} is not action, service or subtask") from None
    if tool_kind is ToolKind.FUNCTION:
        raise bad('kind: a Python function step cannot run as a behavior tree')
    if 'goal' not in data:
        raise bad('goal: missing')
    try:
        bindings = tuple(Binding(str(b['field']), str(b['source']), float(b['offset']),
                                 None if b.get('max_shift') is None else float(b['max_shift']),
                                 str(b.get('origin', 'declared')), turn=_turn(b.get('turn')))
                         for b in data.get('bindings') or [])
        ahead = tuple((str(a['source']), None if a.get('max_shift') is None
                       else float(a['max_shift'])) for a in data.get('ahead') or [])
        follows = tuple((str(f['element']), str(f['field'])) for f in data.get('follows') or [])
        unpredictable = tuple(str(e) for e in data.get('unpredictable') or [])
        pre, post = _load_vectors(data.get('pre')), _load_vectors(data.get('post'))
    except (KeyError, TypeError, ValueError) as err:
        raise bad(f'bindings, ahead, follows, pre or post: {err!r}') from err
    trace = None
    if data.get('trace') is not None:
        try:
            trace = load_trace(data['trace'])
        except (TypeError, ValueError) as err:
            raise bad(f'trace: {err}') from err
        if tool_kind is not ToolKind.ACTION:
            raise bad('trace: only an action step is watched while it runs')
    learned = data.get('learned')
    if learned is not None and not (isinstance(learned, dict) and all(
            isinstance(v, str) or is_number(v) for v in learned.values())):
        raise bad('learned: not a map of goal fields to numbers or strings')
    then = data.get('then') or []
    if not isinstance(then, list):
        raise bad('then: not a list')
    subtree = data.get('subtree') or ''
    if not isinstance(subtree, str) or (subtree and tool_kind is not ToolKind.SUBTASK):
        raise bad('subtree: only a subtask step names one, by its name under subtrees')
    children = [_load_step(c, f'{where}.then[{i}]', source, seen) for i, c in enumerate(then)]
    return BtStep(id=data['id'], tool=data['tool'], kind=tool_kind, type_name=data['type'],
                  goal=data['goal'], pre=pre, post=post, bindings=bindings, ahead=ahead,
                  follows=follows, trajectories=tuple(data.get('trajectories') or ()),
                  successes=int(data.get('successes') or 0), end=bool(data.get('end')),
                  then=children, learned=learned, unpredictable=unpredictable,
                  trace=trace, subtree=subtree)


def _load_vectors(value: Any) -> dict[str, list[float]] | None:
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ValueError('a snapshot is a map of sensor name to numbers')
    out = {}
    for name, vector in value.items():
        numbers = [float(v) for v in vector]
        if not all(math.isfinite(v) for v in numbers):
            raise ValueError(f'{name}: not finite')
        out[str(name)] = numbers
    return out
