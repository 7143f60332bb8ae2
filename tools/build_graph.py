"""The project's modules and their imports, as Bazel labels (used by `gen_build` and a test).

A module's label is its path with '/' as '_' and without '.py' (`tff_flare/algorithms/flare.py`
-> `:tff_flare_algorithms_flare`); a package's `__init__.py` is labelled by its folder.
"""

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ('tff_flare', 'tests', 'benchmarks', 'experiments')


def label(path: pathlib.Path) -> str:
  relative = path.relative_to(ROOT).with_suffix('')
  return ':' + '_'.join(relative.parts).replace('___init__', '')


def project_imports(path: pathlib.Path) -> set[str]:
  """Labels of the project modules that `path` imports."""
  labels = set()
  for node in ast.walk(ast.parse(path.read_text())):
    names = []
    if isinstance(node, ast.ImportFrom) and node.module and node.module.split('.')[0] in PACKAGES:
      names = [f'{node.module}.{alias.name}' for alias in node.names]
    elif isinstance(node, ast.Import):
      names = [a.name for a in node.names if a.name.split('.')[0] in PACKAGES]
    for name in names:
      module = ROOT / (name.replace('.', '/') + '.py')
      if not module.exists():
        module = ROOT / (name.rsplit('.', 1)[0].replace('.', '/') + '.py')
      if not module.exists():
        module = ROOT / name.replace('.', '/') / '__init__.py'
      if module.exists() and module != path:
        labels.add(label(module))
  return labels


def sources():
  """Every Python file of the project's packages but empty `__init__.py`s, sorted."""
  for package in PACKAGES:
    directory = ROOT / package
    if directory.is_dir():
      yield from sorted(p for p in directory.rglob('*.py') if '__pycache__' not in p.parts and
                        not (p.name == '__init__.py' and not p.read_text().strip()))


def is_test(path: pathlib.Path) -> bool:
  return path.parts[len(ROOT.parts)] == 'tests' and path.name.startswith('test_')


def is_binary(path: pathlib.Path) -> bool:
  """A module of `experiments/` or `benchmarks/` that runs as a program."""
  return (path.parts[len(ROOT.parts)] in ('experiments', 'benchmarks') and
          "if __name__ == '__main__':" in path.read_text())
