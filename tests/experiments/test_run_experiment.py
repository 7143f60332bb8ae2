"""Tests of the experiment binary: a killed run resumes to the same rows; every preset is valid.

Bad input (each message in-process where it is raised: `tests/experiment/test_config.py`,
`test_runner.py`, a resume with another configuration among them; the binary's exit
statuses: `tests/experiments/test_binary.py`).
"""

import csv
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import tensorflow as tf

from experiments import presets
from tff_flare.experiment import config as config_lib

_BINARY = [sys.executable, '-m', 'experiments.run_experiment']
# TFF's own algorithms on TFF's runtime beside these: tests/execution/test_inprocess.py.
_FLAGS = [
    '--task=digits_demo', '--algorithms=flare,ec_ffl', '--clients_per_round=3', '--rounds=4',
    '--eval_every=2', '--checkpoint_every=10', '--execution=inprocess'
]


def _run(args, binary=_BINARY, timeout_s=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run(binary + args,
                        capture_output=True,
                        text=True,
                        timeout=timeout_s,
                        env=env,
                        check=False)


def _rows(output_dir):
  with open(pathlib.Path(output_dir) / 'metrics.csv', newline='') as f:
    return {
        int(r['round']): {k: v for k, v in r.items() if 'seconds' not in k
                         } for r in csv.DictReader(f)
    }


def _started_past_round_0(args) -> subprocess.Popen:
  """The binary started with `args`, its output read up to its line of round 0."""
  child = subprocess.Popen(_BINARY + args,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'),
                           stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE,
                           text=True)
  assert child.stdout is not None
  for line in child.stdout:
    if line.startswith('round 0 '):
      break
  return child


class ResumeTest(tf.test.TestCase):

  def test_interrupted_run_loses_no_round_and_resumes_with_identical_results(self):
    base = self.get_temp_dir()
    whole = os.path.join(base, 'whole')
    result = _run(_FLAGS + [f'--output_dir={whole}'])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])

    killed = os.path.join(base, 'killed')
    child = _started_past_round_0(_FLAGS + [f'--output_dir={killed}'])
    # Ctrl-C after round 0, before a checkpoint is due (every 10 rounds): the run ends the
    # round it is in and checkpoints it.
    child.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, stderr = child.communicate(timeout=120)
    self.assertLess(time.monotonic() - start, 60)  # Exits promptly.
    self.assertEqual(child.returncode, 130, stderr[-2000:])
    self.assertIn('stopping after this round', stderr)
    stopped = re.search(
        r'Interrupted at round (\d); called again, the run resumes from its '
        r'checkpoint after round (\d)\.', stderr)
    self.assertIsNotNone(stopped, stderr[-2000:])
    self.assertEqual(int(stopped[1]), int(stopped[2]) + 1)
    self.assertIn(int(stopped[1]), (1, 2, 3))  # Not the last round: that one finishes.

    resumed = _run(_FLAGS + [f'--output_dir={killed}'])
    self.assertEqual(resumed.returncode, 0, resumed.stderr[-3000:])
    self.assertIn(f'Resuming from the checkpoint after round {stopped[2]}', resumed.stdout)
    self.assertNotIn(f'round {stopped[2]} ', resumed.stdout)
    self.assertEqual(_rows(killed), _rows(whole))
    self.assertTrue((pathlib.Path(whole) / 'tensorboard').is_dir())

  def test_a_second_ctrl_c_stops_at_once(self):
    killed = os.path.join(self.get_temp_dir(), 'twice')
    child = _started_past_round_0([f for f in _FLAGS if not f.startswith('--rounds=')] +
                                  ['--rounds=50', f'--output_dir={killed}'])
    child.send_signal(signal.SIGINT)
    for line in child.stderr:  # The first is noted (two at once can arrive as one).
      if 'stopping after this round' in line:
        break
    child.send_signal(signal.SIGINT)
    self.assertEqual(child.wait(timeout=120), 130)
    stderr = child.stderr.read()  # The rest, past the lines read.
    child.stdout.close()
    child.stderr.close()
    self.assertIn('resume from the last checkpoint', stderr)


class MemoryTest(tf.test.TestCase):

  def test_a_run_that_would_not_fit_stops_before_it_starts(self):
    output = os.path.join(self.get_temp_dir(), 'small')
    result = _run(_FLAGS + [f'--output_dir={output}', '--memory_budget_gib=0.2'])
    self.assertEqual(result.returncode, 2, result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    self.assertLen(lines, 1, result.stderr)
    self.assertRegex(
        lines[0], r'^error: This run needs about [\d.]+ GiB .* more than the '
        r'0\.2 GiB it may use; it would not finish\. What fits: ')
    self.assertFalse(os.path.exists(os.path.join(output, 'config.json')))

  def test_a_knob_no_algorithm_of_the_run_takes_is_refused(self):
    output = os.path.join(self.get_temp_dir(), 'unused_knob')
    result = _run([
        '--output_dir=' + output, '--algorithms=ec_ffl,fedavg', '--topk_rule=global', '--rounds=1'
    ])
    self.assertEqual(result.returncode, 2, result.stderr[-3000:])
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    self.assertEqual(lines, [
        'error: --topk_rule given, but no algorithm of this run (ec_ffl, '
        'fedavg) takes it: topk_rule is a knob of flare, ec, ec_fedprox, '
        'ef21, ef21_dense.'
    ])
    self.assertFalse(os.path.exists(os.path.join(output, 'config.json')))
    # A name that is no algorithm is named as such, not as a run that does not take the knob.
    result = _run([
        '--output_dir=' + output, '--algorithms=masked_fedavg', '--keep_probability=0.5',
        '--rounds=1'
    ])
    self.assertEqual(result.returncode, 2, result.stderr[-3000:])
    self.assertRegex(result.stderr.strip(),
                     r"^error: Unknown algorithms \['masked_fedavg'\]; known: ")

  def test_the_run_records_its_estimated_and_measured_peak(self):
    output = os.path.join(self.get_temp_dir(), 'recorded')
    result = _run(_FLAGS + [f'--output_dir={output}', '--rounds=2'])
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    self.assertRegex(result.stdout, r'Memory: estimated peak [\d.]+ GiB .* of [\d.]+ GiB')
    self.assertRegex(result.stdout, r'round 1 \| .* \| peak [\d.]+ GiB')
    recorded = json.loads((pathlib.Path(output) / 'summary.json').read_text())['memory']
    # TensorFlow alone holds more than 0.2 GiB; a digits run stays far under 4.
    self.assertBetween(recorded['peak_gib'], 0.2, 4.0)
    self.assertBetween(recorded['estimated_peak_gib'], 0.2, 4.0)


class PresetTest(tf.test.TestCase):

  def test_every_preset_is_a_valid_config(self):
    for name in presets.PRESETS:
      config = presets.config_from_preset(name, self.get_temp_dir())
      config_lib.validate(config)
    config = presets.config_from_preset('cnn_unavailable_3', self.get_temp_dir(), rounds=7)
    self.assertEqual((config.rounds, config.clients_per_round, config.keep_percent), (7, 3, 0.001))
    self.assertIn('ef21_dense', config.algorithms)
    with self.assertRaisesRegex(config_lib.ConfigError, 'Unknown preset'):
      presets.config_from_preset('nope', self.get_temp_dir())


if __name__ == '__main__':
  tf.test.main()
