"""The package's import graph, built from the source: no cycles, no private names across
modules.

Every `import` / `from ... import` of a `frontier_rl` module counts, at module level or inside a
function (a deferred import still makes two modules depend on each other; it only hides the
cycle from the interpreter). A name with a leading underscore belongs to its module: importing
it from another module, or reaching it as `module._name`, is an error.
"""

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "frontier_rl")


def modules(pkg_dir: str = PKG) -> dict[str, str]:
    """Dotted module name -> file path for every .py file of the package."""
    out = {}
    for d, _, files in os.walk(pkg_dir):
        for f in files:
            if f.endswith(".py"):
                rel = os.path.relpath(os.path.join(d, f), os.path.dirname(pkg_dir))[:-3]
                name = rel.replace(os.sep, ".")
                out[name.removesuffix(".__init__")] = os.path.join(d, f)
    return out


def _resolve(mod: str, node: ast.ImportFrom, is_pkg: bool) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".")
    base = base if is_pkg else base[:-1]
    base = base[:len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def graph(mods: dict[str, str]) -> tuple[dict[str, set[str]], list[str]]:
    """(module -> the package modules it imports, private-name violations)."""
    edges: dict[str, set[str]] = {m: set() for m in mods}
    bad = []
    for mod, path in mods.items():
        tree = ast.parse(open(path).read(), path)
        is_pkg = path.endswith("__init__.py")
        aliases: dict[str, str] = {}  # local name -> package module it refers to
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name in mods:
                        edges[mod].add(a.name)
                        aliases[a.asname or a.name] = a.name
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, node, is_pkg)
                for a in node.names:
                    sub = f"{src}.{a.name}"
                    if sub in mods:  # `from pkg import module`
                        edges[mod].add(sub)
                        aliases[a.asname or a.name] = sub
                    elif src in mods:
                        edges[mod].add(src)
                        if a.name.startswith("_") and not a.name.startswith("__") and src != mod:
                            bad.append(f"{mod} imports {src}.{a.name}")
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                    and node.value.id in aliases and node.attr.startswith("_")
                    and not node.attr.startswith("__") and aliases[node.value.id] != mod):
                bad.append(f"{mod} uses {aliases[node.value.id]}.{node.attr}")
    for m in edges:
        edges[m].discard(m)
        # a module importing its own package's __init__ is not a dependency on a sibling
        edges[m] = {e for e in edges[m] if not m.startswith(e + ".")}
    return edges, sorted(set(bad))


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_package_has_no_import_cycle():
    edges, _ = graph(modules())
    assert cycles(edges) == []


def test_no_module_uses_another_modules_private_names():
    _, bad = graph(modules())
    assert bad == []


def test_the_checks_see_a_cycle_and_a_private_import(tmp_path):
    pkg = tmp_path / "frontier_rl"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def f():\n    from frontier_rl import b\n    return b._g\n")
    (pkg / "b.py").write_text("from frontier_rl.a import f\n\ndef _g():\n    return f\n")
    (pkg / "c.py").write_text("from frontier_rl.b import _g\n")
    edges, bad = graph(modules(str(pkg)))
    assert cycles(edges) == [["frontier_rl.a", "frontier_rl.b"]]
    assert bad == ["frontier_rl.a uses frontier_rl.b._g", "frontier_rl.c imports frontier_rl.b._g"]


if __name__ == "__main__":
    e, b = graph(modules())
    print(cycles(e))
    print("\n".join(b))
    pytest.main([__file__])
