"""Tests of `tff_flare.experiment` and its binary: outputs, resume after a kill, bad input."""

import csv
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import tensorflow as tf

from tff_flare import experiment
from tff_flare import presets

_BINARY = [sys.executable, '-m', 'experiments.run_experiment']
_FLAGS = ['--task=digits_demo', '--algorithms=flare,ef21,tff_fedavg', '--clients_per_round=3',
          '--rounds=5', '--eval_every=2', '--checkpoint_every=1']


def _run(args, timeout_s=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run(_BINARY + args, capture_output=True, text=True, timeout=timeout_s,
                        env=env, check=False)


def _rows(output_dir):
  with open(pathlib.Path(output_dir) / 'metrics.csv', newline='') as f:
    return {int(r['round']): {k: v for k, v in r.items() if 'seconds' not in k}
            for r in csv.DictReader(f)}


class ResumeTest(tf.test.TestCase):

  def test_killed_run_resumes_with_identical_results(self):
    base = self.get_temp_dir()
    whole = os.path.join(base, 'whole')
    result = _run(_FLAGS + [f'--output_dir={whole}'])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])

    killed = os.path.join(base, 'killed')
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
    child = subprocess.Popen(_BINARY + _FLAGS + [f'--output_dir={killed}'], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in child.stdout:
      if line.startswith('round 2 '):
        break
    child.send_signal(signal.SIGINT)  # Ctrl-C after round 2 was checkpointed.
    start = time.monotonic()
    _, stderr = child.communicate(timeout=120)
    self.assertLess(time.monotonic() - start, 60)  # Exits promptly.
    self.assertEqual(child.returncode, 130, stderr[-2000:])
    self.assertIn('resume', stderr)

    resumed = _run(_FLAGS + [f'--output_dir={killed}'])
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn('Resuming from the checkpoint after round', resumed.stdout)
    self.assertNotIn('round 0 ', resumed.stdout)
    self.assertEqual(_rows(killed), _rows(whole))
    whole_summary = json.loads((pathlib.Path(whole) / 'summary.json').read_text())
    killed_summary = json.loads((pathlib.Path(killed) / 'summary.json').read_text())
    self.assertEqual(killed_summary['final_eval'], whole_summary['final_eval'])
    self.assertEqual(set(whole_summary['final_eval']), {'flare', 'ef21', 'tff_fedavg'})
    self.assertTrue((pathlib.Path(whole) / 'tensorboard').is_dir())

  def test_corrupt_checkpoint_is_a_clear_error(self):
    output = pathlib.Path(self.get_temp_dir()) / 'corrupt'
    bad = output / 'checkpoints' / 'program_state_3'
    bad.mkdir(parents=True)
    (bad / 'saved_model.pb').write_bytes(b'garbage')
    config = experiment.ExperimentConfig(output_dir=str(output), algorithms=('ec',), rounds=4)
    with self.assertRaisesRegex(experiment.ExperimentError,
                                r'Checkpoint 3 under .*cannot be restored'):
      experiment.run_experiment(config, log=lambda _: None)


class BadInputTest(tf.test.TestCase):

  def _assert_fails_early(self, args, message):
    result = _run(args + [f'--output_dir={self.get_temp_dir()}/out'], timeout_s=120)
    self.assertNotEqual(result.returncode, 0)
    self.assertIn(message, result.stderr)
    self.assertNotIn('round 0', result.stdout)

  def test_unknown_names(self):
    self._assert_fails_early(['--preset=cnn_r99'], "--preset")
    self._assert_fails_early(['--task=mnist_resnet'], "--task")
    self._assert_fails_early(['--algorithms=flare,fedsgd'], "Unknown algorithms ['fedsgd']")

  def test_contradictory_and_out_of_range(self):
    self._assert_fails_early(['--clients_per_round=11'], 'clients_per_round (11) must be in')
    self._assert_fails_early(['--keep_percent=0'], 'keep_percent must be in (0, 100]')
    self._assert_fails_early(['--tau_decay=0'], 'tau_decay')

  def test_masking_binary_rejects_bad_keep_probability(self):
    result = subprocess.run(
        [sys.executable, '-m', 'experiments.run_masking', '--keep_probability=1.5',
         f'--output_dir={self.get_temp_dir()}/masking'], capture_output=True, text=True,
        timeout=120, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'), check=False)
    self.assertEqual(result.returncode, 2)
    self.assertIn('keep probability q must be in (0, 1], got 1.5', result.stderr)

  def test_unwritable_output_dir(self):
    blocker = pathlib.Path(self.get_temp_dir()) / 'a_file'
    blocker.write_text('x')
    result = _run(['--rounds=1', f'--output_dir={blocker}/sub'], timeout_s=120)
    self.assertNotEqual(result.returncode, 0)
    self.assertIn('is not writable', result.stderr)


class MaskingExperimentTest(tf.test.TestCase):

  def test_mask_processes_side_by_side_with_fedavg(self):
    output = pathlib.Path(self.get_temp_dir()) / 'minibatch_iid'
    config = experiment.ExperimentConfig(
        output_dir=str(output), task='digits_demo',
        algorithms=('fedavg', 'mask_none', 'mask_independent', 'mask_synchronized'),
        rounds=2, eval_every=1, clients_per_round=4, keep_probability=0.5, num_mask_draws=2)
    summary = experiment.run_experiment(config, log=lambda _: None)
    final = summary['final_eval']
    # No mask is FedAvg exactly; masks change the model.
    self.assertEqual(final['mask_none'], final['fedavg'])
    self.assertNotEqual(final['mask_independent'], final['fedavg'])
    self.assertNotEqual(final['mask_synchronized'], final['mask_independent'])
    row = _rows(output)[1]
    for name in ('mask_none', 'mask_independent', 'mask_synchronized'):
      self.assertEqual(float(row[f'{name}/train/survival/s_max']), 4.0)  # Uniform, K = 4.
      self.assertGreater(float(row[f'{name}/train/survival/survival_empirical']), 0.0)
    self.assertNotIn('fedavg/train/survival/survival', row)


class PresetTest(tf.test.TestCase):

  def test_every_preset_is_a_valid_config(self):
    for name in presets.PRESETS:
      config = experiment.config_from_preset(name, self.get_temp_dir())
      experiment.validate(config)
    config = experiment.config_from_preset('cnn_unavailable_3', self.get_temp_dir(), rounds=7)
    self.assertEqual((config.rounds, config.clients_per_round, config.keep_percent),
                     (7, 3, 0.001))
    with self.assertRaisesRegex(experiment.ExperimentError, 'Unknown preset'):
      experiment.config_from_preset('nope', self.get_temp_dir())


if __name__ == '__main__':
  tf.test.main()
