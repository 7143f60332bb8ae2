"""Keeps `BUILD` true to the tree: a target per module, test and program, with the real deps.

`BUILD` is read by executing it with stand-ins for the rules; every module of `tff_flare/`,
`benchmarks/`, `experiments/` and every helper or test of `tests/` must have exactly one
library or test target whose deps are exactly the project modules its source imports, and
every program (`experiments/`, `benchmarks/` with a `__main__`) a `py_binary`.
"""

import tensorflow as tf

from tools import build_graph


def _read_build():
  targets = {}

  def rule(kind):

    def add(name, srcs, deps=(), **kwargs):
      del kwargs
      if name in targets:
        raise AssertionError(f'duplicate target {name}')
      targets[name] = dict(kind=kind, srcs=list(srcs), deps=sorted(deps))

    return add

  namespace = {
      'py_library': rule('py_library'),
      'py_test': rule('py_test'),
      'py_binary': rule('py_binary'),
      'package': lambda **kwargs: None,
      'exports_files': lambda *args, **kwargs: None,
      'glob': lambda *a, **k: []
  }
  exec(compile((build_graph.ROOT / 'BUILD').read_text(), 'BUILD', 'exec'), namespace)  # pylint: disable=exec-used
  return targets


class BuildFileTest(tf.test.TestCase):

  def test_every_source_has_one_target_with_its_real_deps(self):
    targets = _read_build()
    by_source = {}
    for name, target in targets.items():
      if target['kind'] != 'py_binary':
        for src in target['srcs']:
          by_source[src] = name
    for path in build_graph.sources():
      source = str(path.relative_to(build_graph.ROOT))
      self.assertIn(source, by_source, f'{source} has no target in BUILD')
      target = targets[by_source[source]]
      self.assertEqual(target['kind'], 'py_test' if build_graph.is_test(path) else 'py_library',
                       source)
      self.assertEqual(sorted(build_graph.project_imports(path)), target['deps'],
                       f'deps of {by_source[source]} in BUILD differ from the imports of {source}')

  def test_every_program_has_a_binary(self):
    binaries = {t['srcs'][0] for t in _read_build().values() if t['kind'] == 'py_binary'}
    programs = {
        str(p.relative_to(build_graph.ROOT))
        for p in build_graph.sources()
        if build_graph.is_binary(p)
    }
    self.assertIn('experiments/run_experiment.py', programs)
    self.assertEqual(binaries, programs)

  def test_no_target_without_a_source(self):
    for name, target in _read_build().items():
      for src in target['srcs']:
        self.assertTrue((build_graph.ROOT / src).exists(), f'{name}: {src} does not exist')


if __name__ == '__main__':
  tf.test.main()
