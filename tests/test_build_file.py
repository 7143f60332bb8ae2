"""Keeps `BUILD` true to the tree: a target per module and test, with the real deps.

`BUILD` is read by executing it with stand-ins for `py_library`/`py_test`; every module of
`tff_flare/`, `benchmarks/` and every helper or test of `tests/` must have exactly one target,
and each target's deps must be exactly the project modules its source imports.
"""

import ast
import os
import pathlib

import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ('tff_flare', 'tests', 'benchmarks', 'experiments')


def _read_build():
  targets = {}

  def rule(kind):
    def add(name, srcs, deps=(), **kwargs):
      del kwargs
      if name in targets:
        raise AssertionError(f'duplicate target {name}')
      targets[name] = dict(kind=kind, srcs=list(srcs), deps=sorted(deps))
    return add

  namespace = {'py_library': rule('py_library'), 'py_test': rule('py_test'),
               'py_binary': rule('py_binary'), 'package': lambda **kwargs: None,
               'exports_files': lambda *args, **kwargs: None, 'glob': lambda *a, **k: []}
  exec(compile((ROOT / 'BUILD').read_text(), 'BUILD', 'exec'), namespace)  # pylint: disable=exec-used
  return targets


def _label(path: pathlib.Path) -> str:
  relative = path.relative_to(ROOT).with_suffix('')
  return ':' + '_'.join(relative.parts).replace('___init__', '')


def _project_imports(path: pathlib.Path) -> set[str]:
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
        labels.add(_label(module))
  return labels


def _sources():
  for package in PACKAGES:
    directory = ROOT / package
    if directory.is_dir():
      yield from sorted(p for p in directory.rglob('*.py') if '__pycache__' not in p.parts)


class BuildFileTest(tf.test.TestCase):

  def test_every_source_has_one_target_with_its_real_deps(self):
    targets = _read_build()
    by_source = {src: name for name, t in targets.items() for src in t['srcs']}
    for path in _sources():
      source = str(path.relative_to(ROOT))
      if path.name == '__init__.py' and not path.read_text().strip():
        continue
      self.assertIn(source, by_source, f'{source} has no target in BUILD')
      target = targets[by_source[source]]
      expected_kind = 'py_test' if path.name.startswith('test_') else None
      if expected_kind:
        self.assertEqual(target['kind'], 'py_test', source)
      self.assertEqual(sorted(_project_imports(path)), target['deps'],
                       f'deps of {by_source[source]} in BUILD differ from the imports of {source}')

  def test_no_target_without_a_source(self):
    for name, target in _read_build().items():
      for src in target['srcs']:
        self.assertTrue((ROOT / src).exists(), f'{name}: {src} does not exist')


if __name__ == '__main__':
  tf.test.main()
