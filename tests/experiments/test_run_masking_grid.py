"""Tests of the masking grid runner's cells and table (on a tiny run of the digits task)."""

import csv
import pathlib
import statistics

from absl import flags
from absl.testing import flagsaver
import tensorflow as tf

from experiments import run_masking_grid
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner


class MaskingGridTest(tf.test.TestCase):

  @classmethod
  def setUpClass(cls):
    super().setUpClass()
    flags.FLAGS(['test', '--output_dir=unused'])

  def test_partition_names(self):
    self.assertEqual(run_masking_grid.partition_options('dir0.5'),
                     dict(partition='dirichlet', alpha=0.5))
    self.assertEqual(run_masking_grid.partition_options('qskew100'),
                     dict(partition='quantity_skew', ratio=100.0))
    with self.assertRaisesRegex(ValueError, 'Unknown partition'):
      run_masking_grid.partition_options('pathological')

  def test_cells_follow_the_spec(self):
    base = pathlib.Path(self.get_temp_dir())
    full = run_masking_grid.cell_config('fullbatch', 'dir0.1', base)
    self.assertEqual((full.task, full.total_clients, full.clients_per_round, full.batch_size,
                      full.partition, full.alpha),
                     ('cifar10_masking_cnn', 100, 10, 0, 'dirichlet', 0.1))
    self.assertEqual(tuple(full.algorithms),
                     ('mask_none', 'mask_independent', 'mask_synchronized'))
    mini = run_masking_grid.cell_config('minibatch', 'iid', base)
    self.assertEqual((mini.batch_size, mini.partition), (32, 'iid'))
    self.assertEqual(pathlib.Path(mini.output_dir).name, 'minibatch_iid')

  def test_processes_flag_chooses_what_a_cell_trains(self):
    with flagsaver.flagsaver(processes=['mask_none']):
      config = run_masking_grid.cell_config('minibatch', 'iid', pathlib.Path(self.get_temp_dir()))
    self.assertEqual(tuple(config.algorithms), ('mask_none',))
    for bad in (['flare'], ['mask_none', 'fedavg']):
      with flagsaver.flagsaver(processes=bad):
        with self.assertRaisesRegex(ValueError, 'choose from mask_none'):
          run_masking_grid.cell_config('minibatch', 'iid', pathlib.Path(self.get_temp_dir()))

  def test_table_from_a_finished_cell(self):
    base = pathlib.Path(self.get_temp_dir())
    config = config_lib.ExperimentConfig(
        output_dir=str(base / 'minibatch_iid'), task='digits_demo',
        algorithms=('mask_none', 'mask_independent', 'mask_synchronized'), rounds=4,
        eval_every=2, clients_per_round=5, keep_probability=0.7, num_mask_draws=2,
        execution='inprocess')
    summary = runner.run_experiment(config, log=lambda _: None)
    table = run_masking_grid.write_table(base)
    self.assertLen(table, 3)
    with open(base / 'minibatch_iid' / 'metrics.csv') as f:
      rows = list(csv.DictReader(f))
    survival = [float(r['mask_synchronized/train/survival/survival']) for r in rows
                if r['mask_synchronized/train/survival/survival']]
    self.assertLen(survival, 4)
    normalized = [float(r['mask_synchronized/train/survival/survival_normalized']) for r in rows
                  if r['mask_synchronized/train/survival/survival_normalized']]
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
