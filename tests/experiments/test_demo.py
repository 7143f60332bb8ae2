"""Tests of the demo binary: the same table in every execution mode; bad flags fail early."""

import os
import subprocess
import sys

import tensorflow as tf

from tff_flare.execution import workers as worker


def _run_demo(*flags, timeout_s=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, '-m', 'experiments.demo', *flags], capture_output=True,
                        text=True, timeout=timeout_s, env=env, check=False)


class DemoTest(tf.test.TestCase):

  def test_two_rounds_print_the_table_locally_in_process_and_on_two_workers(self):
    result = _run_demo('--rounds=2', '--eval_every=1')
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    inprocess_result = _run_demo('--rounds=2', '--eval_every=1', '--execution=inprocess')
    self.assertEqual(inprocess_result.returncode, 0, inprocess_result.stderr[-3000:])
    with worker.LoopbackWorkers(2) as workers:
      remote_result = _run_demo('--rounds=2', '--eval_every=1', '--execution=remote',
                                f'--workers={",".join(workers.addresses)}')
    self.assertEqual(remote_result.returncode, 0, remote_result.stderr[-3000:])
    table = lambda out: out[out.index('algorithm'):]
    self.assertEqual(table(remote_result.stdout), table(result.stdout))
    self.assertEqual(table(inprocess_result.stdout), table(result.stdout))
    lines = result.stdout.splitlines()
    self.assertIn('2 rounds, 10 clients, R=0.001%', result.stdout)
    for name in ('FLARE', 'EC', 'FedAvg'):
      row = [line for line in lines if line.startswith(name + ' ')]
      self.assertLen(row, 1, result.stdout)
      accuracy = float(row[0].split()[1])
      self.assertBetween(accuracy, 0.0, 1.0)
    flare_row = [line for line in lines if line.startswith('FLARE ')][0]
    # The digits MLP has 4 tensors: at R=0.001 each sends its single largest entry.
    self.assertEqual(float(flare_row.split()[3]), 4.0)

  def test_bad_keep_percent_fails_before_training(self):
    result = _run_demo('--keep_percent=0')
    self.assertEqual(result.returncode, 2)
    self.assertIn('keep_percent must be in (0, 100]', result.stderr)
    self.assertNotIn('round', result.stdout)

  def test_workers_without_remote_execution_fail_before_training(self):
    result = _run_demo('--workers=localhost:8000')
    self.assertEqual(result.returncode, 2)
    self.assertIn('add --execution=remote', result.stderr)


if __name__ == '__main__':
  tf.test.main()
