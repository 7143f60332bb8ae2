"""Tests of the experiment binaries: a killed run resumes, bad input is one line with exit 2."""

import csv
import os
import pathlib
import signal
import subprocess
import sys
import time

import tensorflow as tf

from experiments import presets
from tff_flare.experiment import config as config_lib

_BINARY = [sys.executable, '-m', 'experiments.run_experiment']
# TFF's own algorithms on TFF's runtime beside these: tests/execution/test_inprocess.py.
_FLAGS = ['--task=digits_demo', '--algorithms=flare,ef21_dense,ec_ffl',
          '--clients_per_round=3', '--rounds=4', '--eval_every=2', '--checkpoint_every=1',
          '--execution=inprocess']


def _run(args, binary=_BINARY, timeout_s=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run(binary + args, capture_output=True, text=True, timeout=timeout_s,
                        env=env, check=False)


def _rows(output_dir):
  with open(pathlib.Path(output_dir) / 'metrics.csv', newline='') as f:
    return {int(r['round']): {k: v for k, v in r.items() if 'seconds' not in k}
            for r in csv.DictReader(f)}


class ResumeTest(tf.test.TestCase):

  def test_killed_in_process_run_resumes_with_identical_results(self):
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
    self.assertTrue((pathlib.Path(whole) / 'tensorboard').is_dir())

    changed = _run(_FLAGS + ['--tau=0.5', f'--output_dir={killed}'])
    self.assertEqual(changed.returncode, 2)
    self.assertIn('another configuration (tau: 0.05 then, 0.5 now)', changed.stderr)


class BadInputTest(tf.test.TestCase):

  def _assert_fails_early(self, args, message):
    result = _run(args + [f'--output_dir={self.get_temp_dir()}/out'], timeout_s=120)
    self.assertEqual(result.returncode, 2, result.stderr[-2000:])
    self.assertIn(message, result.stderr)
    self.assertNotIn('Traceback', result.stderr)
    self.assertNotIn('round 0', result.stdout)

  def test_unknown_names_and_bad_values(self):
    self._assert_fails_early(['--preset=cnn_r99'], "Unknown preset 'cnn_r99'")
    self._assert_fails_early(['--task=mnist_resnet'], "Unknown task 'mnist_resnet'")
    self._assert_fails_early(['--algorithms=flare,fedsgd'], "Unknown algorithms ['fedsgd']")
    self._assert_fails_early(['--learning_rate=nan'], 'learning_rate must be a finite number')
    self._assert_fails_early(['--clients_per_round=11'], 'clients_per_round (11) must be in')

  def test_data_errors(self):
    missing = f'{self.get_temp_dir()}/missing.npz'
    self._assert_fails_early(['--task=mnist_cnn', '--source=npz', f'--data_path={missing}'],
                             'missing.npz does not exist')
    self._assert_fails_early(['--task=mnist_cnn', '--source=mnist_mirror'],
                             "Unknown source 'mnist_mirror'")

  def test_masking_binary_rejects_bad_keep_probability(self):
    result = _run(['--keep_probability=1.5', f'--output_dir={self.get_temp_dir()}/masking'],
                  binary=[sys.executable, '-m', 'experiments.run_masking'], timeout_s=120)
    self.assertEqual(result.returncode, 2)
    self.assertIn('keep probability q must be in (0, 1], got 1.5', result.stderr)


class PresetTest(tf.test.TestCase):

  def test_every_preset_is_a_valid_config(self):
    for name in presets.PRESETS:
      config = presets.config_from_preset(name, self.get_temp_dir())
      config_lib.validate(config)
    config = presets.config_from_preset('cnn_unavailable_3', self.get_temp_dir(), rounds=7)
    self.assertEqual((config.rounds, config.clients_per_round, config.keep_percent),
                     (7, 3, 0.001))
    self.assertIn('ef21_dense', config.algorithms)
    with self.assertRaisesRegex(config_lib.ConfigError, 'Unknown preset'):
      presets.config_from_preset('nope', self.get_temp_dir())


if __name__ == '__main__':
  tf.test.main()
