"""Tests of the demo binary: the same table in every execution mode (its bad input is the
configuration's: `tests/experiment/test_config.py`, `tests/experiments/test_binary.py`)."""

import os
import re
import subprocess
import sys

import tensorflow as tf

from tff_flare.execution import workers as worker


def _run_demo(*flags, timeout_s=600):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, '-m', 'experiments.demo', *flags],
                        capture_output=True,
                        text=True,
                        timeout=timeout_s,
                        env=env,
                        check=False)


class DemoTest(tf.test.TestCase):

  def test_two_rounds_print_the_table_locally_and_on_two_workers(self):
    # In-process rounds of the demo's task equal TFF's: tests/execution/test_inprocess.py.
    result = _run_demo('--rounds=2', '--eval_every=1')
    self.assertEqual(result.returncode, 0, result.stderr[-3000:])
    with worker.LoopbackWorkers(2) as workers:
      remote_result = _run_demo('--rounds=2', '--eval_every=1', '--execution=remote',
                                f'--workers={",".join(workers.addresses)}')
    self.assertEqual(remote_result.returncode, 0, remote_result.stderr[-3000:])
    table = lambda out: out[out.index('algorithm'):]
    self.assertEqual(table(remote_result.stdout), table(result.stdout))
    lines = result.stdout.splitlines()
    self.assertIn('2 rounds, 10 clients, R=0.001%', result.stdout)
    # Round 0's line carries the initial model's accuracy (every algorithm starts from it).
    initial = float(
        re.search(r'^round 0 .*\| fedavg acc (\d\.\d+)', result.stdout, re.MULTILINE).group(1))
    final = {}
    for name in ('FLARE', 'EC', 'FedAvg'):
      row = [line for line in lines if line.startswith(name + ' ')]
      self.assertLen(row, 1, result.stdout)
      final[name] = float(row[0].split()[1])
    self.assertGreater(final['FedAvg'], initial + 0.05)  # Two dense rounds train the MLP.
    flare_row = [line for line in lines if line.startswith('FLARE ')][0]
    # The digits MLP has 4 tensors: at R=0.001 each sends its single largest entry.
    self.assertEqual(float(flare_row.split()[3]), 4.0)


if __name__ == '__main__':
  tf.test.main()
