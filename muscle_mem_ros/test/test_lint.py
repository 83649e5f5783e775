"""
Lint with ament's settings: the checks `colcon test` runs on a ROS 2 install, run here too.

On a ROS install the package's tests include ament_flake8 and ament_pep257. On the wheel setup
those two packages do not exist, so ``test_flake8`` and ``test_pep257`` skip; the two
``*_ament_settings`` tests run the same linters, pinned from PyPI in
requirements/kilted-py311.txt, with the same settings over the same files, so a pass here is a
pass there:

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

import os
from pathlib import Path
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


def _ignored_dirs(root: Path) -> list[Path]:
    """
    Find the folders under ``root`` that hold an AMENT_IGNORE file.

    :param root: folder to walk.
    :return: the marked folders, sorted.
    """
    return sorted(Path(path) for path, _, files in os.walk(root) if 'AMENT_IGNORE' in files)


def _python_files(*roots: Path) -> list[Path]:
    """
    List the files ament's linters check under ``roots``.

    :param roots: folders to walk.
    :return: every ``*.py`` file outside hidden, private and AMENT_IGNORE folders, sorted.
    """
    found: list[Path] = []
    for root in roots:
        for path, dirs, files in os.walk(root):
            if 'AMENT_IGNORE' in files:
                dirs[:] = []
                continue
            dirs[:] = [d for d in dirs if d[0] not in '._']
            found.extend(Path(path) / name for name in files if name.endswith('.py'))
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
                     Path(__file__).resolve(), PACKAGE / 'muscle_mem_ros' / 'engine.py',
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


@pytest.mark.linter
def test_flake8(monkeypatch):
    main = pytest.importorskip(
        'ament_flake8.main', reason='ament_flake8 not importable (not available as PyPI wheels)')
    # ament_flake8 looks for AMENT_IGNORE under the working directory.
    monkeypatch.chdir(PACKAGE)
    rc, errors = main.main_with_errors(argv=[str(PACKAGE)])
    assert rc == 0, f'{len(errors)} flake8 errors:\n' + '\n'.join(errors)


@pytest.mark.linter
def test_pep257():
    main = pytest.importorskip(
        'ament_pep257.main', reason='ament_pep257 not importable (not available as PyPI wheels)')
    # ament_pep257 does not look for AMENT_IGNORE: exclude the marked folders by name.
    excludes = [str(path) for path in _ignored_dirs(PACKAGE)]
    assert main.main(argv=[str(PACKAGE), '--exclude', *excludes]) == 0
