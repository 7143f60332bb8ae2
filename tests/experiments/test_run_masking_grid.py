"""Tests of the masking grid runner's cells and table (on a tiny run of the digits task)."""

import csv
import pathlib
import shutil
import statistics

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from experiments import charts
from experiments import run_masking_grid
from experiments import schedule
from experiments import spec
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner


class MaskingGridTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    flags.FLAGS(['test', '--output_dir=unused'])

  def test_partition_names(self):
    self.assertEqual(spec.partition_option('dir0.5').flags, dict(partition='dirichlet', alpha=0.5))
    self.assertEqual(
        spec.partition_option('qskew100').flags, dict(partition='quantity_skew', ratio=100.0))
    with self.assertRaisesRegex(ValueError, 'Unknown partition'):
      spec.partition_option('pathological')

  def test_cells_follow_the_spec(self):
    full = run_masking_grid.cell_run('fullbatch', 'dir0.1')
    self.assertEqual(full.binary, 'experiments.run_masking')  # The study's defaults.
    self.assertEqual(
        (full.name, full.flags['batch_size'], full.flags['partition'], full.flags['alpha'],
         full.flags['algorithms']),
        ('fullbatch_dir0.1', 0, 'dirichlet', 0.1, 'mask_none,mask_independent,mask_synchronized'))
    mini = run_masking_grid.cell_run('minibatch', 'iid')
    self.assertEqual((mini.flags['batch_size'], mini.flags['partition']), (32, 'iid'))

  def test_processes_flag_chooses_what_a_cell_trains(self):
    with flagsaver.flagsaver(processes=['mask_none']):
      self.assertEqual(
          run_masking_grid.cell_run('minibatch', 'iid').flags['algorithms'], 'mask_none')
    for bad in (['flare'], ['mask_none', 'fedavg']):
      with flagsaver.flagsaver(processes=bad):
        with self.assertRaisesRegex(ValueError, 'choose from mask_none'):
          run_masking_grid.cell_run('minibatch', 'iid')

  def test_partition_values_are_checked_with_the_cells_before_any_run(self):
    # Was: dir-1 parsed, and each cell's subprocess refused it after the grid had started.
    for partition, message in (('dir-1', 'alpha must be > 0'), ('dir0', 'alpha must be > 0'),
                               ('qskew0.5', r'ratio \(largest / smallest client\) must be >= 1'),
                               ('dirinf', 'alpha must be a finite number'),
                               ('dirnan', 'alpha must be a finite number'),
                               ('dirx', "'x' after 'dir' is not a number")):
      with self.assertRaisesRegex(ValueError, message):
        run_masking_grid.cell_run('minibatch', partition)

  def test_rounds_below_one_are_refused(self):
    # Without the check every cell counted as finished ("No finished cell among none").
    for rounds in (0, -3):
      with flagsaver.flagsaver(rounds=rounds):
        with self.assertRaisesRegex(ValueError, f'rounds must be an int >= 1, got {rounds}'):
          run_masking_grid.cell_run('minibatch', 'iid')

  def test_a_finished_cell_with_other_flags_is_refused_not_skipped(self):
    # Issue 19: a changed --keep_probability used to print "done, skipped" and the old table.
    root = pathlib.Path(self.get_temp_dir())
    figure = spec.Figure(name='grid', title='grid', paper='Masking')
    with flagsaver.flagsaver(keep_probability=0.5, local_training=['minibatch'],
                             partitions=['iid']):
      (run,) = run_masking_grid.grid_runs()
    schedule._record_flags(run, root / 'grid' / run.name)  # pylint: disable=protected-access
    (root / 'grid' / run.name / 'summary.json').write_text('{"rounds": 10}')
    lines = []
    self.assertEqual(schedule.execute([(figure, run)], root, '', log=lines.append, pin=False), 0)
    self.assertIn('finished (10 rounds), skipped', lines[-1])
    with flagsaver.flagsaver(keep_probability=0.9, local_training=['minibatch'],
                             partitions=['iid']):
      (changed,) = run_masking_grid.grid_runs()
    with self.assertRaisesRegex(schedule.ReproduceError, r'holds a run made with other flags '
                                r'\(keep_probability\)'):
      schedule.execute([(figure, changed)], root, '', pin=False)

  def test_table_from_a_finished_cell(self):
    base = pathlib.Path(self.get_temp_dir())
    config = config_lib.ExperimentConfig(output_dir=str(base / 'minibatch_iid'),
                                         task='digits_demo',
                                         algorithms=('mask_none', 'mask_independent',
                                                     'mask_synchronized'),
                                         rounds=4,
                                         eval_every=2,
                                         clients_per_round=5,
                                         keep_probability=0.7,
                                         num_mask_draws=2,
                                         execution='inprocess')
    summary = runner.run_experiment(config, log=lambda _: None)
    markdown = charts.masking_table([base / 'minibatch_iid'], base)
    self.assertEqual(markdown.count('| minibatch_iid |'), 3)
    # A cell named otherwise than <local training>_<partition> (the batch sweep's `batch32`).
    shutil.copytree(base / 'minibatch_iid', base / 'sweep' / 'batch32')
    sweep = charts.masking_table([base / 'sweep' / 'batch32'], base / 'sweep')
    self.assertEqual(sweep.count('| batch32 |'), 3)
    self.assertTrue((base / 'sweep' / 'survival_vs_accuracy.png').exists())
    with open(base / 'grid.csv') as f:
      table = list(csv.DictReader(f))
    for row in table:
      for key in ('mean_s', 'second_half_s', 'second_half_s_normalized', 's_max', 'final_accuracy'):
        row[key] = float(row[key])
    with open(base / 'minibatch_iid' / 'metrics.csv') as f:
      rows = list(csv.DictReader(f))
    prefix = 'mask_synchronized/train/aggregator/survival/'
    survival = [float(r[prefix + 'survival']) for r in rows if r[prefix + 'survival']]
    self.assertLen(survival, 4)
    normalized = [
        float(r[prefix + 'survival_normalized']) for r in rows if r[prefix + 'survival_normalized']
    ]
    sync_row = [r for r in table if r['process'] == 'mask_synchronized'][0]
    self.assertAlmostEqual(sync_row['mean_s'], statistics.mean(survival))
    self.assertAlmostEqual(sync_row['second_half_s'], statistics.mean(survival[2:]))
    self.assertAlmostEqual(sync_row['second_half_s_normalized'], statistics.mean(normalized[2:]))
    self.assertNotAlmostEqual(sync_row['second_half_s'], sync_row['mean_s'])
    self.assertAlmostEqual(sync_row['s_max'], 5.0)
    self.assertEqual(sync_row['final_accuracy'],
                     summary['final_eval']['mask_synchronized']['accuracy'])
    self.assertTrue((base / 'grid.md').exists())
    self.assertGreater((base / 'survival_vs_accuracy.png').stat().st_size, 1000)
    self.assertGreater((base / 'survival_curves.png').stat().st_size, 1000)


if __name__ == '__main__':
  tf.test.main()
