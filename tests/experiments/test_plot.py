"""Tests of `experiments.plot`: which directories are seeds of one experiment."""

import pathlib
import shutil
import tempfile

import tensorflow as tf

from experiments import binary
from experiments import plot
from tests.experiments import synthetic_runs

_CONFIG = dict(task='mnist_cnn', seed=0, model_seed=None, keep_percent=0.001)


class SeedsOfOneExperimentTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))

  def _run(self, name, **config):
    return synthetic_runs.write_run(self.base / name, {'flare': lambda r: r / 100},
                                    dict(_CONFIG, **config), 10, (0, 10))

  def test_seeds_and_initial_models_of_one_experiment_pass(self):
    plot.check_seeds_of_one_experiment(
        [self._run('s0'), self._run('s1', seed=1),
         self._run('m1', model_seed=1)])

  def test_one_run_twice_or_another_experiment_is_refused(self):
    first = self._run('s0')
    copy = self.base / 'copy'
    shutil.copytree(first, copy)  # A copy records the same seed: not a second seed.
    for dirs, message in (([first, copy],
                           r'copy and .*s0 were run with the same seed 0 and model seed None'),
                          ([first,
                            first], 's0 given twice'), ([first,
                                                         self._run('r5', keep_percent=5.0)],
                                                        'r5 is not a seed of the experiment in '
                                                        '.*s0: they differ in keep_percent')):
      with self.assertRaisesRegex(binary.BadInput, message):
        plot.check_seeds_of_one_experiment(dirs)


if __name__ == '__main__':
  tf.test.main()
