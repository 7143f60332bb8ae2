"""Tests of the figures and seed tables (`experiments.plot`) on hand-written metrics files."""

import csv
import json
import os
import pathlib
import tempfile

import tensorflow as tf

from experiments import binary
from experiments import plot


def _write_run(directory: pathlib.Path, accuracies: dict[str, list[float]], sent: float):
  """A metrics.csv with evaluations at rounds 0, 100, 200 and `sent` bytes every round."""
  directory.mkdir(parents=True)
  names = list(accuracies)
  columns = ['round'] + [f'{n}/{c}' for n in names
                         for c in ('eval/accuracy', 'eval/loss', 'bytes_uploaded')]
  with open(directory / 'metrics.csv', 'w', newline='') as f:
    writer = csv.DictWriter(f, columns)
    writer.writeheader()
    for r in range(201):
      row = {'round': r}
      for n in names:
        if r % 100 == 0:
          row[f'{n}/eval/accuracy'] = accuracies[n][r // 100]
          row[f'{n}/eval/loss'] = 1.0
        if r < 200:
          row[f'{n}/bytes_uploaded'] = sent
      writer.writerow(row)


class SeedTableTest(tf.test.TestCase):

  def test_mean_and_range_over_seeds_at_the_rounds_reached(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    _write_run(base / 's0', {'flare': [0.1, 0.5, 0.6], 'ef21': [0.1, 0.2, 0.3]}, 10.0)
    _write_run(base / 's1', {'flare': [0.1, 0.3, 0.8], 'ef21': [0.1, 0.4, 0.5]}, 10.0)
    curves = plot.seed_curves([str(base / 's0'), str(base / 's1')], {'ef21': 'ef21_dense'})
    self.assertEqual(sorted(curves), ['ef21_dense', 'flare'])
    # Evaluations happen before the round's training: 100 rounds of 10 bytes before round 100.
    self.assertEqual(curves['flare'][0]['bytes'], [0.0, 1000.0, 2000.0])
    table = plot.seed_table(curves, [100, 200, 1000])
    self.assertIn('mean over 2 seeds', table)
    self.assertIn('| round 100 | round 200 |', table)
    self.assertNotIn('round 1000', table)  # Not reached by the runs.
    self.assertIn('| FLARE | 0.4000 [0.3000, 0.5000] | 0.7000 [0.6000, 0.8000] |', table)
    self.assertIn("| EF21 (authors' dense state) | 0.3000 [0.2000, 0.4000] |", table)
    # What the runs vary names the mean; no round every run reached makes no empty table.
    self.assertIn('mean over 2 initial models', plot.seed_table(curves, [100], 'initial models'))
    self.assertEqual(plot.seed_table(curves, [1000]),
                     'Test accuracy over 2 seeds: no round of [1000] that every run reached '
                     'yet.\n')

  def test_orderings_hold_in_every_seed_or_not(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    _write_run(base / 's0', {'flare': [0.1, 0.5, 0.6], 'ec': [0.1, 0.55, 0.3],
                             'fedavg': [0.1, 0.6, 0.9]}, 10.0)
    _write_run(base / 's1', {'flare': [0.1, 0.3, 0.8], 'ec': [0.1, 0.4, 0.5],
                             'fedavg': [0.1, 0.7, 0.75]}, 10.0)
    orderings = plot.seed_orderings(plot.seed_curves([str(base / 's0'), str(base / 's1')]))
    # Round 0 is a tie; at round 100 EC is above FLARE in both seeds.
    self.assertIn('| FLARE > EC | 1 of 3 | 1 | round 200 |', orderings)
    self.assertIn('| FedAvg > EC | 2 of 3 | 0 | round 100 |', orderings)
    # Seed 1 has FLARE above FedAvg at the last evaluation (0.8 > 0.75).
    self.assertIn('| FedAvg > FLARE | 1 of 3 | 0 | not at the last evaluation |', orderings)
    self.assertEqual(orderings.count('\n| '), 4)  # Header and three pairs.

  def test_the_figure_is_written(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    _write_run(base / 's0', {'flare': [0.1, 0.5, 0.6]}, 10.0)
    output = base / 'out' / 'seeds.png'
    plot.plot_seeds(plot.seed_curves([str(base / 's0')]), str(output), 'title')
    self.assertGreater(os.path.getsize(output), 1000)



class BadInputTest(tf.test.TestCase):
  """What the plot refuses, each as one line (`binary.BadInput`, exit 2)."""

  def test_missing_empty_and_header_only_runs(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    (base / 'empty').mkdir()
    (base / 'header_only').mkdir()
    (base / 'header_only' / 'metrics.csv').write_text('round,flare/eval/accuracy\n')
    for run, message in (('missing', 'missing: no readable metrics.csv'),
                         ('empty', 'empty: no readable metrics.csv'),
                         ('header_only', 'has no evaluated round yet')):
      with self.assertRaisesRegex(binary.BadInput, message):
        plot.read_curves(base / run / 'metrics.csv')

  def test_seeds_of_different_experiments_are_refused(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    for name, tau, seed in (('a', 0.05, 0), ('b', 0.05, 1), ('c', 0.5, 2)):
      _write_run(base / name, {'flare': [0.1, 0.5, 0.6]}, 10.0)
      (base / name / 'config.json').write_text(json.dumps(dict(config=dict(
          task='mnist_cnn', tau=tau, seed=seed, output_dir=str(base / name)))))
    plot.check_seeds_of_one_experiment([str(base / 'a'), str(base / 'b')])
    with self.assertRaisesRegex(binary.BadInput, r'c is not a seed of the experiment in .*a: '
                                r'they differ in tau'):
      plot.check_seeds_of_one_experiment([str(base / n) for n in 'abc'])


if __name__ == '__main__':
  tf.test.main()
