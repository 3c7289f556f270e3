"""ARCHITECTURE.md's layer list against the real imports of the package (read with ast, inside
functions too), so the documented import order cannot drift from the code."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# source folder -> the package it installs as (see pyproject.toml)
SOURCES = {"constrained_spec": "constrained_spec", "kernels": "constrained_spec.kernels", "grammars": "constrained_spec.grammars"}
MODEL_CODE = {"models", "runners", "static_llama", "static_runner", "cuda_graphs"}


def documented_layers() -> dict[str, int]:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    section = text.split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers: dict[str, int] = {}
    for number, names in re.findall(r"^(\d+)\. [^:\n]+: (.+)$", section, flags=re.M):
        for name in re.findall(r"`([\w.]+)`", names):
            assert name not in layers, f"{name} is listed twice in ARCHITECTURE.md"
            layers[name] = int(number)
    return layers


def modules() -> dict[str, Path]:
    found = {}
    for folder, package in SOURCES.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            found[".".join([package, *parts])] = path
    return found


def unit(module: str) -> str:
    """The layer unit of a module: the top-level module or subpackage of constrained_spec."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def imports() -> set[tuple[str, str, str]]:
    """(importing unit, imported unit, importing file) for every import between units."""
    known = modules()
    edges = set()
    for module, path in known.items():
        package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else [])) if node.level else node.module
                for alias in node.names:  # `from . import x` imports the module x
                    targets.append(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
            for target in targets:
                if target.startswith("constrained_spec") and unit(target) != unit(module):
                    edges.add((unit(module), unit(target), str(path.relative_to(ROOT))))
    return edges


def test_every_module_is_placed_in_one_layer():
    units = {unit(m) for m in modules()}
    layers = documented_layers()
    assert units - set(layers) == set(), "new modules: place each in a layer of ARCHITECTURE.md (## Layers) by what it imports"
    assert set(layers) - units == set(), "ARCHITECTURE.md lists modules that do not exist"


def test_imports_flow_down_the_documented_layers():
    layers = documented_layers()
    upward = sorted(f"{path}: {a} (layer {layers[a]}) imports {b} (layer {layers[b]})" for a, b, path in imports() if layers[a] < layers[b])
    assert upward == []


def test_the_grammar_never_imports_the_sampler_and_kernels_never_import_model_code():
    edges = {(a, b) for a, b, _ in imports()}
    assert ("grammar", "sampling") not in edges
    assert not {b for a, b in edges if a == "kernels"} & MODEL_CODE
