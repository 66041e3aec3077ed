"""The package's import graph, built from the source: no cycles, the layer order, no private
names across modules, and no jax under selection/.

Every `import` / `from ... import` of a `frontier_rl` module counts, at module level or inside a
function (a deferred import still makes two modules depend on each other; it only hides the
cycle from the interpreter). A module imports only modules of its own layer (`LAYERS`) or of a
lower one. A name with a leading underscore belongs to its module: importing it from another
module, or reaching it as `module._name`, is an error.
"""

import ast
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PKG = os.path.join(ROOT, "frontier_rl")

# The package's layers, lowest first: (name, modules and packages under frontier_rl). A module
# belongs to the layer of the longest entry naming it or a package above it ("" is the
# package's own __init__); a new module must be given one. The run's services (run/) and the
# planner's modules the trainer uses too (shape buckets, compile cache, chips and targets,
# peaks, node memory); the model, its FLOPs and its files; tasks and data; the selectors
# (host-side, no jax); the RL losses and update; generation (sampler, engines, the pipeline,
# the entropy pass, scoring); the config, which composes the registries of everything below;
# the policy and its warm start; the runs (train, the planner's commands, the synthetic
# learner, eval, serve); the studies and benches that run them; the CLI. Each package's
# docstring names the layer of its __init__ (test_every_package_says_what_it_is_and_its_layer).
LAYERS = (
    ("base", ("", "run", "fit.shapes", "fit.compile_cache", "fit.gpu_specs", "fit.targets",
              "fit.perf", "fit.node_memory", "hub")),
    ("models", ("models", "fit.accounting", "export")),
    ("tasks", ("tasks", "data")),
    ("selection", ("selection",)),
    ("rl", ("rl",)),
    ("rollout", ("rollout", "entropy", "evaluation")),
    ("config", ("config_lib",)),
    ("policy", ("policy", "warmstart", "numerics", "data.fixtures")),
    ("runs", ("train", "fit", "sim", "evaluation.suite", "rollout.serve")),
    ("experiment", ("experiment", "bench", "sim.controls", "sim.rate_model")),
    ("cli", ("cli", "__main__")),
)
TOP_LEVEL_MODULES = 12  # at most this many modules beside the packages (cli, train, ...)


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


def layer_of(mod: str, layers=LAYERS) -> int | None:
    """Index in `layers` of the layer holding `mod` (a dotted name), None if none names it."""
    rel = mod.partition(".")[2]
    best, level = -1, None
    for i, (_, names) in enumerate(layers):
        for n in names:
            if (rel == n or (n and rel.startswith(n + "."))) and len(n) > best:
                best, level = len(n), i
    return level


def upward(edges: dict[str, set[str]], layers=LAYERS) -> list[str]:
    """Every import of a module in a higher layer, and every module in no layer."""
    bad = []
    for m in sorted(edges):
        lm = layer_of(m, layers)
        if lm is None:
            bad.append(f"{m} is in no layer")
            continue
        for d in sorted(edges[m]):
            ld = layer_of(d, layers)
            if ld is not None and ld > lm:
                bad.append(f"{m} ({layers[lm][0]}) imports {d} ({layers[ld][0]})")
    return bad


def test_the_package_has_no_import_cycle():
    edges, _ = graph(modules())
    assert cycles(edges) == []


def test_imports_follow_the_layer_order():
    edges, _ = graph(modules())
    assert upward(edges) == []


def test_no_module_uses_another_modules_private_names():
    _, bad = graph(modules())
    assert bad == []


def test_every_package_says_what_it_is_and_its_layer():
    """Each package's __init__ has a docstring that names the layer its __init__ is in (the
    layer its modules may import up to); a package whose docstring names another layer, or
    none, fails."""
    bad = []
    for name, path in sorted(modules().items()):
        if not path.endswith("__init__.py") or name == "frontier_rl":
            continue
        doc = ast.get_docstring(ast.parse(open(path).read())) or ""
        layer = LAYERS[layer_of(name)][0]
        if not doc:
            bad.append(f"{name}: no docstring")
        elif f'layer "{layer}"' not in doc.lower():
            bad.append(f'{name}: its docstring does not name its layer "{layer}"')
    assert bad == []


def test_the_top_level_holds_few_modules_beside_its_packages():
    top = sorted(f for f in os.listdir(PKG) if f.endswith(".py")
                 and f not in ("__init__.py", "__main__.py"))
    assert len(top) <= TOP_LEVEL_MODULES, top


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


def test_the_layer_check_sees_an_upward_import(tmp_path):
    pkg = tmp_path / "frontier_rl"
    (pkg / "low").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "low" / "__init__.py").write_text("")
    (pkg / "low" / "a.py").write_text("def f():\n    from frontier_rl import high\n")
    (pkg / "low" / "b.py").write_text("from frontier_rl.low import a\n")  # same layer
    (pkg / "low" / "up.py").write_text("from frontier_rl.high import g\n")  # low.up: the top
    (pkg / "high.py").write_text("from frontier_rl.low import b\n\ndef g():\n    pass\n")
    (pkg / "stray.py").write_text("")
    layers = (("low", ("", "low")), ("high", ("high", "low.up")))
    edges, _ = graph(modules(str(pkg)))
    assert upward(edges, layers) == [
        "frontier_rl.low.a (low) imports frontier_rl.high (high)",
        "frontier_rl.stray is in no layer",
    ]


# Run in a fresh interpreter: imports `MODULES` and prints null, or the package source lines
# (file:line) through which the first of jax, jaxlib or flax was imported.
_NO_JAX = """
import importlib, json, sys, traceback

HEAVY = ("jax", "jaxlib", "flax")
seen = []


class Watch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HEAVY and not seen:
            seen.append([f"{f.filename.split('frontier_rl/')[-1]}:{f.lineno}"
                         for f in traceback.extract_stack() if "/frontier_rl/" in f.filename])
        return None


sys.meta_path.insert(0, Watch())
for m in MODULES:
    importlib.import_module(m)
print(json.dumps(seen[0] if seen else None))
"""


def test_selection_imports_no_jax():
    """The selectors are host-side Python + numpy (selection/base.py): importing the package
    and every module under it loads neither jax nor flax, so the synthetic learner and the
    selection bench run without them."""
    names = sorted(m for m in modules() if m.split(".")[:2] == ["frontier_rl", "selection"])
    assert len(names) > 10
    out = subprocess.run([sys.executable, "-c", f"MODULES = {names!r}\n" + _NO_JAX],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    chain = json.loads(out.stdout)
    assert chain is None, "jax is imported through " + " -> ".join(chain)


if __name__ == "__main__":
    e, b = graph(modules())
    print(cycles(e))
    print("\n".join(upward(e)))
    print("\n".join(b))
    pytest.main([__file__])
