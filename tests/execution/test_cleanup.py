"""Tests of `tff_flare.execution.cleanup`: no TFF worker outlives a binary that used TFF."""

import os
import select
import signal
import subprocess
import sys
import time

from absl.testing import parameterized
import tensorflow as tf

from tff_flare.execution import cleanup

# A binary: opts in to the cleanup and runs computations on the local execution mode.
_CHILD = r'''
import sys, time
import tensorflow_federated as tff
from tff_flare.execution import cleanup
from tff_flare.execution import modes

cleanup.install_process_cleanup()

@tff.tensorflow.computation
def one():
  return 1

with modes.build_execution('local'):
  assert one() == 1
  print('WORKERS', ' '.join(map(str, cleanup.local_worker_pids())), flush=True)
  if sys.argv[1] == 'wait':
    time.sleep(120)
'''

# Runs TFF computations back to back, so that Ctrl-C lands inside one.
_BUSY_CHILD = r'''
import tensorflow as tf
import tensorflow_federated as tff
from tff_flare.execution import cleanup
from tff_flare.execution import modes

cleanup.install_process_cleanup()

@tff.tensorflow.computation
def busy():
  x = tf.random.stateless_normal([400, 400], seed=[1, 2])
  for _ in range(50):
    x = tf.matmul(x, x) / 400.0
  return tf.reduce_sum(x)

with modes.build_execution('local'):
  for i in range(10000):
    busy()
    print('round', i, flush=True)
'''

# A plain script: builds a process with the package's builder, runs it on TFF's default context.
_SCRIPT = r'''
import tensorflow_federated as tff
import tff_flare
from tests import tiny_models
from tff_flare.execution import cleanup

process = tff_flare.build_fedavg(tiny_models.softmax_model_fn(),
                                 client_optimizer=tff.learning.optimizers.build_sgdm(0.1))
state = process.initialize()
print('WORKERS', ' '.join(map(str, cleanup.local_worker_pids())), flush=True)
'''

# A plain script that runs an experiment on TFF's local runtime through the runner, whose
# processes come from the modules' own builders (not the package's).
_RUNNER_SCRIPT = r'''
import tempfile
from tff_flare.execution import cleanup
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner

config = config_lib.ExperimentConfig(output_dir=tempfile.mkdtemp(), task='digits_demo',
                                     algorithms=('ec',), rounds=1, num_clients=4,
                                     clients_per_round=2, execution='local')
runner.run_experiment(config, log=lambda _: None)
print('WORKERS', ' '.join(map(str, cleanup.local_worker_pids())), flush=True)
'''


def _alive_worker(pid: int) -> bool:
  try:
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
      return cleanup.WORKER_BINARY_NAME.encode() in f.read()
  except OSError:
    return False


class NoWorkerLeftBehindTest(tf.test.TestCase, parameterized.TestCase):

  def test_ctrl_c_during_a_computation_exits_promptly(self):
    env = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL='3')
    child = subprocess.Popen([sys.executable, '-c', _BUSY_CHILD],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE,
                             env=env)
    try:
      fd = child.stdout.fileno()
      output = b''
      while output.count(b'round') < 3:
        chunk = self._read(fd, timeout_s=120)
        self.assertTrue(chunk, 'child exited early')
        output += chunk
      child.send_signal(signal.SIGINT)
      self.assertEqual(child.wait(timeout=30), 130)
      self.assertIn(b'Interrupted', child.stderr.read())
      self.assertEqual(self._read(fd, timeout_s=15), b'')
    finally:
      if child.poll() is None:
        child.kill()
        child.wait()

  @parameterized.named_parameters(('package_builder', _SCRIPT), ('runner', _RUNNER_SCRIPT))
  def test_a_plain_script_leaves_no_worker(self, script):
    # No opt-in: the package's builders and the runner register the stop at exit.
    env = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL='3')
    child = subprocess.Popen([sys.executable, '-c', script],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL,
                             env=env)
    try:
      fd = child.stdout.fileno()
      pids = self._reported_workers(fd)
      self.assertNotEmpty(pids)  # TFF's default context started a worker_binary.
      self.assertEqual(child.wait(timeout=60), 0)
      self.assertEqual(self._read(fd, timeout_s=15), b'')
      for pid in pids:
        self.assertFalse(_alive_worker(pid), f'worker {pid} outlived the script')
    finally:
      if child.poll() is None:
        child.kill()
        child.wait()

  def _reported_workers(self, fd: int) -> list[int]:
    """The pids of the child's `WORKERS ...` line."""
    output = b''
    while b'WORKERS' not in output or not output.endswith(b'\n'):
      chunk = self._read(fd, timeout_s=180)
      self.assertTrue(chunk, f'child exited before reporting its workers: {output!r}')
      output += chunk
    return [int(p) for p in output[output.index(b'WORKERS'):].decode().split()[1:]]

  def _read(self, fd: int, timeout_s: float) -> bytes:
    ready, _, _ = select.select([fd], [], [], timeout_s)
    if not ready:
      self.fail(f'no output and no end of file in {timeout_s} s: an orphaned worker holds '
                'the pipe open')
    return os.read(fd, 65536)

  @parameterized.named_parameters(
      ('normal_exit', 'exit', None), ('sigterm', 'wait', signal.SIGTERM),
      ('ctrl_c', 'wait', signal.SIGINT), ('sigkill', 'wait', signal.SIGKILL))
  def test_worker_stopped(self, mode, signum):
    env = dict(os.environ, PYTHONPATH=os.getcwd(), TF_CPP_MIN_LOG_LEVEL='3')
    child = subprocess.Popen([sys.executable, '-c', _CHILD, mode],
                             stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL,
                             env=env)
    fd = child.stdout.fileno()
    try:
      pids = self._reported_workers(fd)
      self.assertNotEmpty(pids)  # The local execution mode started a worker_binary.
      if signum is not None:
        child.send_signal(signum)
      start = time.monotonic()
      self.assertNotEqual(child.wait(timeout=60), None)
      self.assertLess(time.monotonic() - start, 30)
      # The child's stdout closes only when no process holds it: no orphaned worker
      # (after SIGKILL the kernel ends the worker: it was started with a parent-death signal).
      self.assertEqual(self._read(fd, timeout_s=15), b'')
      for pid in pids:
        self.assertFalse(_alive_worker(pid), f'worker {pid} outlived its parent')
    finally:
      if child.poll() is None:
        child.kill()
        child.wait()


if __name__ == '__main__':
  tf.test.main()
