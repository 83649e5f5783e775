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
Registry of the Python functions and methods an engine records and replays.

A tool is identified by its qualified name and a hash of its source code, so
a persistent store never replays a step with a function whose code changed
since it was recorded (that step is simply not a candidate any more).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass
import hashlib
import inspect
import marshal
import textwrap
from typing import Any

from ..checks.tolerance import Check

__all__ = ['Tool', 'ToolRegistry', 'source_hash']


def source_hash(func: Callable[..., Any]) -> str:
    """Hash a function's code: its AST when the source is available, else its bytecode."""
    target = inspect.unwrap(func)
    try:
        source = textwrap.dedent(inspect.getsource(target))
        text = ast.dump(ast.parse(source), annotate_fields=True, include_attributes=False)
        data = text.encode()
    except (OSError, TypeError, SyntaxError):
        code = getattr(target, '__code__', None)
        data = marshal.dumps(code) if code is not None else repr(target).encode()
    return hashlib.sha256(data).hexdigest()[:16]


@dataclass(frozen=True, eq=False)
class Tool:
    """
    A registered function or method.

    :ivar func: The undecorated callable.
    :ivar name: Module-qualified name, stored as ``Step.tool``.
    :ivar code_hash: Hash of the source, stored as ``Step.type_name`` (with a 'py:' prefix).
    :ivar is_method: Called with the engine's context object as ``self``.
    :ivar pre_check: Check captured before the call, or None.
    :ivar post_check: Check captured after the call, or None.
    """

    func: Callable[..., Any]
    name: str
    code_hash: str
    is_method: bool
    pre_check: Check[Any] | None
    post_check: Check[Any] | None

    @property
    def type_name(self) -> str:
        """Value stored as ``Step.type_name``."""
        return f'py:{self.code_hash}'


class ToolRegistry:
    """Tools by (name, code hash)."""

    def __init__(self) -> None:
        self._tools: dict[tuple[str, str], Tool] = {}

    def register(
        self,
        func: Callable[..., Any],
        *,
        is_method: bool,
        pre_check: Check[Any] | None,
        post_check: Check[Any] | None,
    ) -> Tool:
        """Add a tool; registering the same function twice raises ValueError."""
        for label, check in (('pre_check', pre_check), ('post_check', post_check)):
            if check is not None and not isinstance(check, Check):
                raise TypeError(f'{label} must be a Check, got {type(check).__name__}')
        name = f'{func.__module__}.{func.__qualname__}'
        tool = Tool(func=func, name=name, code_hash=source_hash(func), is_method=is_method,
                    pre_check=pre_check, post_check=post_check)
        key = (tool.name, tool.type_name)
        if key in self._tools:
            raise ValueError(f'Attempted to register duplicate tool {func.__name__}')
        self._tools[key] = tool
        return tool

    def get(self, name: str, type_name: str) -> Tool | None:
        """Return the tool a step was recorded with, or None if it is not registered now."""
        return self._tools.get((name, type_name))

    def has_methods(self) -> bool:
        """Return True if any tool is a method (needs a context object)."""
        return any(t.is_method for t in self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)
