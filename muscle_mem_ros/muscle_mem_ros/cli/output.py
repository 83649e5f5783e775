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
How the command line prints: rich tables and trees for people, JSON for scripts.

Everything a command prints goes through one :class:`Output`: results to
stdout, progress and errors to stderr, so ``muscle-mem ... --json | jq`` sees
only the JSON. Progress bars show only on a terminal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
import datetime
import json
import math
import os
import sys
from typing import Any, TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn
from rich.table import Table

__all__ = ['Output', 'when']


def when(stamp: float) -> str:
    """Return a wall time as local 'YYYY-MM-DD HH:MM:SS', or '-' for never (0)."""
    if not stamp or not math.isfinite(stamp):
        return '-'
    return datetime.datetime.fromtimestamp(stamp).strftime('%Y-%m-%d %H:%M:%S')


class Output:
    """
    One command's output channels.

    :param json_mode: Print JSON instead of tables.
    :param stdout: Where results go (default ``sys.stdout``).
    :param stderr: Where progress, notes and errors go (default ``sys.stderr``).
    """

    def __init__(
        self, *, json_mode: bool = False, stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.json_mode = json_mode
        out = stdout or sys.stdout
        err = stderr or sys.stderr
        wide = out.isatty() or 'COLUMNS' in os.environ
        self.console = Console(file=out, highlight=False, soft_wrap=False,
                               width=None if wide else 160)
        self.errors = Console(file=err, highlight=False, stderr=True)
        self._out = out

    def json(self, data: Any) -> None:
        """Print ``data`` as indented JSON (the whole of a ``--json`` command's stdout)."""
        self._out.write(json.dumps(data, indent=2, sort_keys=False, default=str) + '\n')

    def table(
        self, columns: Sequence[str], rows: Iterable[Sequence[Any]], *, title: str | None = None,
        right: Sequence[str] = (),
    ) -> None:
        """
        Print a table.

        :param columns: Column headers.
        :param rows: One sequence of cells per row (converted with ``str``).
        :param title: Printed above the table.
        :param right: Headers of the columns to right-align (numbers).
        """
        table = Table(title=title, title_justify='left', header_style='bold')
        for name in columns:
            table.add_column(name, justify='right' if name in right else 'left',
                             overflow='fold')
        for row in rows:
            table.add_row(*(str(cell) for cell in row))
        self.console.print(table)

    def print(self, *objects: Any) -> None:  # noqa: A003 (rich's name)
        """Print renderables or text to stdout (markup off: store text is printed as is)."""
        self.console.print(*objects, markup=False)

    def note(self, text: str) -> None:
        """Print a note for people on stderr."""
        self.errors.print(text, markup=False)

    @contextmanager
    def progress(self, what: str, total: int) -> Iterator[Any]:
        """
        Show a progress bar on stderr while the body runs (only on a terminal).

        :param what: What is being counted.
        :param total: How many there are.
        :return: A callable advancing the bar by one.
        """
        progress = Progress(TextColumn('{task.description}'), BarColumn(),
                            MofNCompleteColumn(), console=self.errors, transient=True,
                            disable=not self.errors.is_terminal)
        with progress:
            task = progress.add_task(what, total=total)
            yield lambda: progress.advance(task)
