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
ROS 2 message definitions as MCAP schemas (``ros2msg`` encoding), from installed interfaces.

An MCAP reader decodes a ``cdr`` message with the text of its type and of every
type it uses: the top-level definition, then one block per dependency
(``====...`` line, ``MSG: pkg/msg/Type``, its text), as rosbag2 writes them.
The texts are read from the interface files every ROS package installs
(``share/<pkg>/msg/X.msg``, ``action/X.action``, ``srv/X.srv``), found through
the ament index. An action's goal type ``pkg/action/X_Goal`` is the first
section of ``X.action``; a service's request ``pkg/srv/X_Request`` the first
of ``X.srv``.
"""

from __future__ import annotations

from pathlib import Path
import re

from ...errors import TypeResolutionError

__all__ = ['message_schema', 'payload_type']

_PRIMITIVES = frozenset({
    'bool', 'byte', 'char', 'float32', 'float64', 'int8', 'uint8', 'int16', 'uint16',
    'int32', 'uint32', 'int64', 'uint64', 'string', 'wstring',
})
_SEPARATOR = '=' * 80
_SECTION = re.compile(r'^---\s*$', re.MULTILINE)


def payload_type(type_name: str, kind: str) -> str:
    """
    Return the message type a step's payload is: an action's goal, a service's request.

    :param type_name: The interface (``pkg/action/X``, ``pkg/srv/X``).
    :param kind: ``action`` or ``service``.
    :return: ``pkg/action/X_Goal`` or ``pkg/srv/X_Request``.
    :raises TypeResolutionError: a name of the wrong shape.
    """
    parts = type_name.split('/')
    want = {'action': 'action', 'service': 'srv'}.get(kind)
    if want is None or len(parts) != 3 or parts[1] != want:
        raise TypeResolutionError(f'{type_name!r} is not a {kind} type name (pkg/{want}/Name)')
    return f'{type_name}_Goal' if kind == 'action' else f'{type_name}_Request'


def _share(package: str) -> Path:
    from ament_index_python.packages import get_package_share_directory, PackageNotFoundError
    try:
        return Path(get_package_share_directory(package))
    except (PackageNotFoundError, LookupError) as err:
        raise TypeResolutionError(f'interface package {package!r} is not installed (is the '
                                  'workspace sourced?)') from err


def _text(full: str) -> str:
    """Return the text of ``pkg/msg/X``, ``pkg/action/X_Goal`` or ``pkg/srv/X_Request``."""
    package, sub, name = full.split('/')
    if sub == 'action' and name.endswith('_Goal'):
        path, section = _share(package) / 'action' / f'{name[:-5]}.action', 0
    elif sub == 'srv' and name.endswith('_Request'):
        path, section = _share(package) / 'srv' / f'{name[:-8]}.srv', 0
    elif sub == 'msg':
        path, section = _share(package) / 'msg' / f'{name}.msg', None
    else:
        raise TypeResolutionError(f'cannot export type {full!r}')
    try:
        text = path.read_text()
    except OSError as err:
        raise TypeResolutionError(f'{full}: no interface file {path}') from err
    if section is not None:
        text = _SECTION.split(text)[section]
    return text.strip('\n') + '\n'


def _dependencies(package: str, text: str) -> list[str]:
    """Return the ``pkg/msg/Type`` names a definition's fields use, in order."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith('#'):
            continue
        base = re.sub(r'\[.*?\]$', '', line.split()[0])
        base = re.sub(r'<=\d+$', '', base)
        if base in _PRIMITIVES:
            continue
        if base == 'Header':
            base = 'std_msgs/Header'
        parts = base.split('/')
        name = f'{parts[0]}/msg/{parts[-1]}' if len(parts) > 1 else f'{package}/msg/{base}'
        if name not in found:
            found.append(name)
    return found


def message_schema(full: str) -> str:
    """
    Return the MCAP ``ros2msg`` schema text of a message type and every type it uses.

    :param full: ``pkg/msg/X``, ``pkg/action/X_Goal`` or ``pkg/srv/X_Request``.
    :return: The concatenated definition.
    :raises TypeResolutionError: a package or interface file that is not installed.
    """
    main = _text(full)
    blocks = [main]
    seen = {full}
    pending = _dependencies(full.split('/')[0], main)
    while pending:
        name = pending.pop(0)
        if name in seen:
            continue
        seen.add(name)
        text = _text(name)
        blocks.append(f'{_SEPARATOR}\nMSG: {name}\n{text}')
        pending.extend(_dependencies(name.split('/')[0], text))
    return ''.join(blocks)
