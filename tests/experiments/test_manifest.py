"""Tests of the manifest's summaries (`experiments.manifest`) on hand-written metrics files."""

import collections
import pathlib
import tempfile

import tensorflow as tf

from experiments import figures
from experiments import manifest
from tests.experiments import test_plot


class SeedGroupsTest(tf.test.TestCase):

  def test_a_group_keeps_the_algorithms_every_run_holds(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    folder = base / 'figure'
    test_plot._write_run(folder / 'model_seed1', {'flare': [0.1, 0.5, 0.6],
                                                  'ec': [0.1, 0.2, 0.3]}, 10.0)
    # An external run with one more algorithm (EF21, as the committed seed runs have).
    test_plot._write_run(base / 'seed0', {'flare': [0.1, 0.3, 0.8], 'ec': [0.1, 0.4, 0.5],
                                          'ef21': [0.1, 0.1, 0.1]}, 10.0)
    figure = figures.Figure(
        name='figure', title='Initial models',
        runs=(figures.Run('model_seed1', dict(algorithms='flare,ec'), rounds=200),),
        summarize=lambda f, d: manifest._summarize_seed_groups(collections.OrderedDict(
            models=(['model_seed1', 'seed0'], 'Two initial models', 'initial models')), f, d,
            [100, 200]),
        external=dict(seed0=str(base / 'seed0')))
    section = figure.summarize(figure, folder)
    table = (folder / 'models.md').read_text()
    self.assertIn(table, section)
    self.assertIn('mean over 2 initial models', table)
    self.assertIn('| FLARE | 0.4000 [0.3000, 0.5000] | 0.7000 [0.6000, 0.8000] |', table)
    self.assertNotIn('EF21', table)
    self.assertTrue((folder / 'models.png').exists())

  def test_runs_of_one_algorithm_each_make_one_seed(self):
    folder = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir())) / 'figure'
    test_plot._write_run(folder / 'seed0_flare', {'flare': [0.1, 0.5, 0.6]}, 10.0)
    test_plot._write_run(folder / 'seed0_ec', {'ec': [0.1, 0.2, 0.3]}, 10.0)
    test_plot._write_run(folder / 'seed1', {'flare': [0.1, 0.3, 0.8], 'ec': [0.1, 0.4, 0.5]},
                         10.0)
    names = ('seed0_flare', 'seed0_ec', 'seed0_fedavg')  # FedAvg's run has no metrics yet.
    figure = figures.Figure(
        name='figure', title='Per-algorithm runs',
        runs=tuple(figures.Run(n, dict(algorithms=n.split('_')[1]), rounds=200) for n in names),
        summarize=lambda f, d: manifest._summarize_seed_groups(collections.OrderedDict(
            both=([names, 'seed1'], 'Two seeds')), f, d, [100, 200]),
        external=dict(seed1=str(folder / 'seed1')))
    section = figure.summarize(figure, folder)
    table = (folder / 'both.md').read_text()
    self.assertIn('(seed0_flare + seed0_ec, seed1;', section)
    # Seed 0's FLARE and EC come from two runs: each algorithm has both seeds.
    self.assertIn('| FLARE | 0.4000 [0.3000, 0.5000] | 0.7000 [0.6000, 0.8000] |', table)
    self.assertIn('| EC | 0.3000 [0.2000, 0.4000] | 0.4000 [0.3000, 0.5000] |', table)
    self.assertNotIn('FedAvg', table)


if __name__ == '__main__':
  tf.test.main()
