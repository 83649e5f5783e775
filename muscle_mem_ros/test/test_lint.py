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
Lint with ament's settings: the checks `colcon test` runs on a ROS 2 install, run here too.

On a ROS install the package's tests include ament_flake8, ament_pep257 and ament_copyright.
The first two are PyPI wheels too (``ros-ament-flake8``, ``ros-ament-pep257``, pinned in
requirements/kilted-py311.txt), so ``test_flake8`` and ``test_pep257`` run them here; where they
are not importable they skip naming what is missing. ament_copyright is not a wheel:
``test_copyright`` runs it where it is installed and ``test_copyright_with_ament_rules`` checks
its rule here. The ``*_ament_settings`` tests run the same linters the way ament does over
the demo package and ``bench/`` as well:

- flake8 with ament_flake8's config (``ament_flake8.ini`` beside this file, a copy of ament's)
  and ament_flake8's plugin set (import order google, single quotes, docstrings, builtins, ...);
- pydocstyle with ament_pep257's 'ament' convention: every error code except
  D100-D107, D203, D212 and D404, called the way ament_pep257 calls it.

Files: every ``*.py`` under the package folder (as ament_flake8 checks it from the package
folder), under the demo package's folder (``muscle_mem_demo/``, when it sits beside this one
in the source tree) and under ``bench/``, skipping folders whose name starts with ``.`` or
``_`` (as both ament linters do) and folders holding an ``AMENT_IGNORE`` file (as
ament_flake8 does; the ament_pep257 test below passes them as ``--exclude``).
``test/core_examples/`` holds one: its files are muscle-mem's own examples, kept verbatim to
show they run unchanged.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
REPO = PACKAGE.parent
DEMO = REPO / 'muscle_mem_demo'
FLAKE8_CONFIG = Path(__file__).with_name('ament_flake8.ini')
# ament_pep257's 'ament' convention is every pydocstyle code but these.
AMENT_PEP257_IGNORE = frozenset({
    'D100', 'D101', 'D102', 'D103', 'D104', 'D105', 'D106', 'D107', 'D203', 'D212', 'D404'})
APACHE_2_HEADER = """
Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
"""
"""The header text ament_copyright knows for 'apache2' (whitespace is not compared)."""
COPYRIGHT_LINE = re.compile(r'^Copyright(?: \(c\))? \d{4}(?:-\d{4})?(?:, \d{4}(?:-\d{4})?)* \S',
                            re.MULTILINE)
_C_SUFFIXES = ('.c', '.cc', '.cpp', '.cxx', '.h', '.hh', '.hpp', '.hxx')


def _ignored_dirs(root: Path) -> list[Path]:
    """
    Find the folders under ``root`` that hold an AMENT_IGNORE file.

    :param root: folder to walk.
    :return: the marked folders, sorted.
    """
    return sorted(Path(path) for path, _, files in os.walk(root) if 'AMENT_IGNORE' in files)


def _python_files(*roots: Path, suffixes: tuple[str, ...] = ('.py',),
                  names: tuple[str, ...] = ()) -> list[Path]:
    """
    List the files ament's linters check under ``roots``.

    :param roots: folders to walk.
    :param suffixes: file name endings to take.
    :param names: whole file names to take too.
    :return: every matching file outside hidden, private and AMENT_IGNORE folders, sorted.
    """
    found: list[Path] = []
    for root in roots:
        for path, dirs, files in os.walk(root):
            if 'AMENT_IGNORE' in files:
                dirs[:] = []
                continue
            dirs[:] = [d for d in dirs if d[0] not in '._']
            found.extend(Path(path) / name for name in files
                         if name.endswith(suffixes) or name in names)
    return sorted(found)


def _roots() -> list[Path]:
    """Return the folders linted: this package, the demo package beside it, bench/."""
    return [PACKAGE, *([DEMO] if DEMO.is_dir() else []), REPO / 'bench']


def test_file_selection_skips_the_verbatim_examples():
    files = _python_files(*_roots())
    examples = PACKAGE / 'test' / 'core_examples'
    assert _ignored_dirs(PACKAGE) == [examples]
    assert not [f for f in files if examples in f.parents]
    for expected in (PACKAGE / 'setup.py', PACKAGE / 'launch' / 'behavior_cache.launch.py',
                     Path(__file__).resolve(), PACKAGE / 'muscle_mem_ros' / 'engine' / 'engine.py',
                     REPO / 'bench' / 'lookup.py'):
        assert expected in files
    if DEMO.is_dir():
        for expected in (DEMO / 'setup.py', DEMO / 'launch' / 'sim_demo.launch.py',
                         DEMO / 'muscle_mem_demo' / 'robot_node.py',
                         DEMO / 'test' / 'test_sim_story.py'):
            assert expected in files


def test_flake8_with_ament_settings():
    files = _python_files(*_roots())
    proc = subprocess.run(
        [sys.executable, '-m', 'flake8', '--config', str(FLAKE8_CONFIG), *map(str, files)],
        capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, (
        f"flake8 with ament_flake8's settings over {len(files)} files:\n"
        + proc.stdout + proc.stderr)


def test_pep257_with_ament_settings():
    from pydocstyle import check
    from pydocstyle.violations import ErrorRegistry

    select = sorted(set(ErrorRegistry.get_error_codes()) - AMENT_PEP257_IGNORE)
    assert 'D213' in select and 'D407' in select and 'D212' not in select
    files = _python_files(*_roots())
    # As ament_pep257 calls it: no property decorators, so properties need imperative
    # summaries too ("Return the store.").
    errors = [str(error) for error in check(map(str, files), select=select,
                                            ignore_decorators=None)]
    assert not errors, (
        f"{len(errors)} pydocstyle errors with ament_pep257's convention over {len(files)} "
        'files:\n' + '\n'.join(errors))


def _header_comment(text: str) -> str:
    """
    Return the comment block a file starts with, as ament_copyright reads it.

    A shebang and a coding line are skipped; the block is the ``#`` lines that follow,
    with the ``#`` and one space taken off each.

    :param text: the file's contents.
    :return: the block's text, one line per comment line.
    """
    lines = text.splitlines()
    while lines and (lines[0].startswith('#!') or
                     (lines[0].startswith('#') and 'coding' in lines[0])):
        lines.pop(0)
    block: list[str] = []
    for line in lines:
        if not line.startswith('#'):
            break
        block.append(line[2:] if line.startswith('# ') else line[1:])
    return '\n'.join(block)


def _words(text: str) -> str:
    return ' '.join(text.split())


def _copyright_roots() -> list[Path]:
    """Return the folders ament_copyright checks: every package of the repository, bench/."""
    return sorted(p.parent for p in REPO.glob('*/package.xml')) + [REPO / 'bench']


def test_copyright_with_ament_rules():
    """
    Every file ament_copyright checks carries a copyright line and the Apache-2.0 header.

    ament_copyright is not a PyPI wheel; this is its rule for the files it checks (Python,
    CMake and C/C++ sources): the first comment block names the copyright holder
    (``Copyright <year> <holder>``) and holds the license's header text. ``test_copyright``
    below runs ament_copyright itself where it is installed.
    """
    header = _words(APACHE_2_HEADER)
    files = _python_files(*_copyright_roots(), suffixes=('.py', '.cmake', *_C_SUFFIXES),
                          names=('CMakeLists.txt',))
    assert REPO / 'muscle_mem_interfaces' / 'CMakeLists.txt' in files
    assert PACKAGE / 'muscle_mem_ros' / 'ros' / 'node' / 'cache_node.py' in files
    bad = []
    for path in files:
        block = _header_comment(path.read_text())
        if not COPYRIGHT_LINE.search(block) or header not in _words(block):
            bad.append(str(path.relative_to(REPO)))
    assert not bad, f'{len(bad)} of {len(files)} files lack the copyright header:\n' + \
        '\n'.join(bad)


def test_license_file_and_package_licenses_agree():
    text = (REPO / 'LICENSE').read_text()
    assert _words('Apache License Version 2.0, January 2004') in _words(text)
    assert 'END OF TERMS AND CONDITIONS' in text
    for package_xml in REPO.glob('*/package.xml'):
        assert '<license>Apache-2.0</license>' in package_xml.read_text(), package_xml


@pytest.mark.copyright
@pytest.mark.linter
def test_copyright(monkeypatch):
    main = pytest.importorskip(
        'ament_copyright.main',
        reason='ament_copyright not importable (not available as a PyPI wheel)')
    monkeypatch.chdir(PACKAGE)
    assert main.main(argv=['.', 'test']) == 0, 'Found errors'


@pytest.mark.linter
def test_flake8(monkeypatch):
    main = pytest.importorskip(
        'ament_flake8.main', reason='ament_flake8 not importable (pip install ros-ament-flake8)')
    # ament_flake8 looks for AMENT_IGNORE under the working directory.
    monkeypatch.chdir(PACKAGE)
    rc, errors = main.main_with_errors(argv=[str(PACKAGE)])
    assert rc == 0, f'{len(errors)} flake8 errors:\n' + '\n'.join(errors)


@pytest.mark.linter
def test_pep257():
    main = pytest.importorskip(
        'ament_pep257.main', reason='ament_pep257 not importable (pip install ros-ament-pep257)')
    # ament_pep257 does not look for AMENT_IGNORE: exclude the marked folders by name.
    excludes = [str(path) for path in _ignored_dirs(PACKAGE)]
    assert main.main(argv=[str(PACKAGE), '--exclude', *excludes]) == 0


def test_no_module_shadows_a_standard_library_module():
    # flake8-builtins 2.2 and later (A005) flag a module named after a standard-library one
    # (a ``trace.py``); ament pins 2.1, which does not, so a ROS user with current plugins would
    # see what this run would not. The rule is checked here by name.
    shadowing = sorted(str(path.relative_to(REPO)) for path in _python_files(*_roots())
                       if path.stem in sys.stdlib_module_names)
    assert not shadowing, f'modules named after standard-library modules: {shadowing}'


def test_no_dict_comprehension_only_repeats_a_constant():
    # flake8-comprehensions 3.16 and later (C420) flag ``{k: 0 for k in keys}``, which is
    # ``dict.fromkeys(keys, 0)``; ament pins 3.14, which does not. A mutable value ([], {}) is
    # left alone, as C420 leaves it: fromkeys would share one list among the keys.
    found = []
    for path in _python_files(*_roots()):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.DictComp) and len(node.generators) == 1
                    and not node.generators[0].ifs and not node.generators[0].is_async
                    and isinstance(node.generators[0].target, ast.Name)
                    and isinstance(node.key, ast.Name)
                    and node.key.id == node.generators[0].target.id
                    and isinstance(node.value, ast.Constant)):
                found.append(f'{path.relative_to(REPO)}:{node.lineno}: {ast.unparse(node)}')
    assert not found, 'C420, use dict.fromkeys:\n' + '\n'.join(found)
