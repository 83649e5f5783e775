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
The package.xml files read as colcon and rosdep read them, on a full ROS install.

colcon identifies a ROS package by parsing its package.xml with catkin_pkg
(``catkin_pkg.package.parse_package``); a manifest that is not well-formed XML is skipped
with a warning and the package is built as a plain Python package, so ``ros2 launch``
does not find it. rosdep resolves every ``*depend`` key: a key that is neither a ROS
package nor a rosdep rule stops ``rosdep install --from-paths . -y``. Each manifest is
checked here: well-formed XML (minidom, ElementTree), parsed by catkin_pkg with no
warning, the build type colcon would use, and every dependency a package of this
workspace, a ROS package of the distribution, or a rosdep key checked to exist. ament's
own XML linter (ament_xmllint, which runs the ``xmllint`` program against the manifest's
schema) runs where it is installed.
"""

from __future__ import annotations

import ast
from pathlib import Path
import shutil
import subprocess
from xml.dom import minidom
from xml.etree import ElementTree
from xml.parsers.expat import ExpatError

from catkin_pkg.package import InvalidPackage, Package, parse_package, parse_package_string
import pytest

WORKSPACE = Path(__file__).resolve().parents[2]
MANIFESTS = sorted(WORKSPACE.glob('*/package.xml'))

BUILD_TYPES = {
    'muscle_mem_demo': 'ament_python',
    'muscle_mem_demo_interfaces': 'ament_cmake',
    'muscle_mem_interfaces': 'ament_cmake',
    'muscle_mem_ros': 'ament_python',
}
"""Every package of the workspace and the build type colcon must give it."""

ROS_PACKAGES = frozenset({
    'action_msgs', 'ament_cmake', 'ament_copyright', 'ament_flake8', 'ament_index_python',
    'ament_lint_auto', 'ament_lint_common', 'ament_pep257', 'ament_xmllint',
    'builtin_interfaces', 'diagnostic_msgs', 'geometry_msgs', 'launch', 'launch_ros',
    'launch_testing', 'launch_testing_ros', 'py_trees', 'rcl_interfaces', 'rclpy',
    'rosidl_default_generators', 'rosidl_default_runtime', 'sensor_msgs', 'std_msgs',
    'service_msgs', 'std_srvs', 'test_msgs', 'tf2_msgs', 'trajectory_msgs',
    'unique_identifier_msgs',
})
"""
ROS packages the manifests depend on, each a released package of Kilted.

Checked in ros/rosdistro at commit 8468e88ccd523427f9131e39d2af0938f1c298b2 (2026-08-22):
each name is a repository or one of its ``release.packages`` in kilted/distribution.yaml.
"""

ROSDEP_KEYS = frozenset({
    'chromedriver', 'chromium-browser', 'mcap-ros2-support', 'pydocstyle', 'python3-flake8',
    'python3-flake8-blind-except', 'python3-flake8-builtins', 'python3-flake8-class-newline',
    'python3-flake8-comprehensions', 'python3-flake8-deprecated', 'python3-flake8-docstrings',
    'python3-flake8-import-order', 'python3-flake8-quotes', 'python3-gymnasium-robotics-pip',
    'python3-matplotlib', 'python3-mujoco-pip', 'python3-numpy', 'python3-pil',
    'python3-pydot', 'python3-pytest', 'python3-pytest-timeout', 'python3-rich',
    'python3-scipy', 'python3-selenium', 'python3-yaml',
})
"""
rosdep keys the manifests use, each a top-level key of rosdep/python.yaml (chromedriver and
chromium-browser: of rosdep/base.yaml; Debian's chromium-driver and chromium).

Checked in ros/rosdistro at commit 8468e88ccd523427f9131e39d2af0938f1c298b2 (2026-08-22).
Not keys there (so not declared; docs/setup.md says how they are installed):
python3-psycopg (only python3-psycopg2, another library), python3-mcap-pip,
python3-mcap-ros2-support-pip (the key is mcap-ros2-support), python3-behaviortreepy-pip.
"""


def _dependencies(package: Package) -> list[str]:
    """Return every key the manifest declares (all ``*depend`` kinds)."""
    kinds = ('build_depends', 'buildtool_depends', 'build_export_depends',
             'buildtool_export_depends', 'exec_depends', 'test_depends', 'doc_depends')
    return sorted({d.name for kind in kinds for d in getattr(package, kind)})


def problems(text: str, filename: str) -> list[str]:
    """Return what colcon, rosdep or an XML parser would refuse in a manifest's ``text``."""
    found: list[str] = []
    try:
        minidom.parseString(text)
        ElementTree.fromstring(text)
    except (ExpatError, ElementTree.ParseError) as err:
        found.append(f'{filename}: not well-formed XML: {err}')
    warnings: list[str] = []
    try:
        package = parse_package_string(text, filename=filename, warnings=warnings)
    except InvalidPackage as err:
        return [*found, f'{filename}: catkin_pkg cannot parse it: {err}']
    found += [f'{filename}: catkin_pkg warns: {w}' for w in warnings]
    try:
        package.validate()
    except InvalidPackage as err:
        found.append(f'{filename}: catkin_pkg: invalid: {err}')
    want = BUILD_TYPES.get(package.name)
    if want is None:
        found.append(f'{filename}: package {package.name!r} is not one of {sorted(BUILD_TYPES)}')
    elif package.get_build_type() != want:
        found.append(f'{filename}: build type {package.get_build_type()!r}, not {want!r}')
    for key in _dependencies(package):
        if key not in BUILD_TYPES and key not in ROS_PACKAGES and key not in ROSDEP_KEYS:
            found.append(f'{filename}: {key!r} is neither a package of this workspace, a ROS '
                         'package nor a rosdep key checked to exist')
    return found


def test_every_package_of_the_workspace_has_a_manifest():
    assert {p.parent.name for p in MANIFESTS} == set(BUILD_TYPES)


@pytest.mark.parametrize('path', MANIFESTS, ids=lambda p: p.parent.name)
def test_the_manifest_parses_as_colcon_and_rosdep_read_it(path):
    assert problems(path.read_text(encoding='utf-8'), str(path)) == []
    package = parse_package(str(path.parent))  # what colcon and rosdep call
    assert package.name == path.parent.name
    assert package.get_build_type() == BUILD_TYPES[package.name]


@pytest.mark.parametrize('path', MANIFESTS, ids=lambda p: p.parent.name)
def test_colcon_identifies_the_package_with_its_build_type(path):
    ros = pytest.importorskip('colcon_ros.package_identification.ros',
                              reason='colcon-ros is not installed')
    package, build_type = ros.get_package_with_build_type(str(path.parent))
    assert package is not None, f'colcon does not see {path} as a ROS package'
    assert build_type == BUILD_TYPES[package.name]


# What broke a full install (issue 26, A1 and A2): a comment holding a double hyphen, and
# dependency keys rosdep does not know. The checks above must refuse both.
_OLD_COMMENT = '<!-- A learned task as a behavior tree (muscle-mem export --bt, run-bt) -->'
_OLD_KEYS = ('python3-behaviortreepy-pip', 'python3-mcap-pip', 'python3-mcap-ros2-support-pip',
             'python3-psycopg')


def test_the_checks_refuse_a_double_hyphen_in_a_comment():
    text = (WORKSPACE / 'muscle_mem_ros' / 'package.xml').read_text(encoding='utf-8')
    broken = text.replace('</package>', f'  {_OLD_COMMENT}\n</package>')
    found = problems(broken, 'package.xml')
    assert any('not well-formed XML' in p for p in found), found
    assert any('catkin_pkg cannot parse it' in p for p in found), found


@pytest.mark.parametrize('key', _OLD_KEYS)
def test_the_checks_refuse_a_key_rosdep_does_not_know(key):
    text = (WORKSPACE / 'muscle_mem_ros' / 'package.xml').read_text(encoding='utf-8')
    broken = text.replace('<exec_depend>rclpy</exec_depend>',
                          f'<exec_depend>rclpy</exec_depend>\n  <exec_depend>{key}</exec_depend>')
    assert problems(broken, 'package.xml') == [
        f'package.xml: {key!r} is neither a package of this workspace, a ROS package nor a '
        'rosdep key checked to exist']


def test_ament_xmllint_passes(capsys):
    """Run ament_xmllint (the ament_lint_common check) where it and xmllint are installed."""
    missing = [what for what, found in (
        ('ament_xmllint (a ROS package: apt install ros-$ROS_DISTRO-ament-xmllint)',
         _importable('ament_xmllint.main')),
        ('xmllint (apt install libxml2-utils)', shutil.which('xmllint') is not None)) if not found]
    if missing:
        pytest.skip(f'not installed: {", ".join(missing)}')
    from ament_xmllint.main import main
    rc = main([str(p) for p in MANIFESTS])
    out, err = capsys.readouterr()
    if rc != 0 and 'failed to download schema' in err:
        pytest.skip(f'ament_xmllint could not download the manifest schema: {err.strip()}')
    assert rc == 0, out + err


def test_xmllint_finds_every_manifest_well_formed():
    xmllint = shutil.which('xmllint')
    if xmllint is None:
        pytest.skip('not installed: xmllint (apt install libxml2-utils)')
    done = subprocess.run([xmllint, '--noout', *map(str, MANIFESTS)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def _importable(module: str) -> bool:
    try:
        __import__(module)
    except ImportError:
        return False
    return True


def _ros_imports(root: Path) -> set[str]:
    """Return the interface packages (``*_msgs``, ``*_srvs``, ``*_interfaces``) code imports."""
    found: set[str] = set()
    for path in root.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            names = [node.module or ''] if isinstance(node, ast.ImportFrom) else \
                [alias.name for alias in node.names] if isinstance(node, ast.Import) else []
            for name in names:
                top = name.split('.')[0]
                if top.endswith(('_msgs', '_srvs', '_interfaces')):
                    found.add(top)
    return found


@pytest.mark.parametrize('package', ['muscle_mem_ros', 'muscle_mem_demo'])
def test_every_interface_package_the_code_imports_is_declared(package):
    manifest = parse_package(str(WORKSPACE / package / 'package.xml'))
    declared = {d.name for kind in ('build_depends', 'exec_depends')
                for d in getattr(manifest, kind)}
    missing = sorted(_ros_imports(WORKSPACE / package / package) - declared)
    assert not missing, f'{package} imports {missing} without depending on them'
