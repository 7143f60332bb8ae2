"""Tests of `experiments.runs`: selecting seeds of declared runs (reading a run directory:
tests/experiment/test_run_files.py)."""

import pathlib
import tempfile

import tensorflow as tf

from experiments import runs
from experiments import spec
from tests.experiments import synthetic_runs

_CONFIG = dict(task='mnist_cnn', seed=0, keep_percent=0.001, model_seed=None)


def _constant(value):
  return lambda r: value


class SelectTest(tf.test.TestCase):

  def test_joins_reaching_and_where(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    figure = spec.Figure('fig',
                         'a figure',
                         'FLARE: test',
                         grids=(spec.Grid('seed{seed}', dict(algorithms='flare,ec'), 300,
                                          dict(seed=(0, 1))),
                                spec.Grid('long_seed{seed}',
                                          dict(algorithms='flare'),
                                          1000,
                                          dict(seed=(0,)),
                                          joins='seed{seed}'),
                                spec.Grid('other_R', dict(algorithms='flare', keep_percent=0.1),
                                          300)))
    for seed in (0, 1):
      synthetic_runs.write_run(base / 'fig' / f'seed{seed}', {
          'flare': _constant(0.5 + seed / 10),
          'ec': _constant(0.2)
      }, dict(_CONFIG, seed=seed), 300, range(0, 301, 100))
    synthetic_runs.write_run(base / 'fig' / 'long_seed0', {'flare': _constant(0.9)}, _CONFIG, 1000,
                             range(0, 1001, 100))
    synthetic_runs.write_run(base / 'fig' / 'other_R', {'flare': _constant(0.3)},
                             dict(_CONFIG, keep_percent=0.1), 300, range(0, 301, 100))
    results = runs.Results(base, [figure])
    seeds = results.select(('fig',), dict(keep_percent=0.001))
    self.assertLen(seeds, 2)
    # The joined run adds its rounds; the first declared run wins where both have a round.
    self.assertEqual(seeds[0].refs, ['fig/seed0', 'fig/long_seed0'])
    self.assertEqual(seeds[0].at('flare', 300), 0.5)
    self.assertEqual(seeds[0].at('flare', 1000), 0.9)
    self.assertIsNone(seeds[1].at('flare', 1000))
    # Only the runs that reached round 1,000: the joining run stands alone.
    (alone,) = results.select(('fig',), reaching=1000)
    self.assertEqual(alone.refs, ['fig/long_seed0'])
    (other,) = results.select(('fig',), dict(keep_percent=0.1))
    self.assertEqual(other.at('flare', 300), 0.3)
    with self.assertRaisesRegex(KeyError, 'fig/absent'):
      results.resolve('absent', 'fig')


if __name__ == '__main__':
  tf.test.main()
