"""Tests of `tff_flare.execution.modes`: the local mode ends, not hangs, when its worker dies."""

import os
import signal
import time

import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import registry
from tff_flare.execution import cleanup
from tff_flare.execution import modes
from tff_flare.execution import remote


class LocalWorkerDeathTest(tf.test.TestCase):

  def test_a_killed_local_worker_ends_the_round_at_once(self):
    process = registry.build('fedavg', tiny_models.softmax_model_fn(), registry.Hyperparameters(
        client_optimizer=tff.learning.optimizers.build_sgdm(0.1)))
    datasets = [tiny_models.classification_dataset(s) for s in range(2)]
    # A long timeout: the death, not the timeout, must end the round.
    with modes.build_execution('local', timeout_s=600) as execution:
      bound = execution.bind(process)
      inputs = process.client_inputs(tiny_models.client_ids(2))
      clients = [bound.initial_client_state()] * 2
      state = bound.next(bound.initialize(), datasets, clients, inputs).state
      (pid,) = cleanup.local_worker_pids()
      os.kill(pid, signal.SIGKILL)  # As `kill -9` of the worker_binary child.
      start = time.monotonic()
      with self.assertRaisesRegex(remote.WorkerUnavailableError,
                                  "TFF's local worker killed by signal 9 during a round"):
        bound.next(state, datasets, clients, inputs)
      self.assertLess(time.monotonic() - start, 60)


if __name__ == '__main__':
  tf.test.main()
