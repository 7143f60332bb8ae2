"""Tests of `tff_flare.stateful_process`: signatures, metrics, non-finite clients."""

import collections
import types

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare import ec
from tff_flare import ef21
from tff_flare import flare
from tff_flare import stateful_process


class StatefulProcessTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.process = flare.build_flare(
        tiny_models.softmax_model_fn(), keep_percent=20.0,
        client_optimizer=tff.learning.optimizers.build_sgdm(0.5), tau=0.5, tau_decay=2.0)

  def test_client_states_are_clients_placed(self):
    parameter = self.process.next.type_signature.parameter
    self.assertIs(parameter[2].placement, tff.CLIENTS)
    self.assertIs(self.process.next.type_signature.result[2].placement, tff.CLIENTS)
    self.assertIs(self.process.next.type_signature.result[0].placement, tff.SERVER)
    self.assertTrue(self.process.has_client_state)

  def test_tau_is_state_not_recompilation_and_advances(self):
    state = self.process.initialize()
    datasets = [tiny_models.classification_dataset(0)]
    states = [self.process.initial_client_state()]
    taus = []
    for _ in range(3):
      output = self.process.next(state, datasets, states)
      state, states = output.state, output.client_states
      taus.append(output.metrics['tau'])
    self.assertAllClose(taus, [0.25, 0.125, 0.0625])
    self.assertEqual(state.client_work['round_num'], 3)

  def test_nonfinite_client_sends_nothing_and_keeps_its_state(self):
    good = tiny_models.classification_dataset(0)
    x = np.full((8, 4), np.nan, np.float32)
    bad = tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=x, y=np.zeros((8, 1), np.int32))).batch(8)
    state = self.process.initialize()
    old_state = collections.OrderedDict(
        accumulator=[np.full((4, 3), 0.5, np.float32), np.full((3,), 0.25, np.float32)])
    output = self.process.next(state, [good, bad], [self.process.initial_client_state(),
                                                    old_state])
    communication = output.metrics['communication']
    self.assertEqual(communication['nonfinite_clients_total'], 1)
    self.assertEqual(communication['num_clients_total'], 2)
    for kept, old in zip(output.client_states[1][ec.ACCUMULATOR], old_state['accumulator']):
      self.assertAllEqual(kept, old)
    weights = tiny_models.trainable_arrays(self.process, output.state)
    self.assertTrue(all(np.all(np.isfinite(w)) for w in weights))
    # Alone, the good client moves the model by half its message (unweighted mean over 2).
    alone = self.process.next(state, [good], [self.process.initial_client_state()])
    initial = tiny_models.trainable_arrays(self.process, state)
    alone_weights = tiny_models.trainable_arrays(self.process, alone.state)
    for w, w0, wa in zip(weights, initial, alone_weights):
      self.assertAllClose(w - w0, (wa - w0) / 2.0, rtol=1e-6, atol=1e-7)

  def test_communication_metrics(self):
    datasets = [tiny_models.classification_dataset(s) for s in range(3)]
    output = self.process.next(self.process.initialize(), datasets,
                               [self.process.initial_client_state()] * 3)
    communication = output.metrics['communication']
    # Kernel 4x3 at R=20: k = 2.4 -> 3 kept; bias of 3: k = 0.6 -> 2 kept: 5 of 15 a client.
    self.assertEqual(communication['entries_sent_total'], 15)
    self.assertEqual(communication['entries_sent_per_client'], 5.0)
    self.assertEqual(communication['bytes_sent_total'], 15 * 8)
    self.assertAllClose(communication['density'], 5.0 / 15.0)
    self.assertEqual(self.process.num_trainable_parameters, 15)
    self.assertIn('loss', output.metrics['train'])

  def test_next_in_phases_equals_next(self):
    model_fn = tiny_models.softmax_model_fn()
    optimizer = tff.learning.optimizers.build_sgdm(0.5, momentum=0.9)
    processes = {
        'flare': flare.build_flare(model_fn, keep_percent=20.0, client_optimizer=optimizer,
                                   tau=0.1, tau_decay=1.1, reg_steps=1),
        'ec': ec.build_ec(model_fn, keep_percent=20.0, client_optimizer=optimizer),
        'ef21': ef21.build_ef21(model_fn, keep_percent=20.0, client_optimizer=optimizer,
                                total_clients=3)}
    datasets = [tiny_models.classification_dataset(seed) for seed in range(3)]
    for name, process in processes.items():
      state = process.initialize()
      states = [process.initial_client_state()] * 3
      phased_state, phased_states = state, states
      for _ in range(2):
        whole = process.next(state, datasets, states)
        phased = stateful_process.next_in_phases(process, phased_state, datasets,
                                                 phased_states)
        self.assertAllEqual(whole.metrics, phased.metrics, msg=name)
        state, states = whole.state, whole.client_states
        phased_state, phased_states = phased.state, phased.client_states
        for a, b in zip(tf.nest.flatten((state, states)),
                        tf.nest.flatten((phased_state, phased_states))):
          self.assertAllEqual(a, b, msg=name)
      # The clients differ, so a permutation of their states would show.
      self.assertNotAllClose(tf.nest.flatten(states[0]), tf.nest.flatten(states[1]))

  def test_next_in_phases_restores_client_order(self):
    # TFF's mergeable context can return the client outputs of a later subround first.
    datasets = [tiny_models.classification_dataset(seed) for seed in range(3)]
    state = self.process.initialize()
    states = [self.process.initial_client_state()] * 3
    whole = self.process.next(state, datasets, states)
    real = self.process.phases

    def client_phase_later_subround_first(*args):
      outputs = real.client_phase(*args)
      return outputs[2:] + outputs[:2]

    shuffled = types.SimpleNamespace(phases=stateful_process.RoundPhases(
        client_phase=client_phase_later_subround_first, server_phase=real.server_phase))
    phased = stateful_process.next_in_phases(shuffled, state, datasets, states)
    for a, b in zip(tf.nest.flatten((whole.state, whole.client_states)),
                    tf.nest.flatten((phased.state, phased.client_states))):
      self.assertAllEqual(a, b)

    def client_phase_losing_a_client(*args):
      return real.client_phase(*args)[1:]

    lossy = types.SimpleNamespace(phases=stateful_process.RoundPhases(
        client_phase=client_phase_losing_a_client, server_phase=real.server_phase))
    with self.assertRaisesRegex(RuntimeError, r'outputs of clients \[1, 2\], expected each of '
                                r'0..2 once'):
      stateful_process.next_in_phases(lossy, state, datasets, states)

  def test_rejects_weighted_aggregator(self):
    with self.assertRaisesRegex(TypeError, 'UnweightedAggregationFactory'):
      ec.build_ec(tiny_models.softmax_model_fn(), keep_percent=20.0,
                  client_optimizer=tff.learning.optimizers.build_sgdm(0.5),
                  model_aggregator=tff.aggregators.MeanFactory())


if __name__ == '__main__':
  tf.test.main()
