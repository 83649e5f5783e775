"""Lint the package: ruff always (it is pinned in the setup), ament linters where installed."""

from pathlib import Path
import shutil
import subprocess

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
REPO = PACKAGE.parent


def test_ruff_clean():
    ruff = shutil.which('ruff')
    if ruff is None:
        pytest.skip('ruff not installed (scripts/setup.sh installs it)')
    proc = subprocess.run(
        [ruff, 'check', '--no-cache', str(PACKAGE), str(REPO / 'bench')],
        capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.linter
def test_flake8():
    main = pytest.importorskip(
        'ament_flake8.main', reason='ament_flake8 not importable (not available as PyPI wheels)')
    rc, errors = main.main_with_errors(argv=[str(PACKAGE)])
    assert rc == 0, f'{len(errors)} flake8 errors:\n' + '\n'.join(errors)


@pytest.mark.linter
def test_pep257():
    main = pytest.importorskip(
        'ament_pep257.main', reason='ament_pep257 not importable (not available as PyPI wheels)')
    assert main.main(argv=[str(PACKAGE / 'muscle_mem_ros')]) == 0
