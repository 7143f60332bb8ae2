"""Tests of `tff_flare.execution.modes`: a round in two phases; a dead local worker ends it."""

import dataclasses
import os
import signal
import time
import types
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import process as process_lib
from tff_flare.algorithms import registry
from tff_flare.execution import cleanup
from tff_flare.execution import modes
from tff_flare.execution import remote
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner


class PhasesTest(tf.test.TestCase):

  def test_next_in_phases_equals_next(self):
    datasets = [tiny_models.classification_dataset(seed, batch_size=4) for seed in range(3)]
    hparams = tiny_models.tiny_hparams()
    # EC with a TFF aggregation factory: its aggregation runs in the server phase.
    ec_clipped = registry.build(
        'ec', tiny_models.SOFTMAX_MODEL_FN,
        registry.Hyperparameters(hparams.context.client_optimizer,
                                 total_clients=hparams.context.total_clients,
                                 **dataclasses.asdict(hparams.knobs),
                                 model_aggregator=tff.aggregators.clipping_factory(
                                     0.01, tff.aggregators.MeanFactory())))
    for name, process in [(n, tiny_models.tiny_process(n)) for n in ('flare', 'ec', 'ef21')
                         ] + [('ec_clipped', ec_clipped)]:
      state = process.initialize()
      states = [process.initial_client_state()] * 3
      inputs = process.client_inputs(tiny_models.client_ids(3))
      phased_state, phased_states = state, states
      for _ in range(2):
        whole = process.next(state, datasets, states, inputs)
        phased = modes.next_in_phases(process, phased_state, datasets, phased_states, inputs)
        self.assertAllEqual(whole.metrics, phased.metrics, msg=name)
        state, states = whole.state, whole.client_states
        phased_state, phased_states = phased.state, phased.client_states
        for a, b in zip(tf.nest.flatten((state, states)),
                        tf.nest.flatten((phased_state, phased_states))):
          self.assertAllEqual(a, b, msg=name)
      # The clients differ, so a permutation of their states would show.
      self.assertNotAllClose(tf.nest.flatten(states[0]), tf.nest.flatten(states[1]))

  def test_stateless_processes_pass_their_states_through_and_have_no_phases(self):
    for name in ('fedavg', 'mask_none', 'tff_fedavg'):
      process = tiny_models.tiny_process(name)
      self.assertIsNone(process.phases, name)
      output = tiny_models.next_round(process, process.initialize(),
                                      [tiny_models.classification_dataset(0)])
      self.assertEqual(list(output.client_states), [()], name)

  def test_next_in_phases_restores_client_order(self):
    # TFF's mergeable context can return the client outputs of a later subround first.
    process = tiny_models.tiny_process('flare')
    datasets = [tiny_models.classification_dataset(seed) for seed in range(3)]
    state = process.initialize()
    states = [process.initial_client_state()] * 3
    inputs = process.client_inputs(tiny_models.client_ids(3))
    whole = process.next(state, datasets, states, inputs)
    real = process.phases

    def client_phase_later_subround_first(*args):
      outputs = real.client_phase(*args)
      return outputs[2:] + outputs[:2]

    shuffled = types.SimpleNamespace(phases=process_lib.RoundPhases(
        client_phase=client_phase_later_subround_first, server_phase=real.server_phase))
    phased = modes.next_in_phases(shuffled, state, datasets, states, inputs)
    for a, b in zip(tf.nest.flatten((whole.state, whole.client_states)),
                    tf.nest.flatten((phased.state, phased.client_states))):
      self.assertAllEqual(a, b)

    def client_phase_losing_a_client(*args):
      return real.client_phase(*args)[1:]

    lossy = types.SimpleNamespace(phases=process_lib.RoundPhases(
        client_phase=client_phase_losing_a_client, server_phase=real.server_phase))
    with self.assertRaisesRegex(RuntimeError, r'outputs of clients \[1, 2\], expected each of '
                                r'0..2 once'):
      modes.next_in_phases(lossy, state, datasets, states, inputs)


class LocalWorkerDeathTest(tf.test.TestCase):

  def _next_after_signal(self, signum: int, timeout_s: float, message: str) -> None:
    """A round of a local run whose worker got `signum` after round 0 fails with `message`
    within a minute."""
    process = registry.build(
        'fedavg', tiny_models.softmax_model_fn(),
        registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(0.1)))
    datasets = [tiny_models.classification_dataset(s) for s in range(2)]
    with modes.build_execution('local', timeout_s=timeout_s) as execution:
      bound = execution.bind(process)
      inputs = process.client_inputs(tiny_models.client_ids(2))
      clients = [bound.initial_client_state()] * 2
      state = bound.next(bound.initialize(), datasets, clients, inputs).state
      assert isinstance(execution, modes.LocalExecution)
      pid = execution.workers.pid(0)
      self.assertIn(pid, cleanup.local_worker_pids())  # A worker_binary child of this process.
      os.kill(pid, signum)
      start = time.monotonic()
      with self.assertRaisesRegex(remote.WorkerUnavailableError, message):
        bound.next(state, datasets, clients, inputs)
      self.assertLess(time.monotonic() - start, 60)

  def test_a_killed_local_worker_ends_the_round_at_once(self):
    # A long timeout: the death, not the timeout, must end the round.
    self._next_after_signal(signal.SIGKILL, 600,
                            "TFF's local worker killed by signal 9 during a round")

  def test_a_stopped_local_worker_ends_the_round_after_the_timeout(self):
    # SIGSTOP (a paused machine, a debugger): the worker fails nothing and answers nothing;
    # without the probe the round waits forever.
    self._next_after_signal(signal.SIGSTOP, 3, 'answered nothing for more than 3 s during a call')


class SubroundsTest(tf.test.TestCase):

  def _final_weights(self, execution: str, tff_subrounds: int, names) -> dict:
    rng = np.random.default_rng(5)
    data = {
        f'c{i}': tiny_models.dataset_from_arrays(
            rng.normal(size=(8, 4)).astype(np.float32),
            rng.integers(0, 3, size=(8, 1)).astype(np.int32), 4) for i in range(4)
    }
    result = runner.simulate({name: tiny_models.tiny_process(name) for name in names},
                             data,
                             rounds=2,
                             execution=execution,
                             tff_subrounds=tff_subrounds,
                             log=lambda _: None)
    return result.model_weights

  def test_rounds_in_subrounds_equal_whole_rounds(self):
    # TFF's FedAvg on TFF's local runtime beside an in-process algorithm; every algorithm on
    # TFF's runtime, FLARE's client states included (`next_in_phases`).
    for execution, names in (('inprocess', ('tff_fedavg', 'ec')), ('local', ('flare',))):
      whole = self._final_weights(execution, 1, names)
      native = tff.backends.native
      with mock.patch.object(native,
                             'create_mergeable_comp_execution_context',
                             wraps=native.create_mergeable_comp_execution_context) as mergeable:
        split = self._final_weights(execution, 3, names)
      self.assertEqual(mergeable.call_args.kwargs['num_subrounds'], 3, execution)
      for name in names:
        self.assertAllClose(whole[name].trainable,
                            split[name].trainable,
                            rtol=1e-5,
                            atol=1e-6,
                            msg=f'{execution} {name}')

  def test_bad_subrounds_are_one_line(self):
    for value, message in ((0, r'tff_subrounds must be an int in \[1, 10000\], got 0'),
                           (5, r'tff_subrounds \(5\) must be at most the clients a round \(4\)')):
      with self.assertRaisesRegex(config_lib.ConfigError, message):
        self._final_weights('inprocess', value, ('tff_fedavg',))
    with self.assertRaisesRegex(ValueError, "tff_subrounds is for TFF's local runtime"):
      modes.build_execution('remote', ['localhost:1'], tff_subrounds=2)
    # Built directly (no run's clients to bound it): a count TFF's context would copy an
    # argument that many times for is refused, as are a bool and a float.
    for value in (10**30, modes.MAX_SUBROUNDS + 1, True, 2.0):
      with self.assertRaisesRegex(ValueError, 'tff_subrounds must be an int in'):
        modes.build_execution('local', tff_subrounds=value)


if __name__ == '__main__':
  tf.test.main()
