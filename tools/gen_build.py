"""Regenerates the top-level BUILD from the tree and its imports.

  python -m tools.gen_build > BUILD

A py_library per module of tff_flare/, benchmarks/, experiments/ and per test helper, a
py_binary per program (`<label>_bin`), a py_test per tests/**/test_*.py, with deps = the
project modules the source imports (the rule `tests/test_build_file.py` checks). Tests that
train real models or start processes (LARGE_TESTS) are "large".
"""

from tools import build_graph

LARGE_TESTS = frozenset({
    'tests/algorithms/test_composer.py',
    'tests/algorithms/test_ec.py',
    'tests/algorithms/test_ef21.py',
    'tests/algorithms/test_flare.py',
    'tests/algorithms/test_masking.py',
    'tests/algorithms/test_registry.py',
    'tests/execution/test_cleanup.py',
    'tests/execution/test_inprocess.py',
    'tests/execution/test_remote.py',
    'tests/experiment/test_golden.py',
    'tests/experiment/test_runner.py',
    'tests/experiments/test_demo.py',
    'tests/experiments/test_run_experiment.py',
    'tests/simulation/test_loop.py',
})

HEADER = '''# Bazel targets of tff_flare: a py_library per module, a py_binary per program, a py_test per
# test file. tests/test_build_file.py keeps this file in sync with the tree and the imports;
# regenerate it with `python -m tools.gen_build > BUILD`.
# Third-party packages (tensorflow, tensorflow_federated, ...) come from the Python
# environment that runs Bazel (see README, "Layout", and the Makefile's bazel-test).

package(default_visibility = ["//visibility:public"])
'''


def _rule(kind: str, name: str, source: str, deps, extra=()) -> str:
  lines = [f'    name = "{name}",', f'    srcs = ["{source}"],']
  if deps:
    lines.append(f'    deps = [{", ".join(chr(34) + d + chr(34) for d in sorted(deps))}],')
  lines += list(extra)
  return f'{kind}(\n' + '\n'.join(lines) + '\n)\n'


def targets_of(path) -> list[str]:
  source = str(path.relative_to(build_graph.ROOT))
  name = build_graph.label(path)[1:]
  deps = build_graph.project_imports(path)
  if build_graph.is_test(path):
    size = 'large' if source in LARGE_TESTS else 'medium'
    return [
        _rule('py_test', name, source, deps, [f'    main = "{source}",', f'    size = "{size}",'])
    ]
  targets = [_rule('py_library', name, source, deps)]
  if build_graph.is_binary(path):
    targets.append(
        _rule('py_binary', f'{name}_bin', source, [f':{name}'], [f'    main = "{source}",']))
  return targets


def main():
  targets = [t for path in build_graph.sources() for t in targets_of(path)]
  print(HEADER + '\n' + '\n'.join(targets), end='')


if __name__ == '__main__':
  main()
