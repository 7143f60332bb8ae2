"""Regenerates the top-level BUILD from the tree and its imports.

  python -m tools.gen_build > BUILD

A py_library per module of tff_flare/, benchmarks/, experiments/ and per test helper, a
py_test per tests/test_*.py, with deps = the project modules the source imports (the rule
`tests/test_build_file.py` checks). Tests that build TFF processes (LARGE_TESTS) are "large".
"""

from tests import test_build_file

LARGE_TESTS = frozenset({
    'demo', 'ec', 'ef21', 'flare', 'masking', 'remote', 'runtime', 'stateful_process',
    'training_loop',
})

HEADER = '''# Bazel targets of tff_flare: a py_library per module, a py_test per test file.
# tests/test_build_file.py keeps this file in sync with the tree and the imports;
# regenerate it with `python -m tools.gen_build > BUILD`.
# Third-party packages (tensorflow, tensorflow_federated, ...) come from the Python
# environment that runs Bazel (see README, "Bazel").

package(default_visibility = ["//visibility:public"])
'''


def _target(path) -> str:
  root = test_build_file.ROOT
  source = str(path.relative_to(root))
  name = test_build_file._label(path)[1:]  # pylint: disable=protected-access
  deps = sorted(test_build_file._project_imports(path))  # pylint: disable=protected-access
  lines = [f'    name = "{name}",', f'    srcs = ["{source}"],']
  if deps:
    lines.append(f'    deps = [{", ".join(repr(d).replace(chr(39), chr(34)) for d in deps)}],')
  if path.parent.name == 'tests' and path.name.startswith('test_'):
    size = 'large' if path.stem[len('test_'):] in LARGE_TESTS else 'medium'
    lines += [f'    main = "{source}",', f'    size = "{size}",']
    kind = 'py_test'
  else:
    kind = 'py_library'
  return f'{kind}(\n' + '\n'.join(lines) + '\n)\n'


def main():
  targets = []
  for path in test_build_file._sources():  # pylint: disable=protected-access
    if path.name == '__init__.py' and not path.read_text().strip():
      continue
    targets.append(_target(path))
  print(HEADER + '\n' + '\n'.join(targets), end='')


if __name__ == '__main__':
  main()
