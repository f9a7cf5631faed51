"""Imports between the package's modules form no cycle, imports inside functions included: what two
modules share lives below both (``compare`` and the dashboard's view share ``pipelines/read.py``).
The one exception is the command line's dispatch: ``pipelines/cli.py`` imports each command's
module when it runs it, and the commands may import ``cli``'s exit codes."""
import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
DISPATCH = "ldp_marginals.pipelines.cli"


def modules() -> dict:
    """``{dotted name: path}`` of every module the package installs (from pyproject's package-dir)."""
    package_dir = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    out = {}
    for package, folder in package_dir.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = list(path.relative_to(ROOT / folder).with_suffix("").parts)
            if package == "ldp_marginals.pipelines" and parts[0] == "root":   # the top package's own folder
                continue
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out[".".join([package, *parts])] = path
    return out


def import_graph() -> dict:
    """``{module: modules it imports}``, at any depth of its code (functions' imports too)."""
    mods = modules()
    graph = {}
    for name, path in mods.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps |= {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in mods else node.module
                         for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[name] = {d for d in deps if d in mods and d != name}
    return graph


def cycles(graph: dict) -> list:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while not component or component[-1] != v:
                component.append(stack.pop())
                on_stack.discard(component[-1])
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_the_package():
    graph = import_graph()
    assert "ldp_marginals.pipelines.read" in graph["ldp_marginals.pipelines.compare"]
    assert "ldp_marginals.pipelines.run" in graph[DISPATCH]   # a function's import is seen
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles_but_the_command_lines_dispatch():
    graph = import_graph()
    graph[DISPATCH] = set()
    assert cycles(graph) == []
