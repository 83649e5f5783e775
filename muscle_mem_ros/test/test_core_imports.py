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
The package's layering: the core never imports rclpy, no module imports itself back.

A name is imported from the module that defines it: only a package's ``__init__`` re-exports.
The binding rules are applied in one place (the core's ``bindings.judge``), which both
front ends (the node and the Python ``Engine``) use.
"""

from __future__ import annotations

import ast
import subprocess
import sys

from core_helpers import core_modules, PACKAGE_ROOT, subprocess_env

CORE = core_modules()


def test_core_modules_list_is_complete():
    for name in ('muscle_mem_ros.engine.engine', 'muscle_mem_ros.checks.matcher',
                 'muscle_mem_ros.checks.tolerance', 'muscle_mem_ros.store.sqlite',
                 'muscle_mem_ros.store.memory'):
        assert name in CORE
    assert not any(m.startswith(('muscle_mem_ros.ros', 'muscle_mem_ros.cli')) for m in CORE)


def test_importing_the_core_leaves_rclpy_out():
    code = ('import importlib, sys\n'
            'import muscle_mem_ros\n'
            f'for name in {CORE!r}:\n'
            '    importlib.import_module(name)\n'
            'bad = [m for m in sys.modules if m == "rclpy" or m.startswith("rclpy.")]\n'
            'assert not bad, bad\n'
            'print(len(sys.modules))\n')
    out = subprocess.run([sys.executable, '-c', code], env=subprocess_env(),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def _module_imports() -> dict[str, set[str]]:
    """
    Return each package module's imports of package modules.

    Every import counts, those under ``if TYPE_CHECKING:`` and inside functions too: a
    module that needs another only for its types still depends on it.
    """
    package = PACKAGE_ROOT / 'muscle_mem_ros'
    paths = {'.'.join(p.relative_to(PACKAGE_ROOT).with_suffix('').parts).removesuffix(
        '.__init__'): p for p in package.rglob('*.py')}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text())
        here = name if path.name == '__init__.py' else name.rpartition('.')[0]
        found = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ''
                if node.level:
                    base = '.'.join(here.split('.')[:len(here.split('.')) - node.level + 1]
                                    + ([node.module] if node.module else []))
                for alias in node.names:
                    target = f'{base}.{alias.name}'
                    found.add(target if target in paths else base)
            elif isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
        graph[name] = {m for m in found if m in paths and m != name}
    return graph


def test_no_module_of_the_package_imports_itself_back():
    graph = _module_imports()
    assert graph['muscle_mem_ros.ros.execution.replay']  # the graph is read
    for start in graph:
        seen, todo = set(), list(graph[start])
        while todo:
            name = todo.pop()
            assert name != start, f'{start} imports itself back through {sorted(seen)}'
            if name not in seen:
                seen.add(name)
                todo.extend(graph[name])


def test_layers_import_one_way():
    # the ROS-free core at the bottom, ros/ above it, cli/ on top with web/ (the page, which
    # reads the store through the command line's inventory): a module imports only from its
    # own layer or those below (what two layers share lives in the lower one)
    graph = _module_imports()

    def layer(name: str) -> int:
        if name.startswith(('muscle_mem_ros.cli', 'muscle_mem_ros.web')):
            return 2
        return 1 if name.startswith('muscle_mem_ros.ros') else 0
    upward = sorted(f'{name} imports {target}' for name, targets in graph.items()
                    for target in targets if layer(target) > layer(name))
    assert any(layer(n) == 2 for n in graph) and any(layer(n) == 1 for n in graph)
    assert not upward, 'imports against the layers:\n' + '\n'.join(upward)


def test_one_binding_judge_serves_the_node_and_the_engine():
    package = PACKAGE_ROOT / 'muscle_mem_ros'
    rules = {'resolve', 'advance', 'Shift'}  # the rules the judge applies
    judges, ruled = set(), set()
    for path in package.rglob('*.py'):
        name = path.relative_to(package).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'BindingJudge':
                judges.add(name)
            if isinstance(node, ast.ImportFrom) and (node.module or '').endswith('bindings.judge'):
                if {alias.name for alias in node.names} & rules:
                    ruled.add(name)
    # the front ends build one: the Engine, the node's walk judge, shadow runs (predictions on
    # recorded snapshots), run-bt (an exported behavior tree's checks) and a behavior tree
    # document run in its recorded world (what an import stores: bt/document.py's as_run)
    assert judges == {'engine/walking.py', 'ros/execution/judge.py', 'replay/shadow.py',
                      'cli/runbt.py', 'bt/document.py'}
    assert ruled <= {'bindings/filing.py'}, ruled  # filing checks a recording, it judges no replay


def test_one_filing_serves_the_node_and_learn():
    # a finished recording is filed (bindings.filing.file_steps, with the body's visible
    # steps and the tree's plans) in one place: the node's replayer and learn both call it
    package = PACKAGE_ROOT / 'muscle_mem_ros'
    callers = set()
    for path in package.rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, 'id', '') == 'file_steps':
                callers.add(path.relative_to(package).as_posix())
    assert callers == {'replay/treeview.py'}, callers


def _defined_here(tree: ast.Module) -> set[str]:
    """Return the names a module defines at its top level (imports aside)."""
    names: set[str] = set()
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.If, ast.Try)):
            todo.extend(node.body + node.orelse + getattr(node, 'finalbody', []))
            todo.extend(s for h in getattr(node, 'handlers', []) for s in h.body)
    return names


def _package_modules() -> dict[str, tuple[ast.Module, bool]]:
    """Return each package module's syntax tree and whether it is a package ``__init__``."""
    package = PACKAGE_ROOT / 'muscle_mem_ros'
    return {'.'.join(p.relative_to(PACKAGE_ROOT).with_suffix('').parts).removesuffix(
        '.__init__'): (ast.parse(p.read_text()), p.name == '__init__.py')
        for p in package.rglob('*.py')}


def test_only_package_inits_re_export():
    modules = _package_modules()
    assert len(modules) > 50  # the modules are read
    defined = {name: _defined_here(tree) for name, (tree, _) in modules.items()}
    listed = 0
    for name, (tree, is_init) in modules.items():
        if is_init:
            continue  # a package's __init__ declares the package's API from its modules
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(
                    getattr(t, 'id', '') == '__all__' for t in node.targets):
                listed += 1
                foreign = sorted(set(ast.literal_eval(node.value)) - defined[name])
                assert not foreign, f'{name}.__all__ names what it imports: {foreign}'
    assert listed > 50  # the check saw the modules' __all__
    # and nothing imports a name from a module that only imported it (library, tests, demo)
    sources = [(p, None) for folder in (PACKAGE_ROOT / 'test', PACKAGE_ROOT.parent / 'bench',
                                        PACKAGE_ROOT.parent / 'muscle_mem_demo')
               for p in folder.rglob('*.py')]
    sources += [(p, p.relative_to(PACKAGE_ROOT).parts[:-1])
                for p in (PACKAGE_ROOT / 'muscle_mem_ros').rglob('*.py')]
    found = []
    for path, parts in sources:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            base = node.module or ''
            if node.level and parts is not None:  # relative to the importing module's package
                base = '.'.join(parts[:len(parts) - node.level + 1]
                                + ((node.module,) if node.module else ()))
            if base not in modules or modules[base][1]:
                continue
            found += [f'{path.name}: {base}.{a.name}' for a in node.names
                      if a.name not in defined[base] and f'{base}.{a.name}' not in modules]
    assert not found, f'imported from a module that does not define them: {found}'
