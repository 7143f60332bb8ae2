"""Tests of `tff_flare.algorithms.composer`: signatures, metrics, phases, the non-finite policy."""

import collections
import types

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import flare
from tff_flare.algorithms import registry

_MODEL_FN = tiny_models.softmax_model_fn()
_HPARAMS = registry.Hyperparameters(
    client_optimizer=tff.learning.optimizers.build_sgdm(0.5, momentum=0.9), keep_percent=20.0,
    total_clients=4, tau=0.5, tau_decay=2.0, num_mask_draws=1)
_IDS = ['client_0', 'client_1', 'client_2']


def _round(process, state, datasets, client_states=None, ids=None):
  ids = ids or _IDS[:len(datasets)]
  if client_states is None:
    client_states = [process.initial_client_state()] * len(datasets)
  return process.next(state, datasets, client_states, process.client_inputs(ids))


def _bad_dataset():
  x = np.full((8, 4), np.nan, np.float32)
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=x, y=np.zeros((8, 1), np.int32))).batch(8)


class SignatureTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.process = registry.build('flare', _MODEL_FN, _HPARAMS)

  def test_one_next_signature_for_every_process(self):
    for name in registry.NAMES:
      process = registry.build(name, _MODEL_FN, _HPARAMS)
      parameter = process.next.type_signature.parameter
      self.assertLen(parameter, 4, msg=name)
      for i in (1, 2, 3):
        self.assertIs(parameter[i].placement, tff.CLIENTS, msg=name)
      result = process.next.type_signature.result
      self.assertIs(result[0].placement, tff.SERVER, msg=name)
      self.assertIs(result[2].placement, tff.CLIENTS, msg=name)

  def test_tau_is_state_not_recompilation_and_advances(self):
    state = self.process.initialize()
    datasets = [tiny_models.classification_dataset(0)]
    states = [self.process.initial_client_state()]
    taus = []
    for _ in range(3):
      output = _round(self.process, state, datasets, states)
      state, states = output.state, output.client_states
      taus.append(output.metrics['tau'])
    self.assertAllClose(taus, [0.25, 0.125, 0.0625])
    self.assertEqual(state.client_work['round_num'], 3)

  def test_communication_metrics(self):
    datasets = [tiny_models.classification_dataset(s) for s in range(3)]
    output = _round(self.process, self.process.initialize(), datasets)
    communication = output.metrics['communication']
    # Kernel 4x3 at R=20: k = 2.4 -> 3 kept; bias of 3: k = 0.6 -> 2 kept: 5 of 15 a client.
    self.assertEqual(communication['entries_sent_total'], 15)
    self.assertEqual(communication['entries_sent_per_client'], 5.0)
    self.assertEqual(communication['bytes_sent_total'], 15 * 8)
    self.assertAllClose(communication['density'], 5.0 / 15.0)
    self.assertEqual(self.process.num_trainable_parameters, 15)
    self.assertIn('loss', output.metrics['train'])
    self.assertEqual(output.metrics['finalizer']['update_non_finite'], 0)


class NonFinitePolicyTest(tf.test.TestCase, parameterized.TestCase):
  """One policy for every algorithm (`composer` module docstring)."""

  @parameterized.named_parameters((name, name) for name in registry.NAMES)
  def test_nonfinite_client_sends_nothing_and_keeps_its_state(self, name):
    process = registry.build(name, _MODEL_FN, _HPARAMS)
    good = tiny_models.classification_dataset(0)
    state = process.initialize()
    initial = tiny_models.trainable_arrays(process, state)
    old_state = process.initial_client_state()
    if tf.nest.flatten(old_state):  # A state that is not the initial one.
      old_state = tf.nest.map_structure(lambda t: np.full_like(t, 0.25), old_state)
    output = _round(process, state, [good, _bad_dataset()],
                    [process.initial_client_state(), old_state])
    weights = tiny_models.trainable_arrays(process, output.state)
    self.assertTrue(all(np.all(np.isfinite(w)) for w in weights), name)
    self.assertFalse(all(np.array_equal(w, w0) for w, w0 in zip(weights, initial)), name)
    if process.runs_only_on_tff:
      return  # TFF's own algorithms follow TFF's rules (weights checked above).
    communication = output.metrics['communication']
    self.assertEqual(communication['nonfinite_clients_total'], 1)
    self.assertEqual(communication['num_clients_total'], 2)
    for kept, old in zip(tf.nest.flatten(output.client_states[1]), tf.nest.flatten(old_state)):
      self.assertAllEqual(kept, old)
    # The bad client left the mean: the round equals the good client's round alone, its
    # training metrics included (they used to be summed in, outside the policy).
    alone = _round(process, state, [good])
    for w, wa in zip(weights, tiny_models.trainable_arrays(process, alone.state)):
      self.assertAllClose(w, wa, rtol=1e-6, atol=1e-7)
    self.assertTrue(np.isfinite(output.metrics['train']['loss']), name)
    self.assertAllClose(output.metrics['train'], alone.metrics['train'], rtol=1e-6, msg=name)

  def test_nonfinite_update_is_not_applied(self):
    process = registry.build('fedavg', _MODEL_FN, _HPARAMS)
    functions = process.round_functions
    state = process.initialize()
    specs = functions.specs
    optimizer_state, trainable, measurements = functions.apply_update(
        state.finalizer, [tf.ones(s.shape) for s in specs],
        [tf.fill(s.shape, np.nan) for s in specs])
    self.assertEqual(int(measurements['update_non_finite']), 1)
    for t in trainable:
      self.assertAllEqual(t, np.ones_like(t))
    del optimizer_state


class PhasesTest(tf.test.TestCase):

  def test_next_in_phases_equals_next(self):
    datasets = [tiny_models.classification_dataset(seed, batch_size=4) for seed in range(3)]
    for name in ('flare', 'ec', 'ef21'):
      process = registry.build(name, _MODEL_FN, _HPARAMS)
      state = process.initialize()
      states = [process.initial_client_state()] * 3
      inputs = process.client_inputs(_IDS)
      phased_state, phased_states = state, states
      for _ in range(2):
        whole = process.next(state, datasets, states, inputs)
        phased = composer.next_in_phases(process, phased_state, datasets, phased_states,
                                         inputs)
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
      process = registry.build(name, _MODEL_FN, _HPARAMS)
      self.assertIsNone(process.phases, name)
      output = _round(process, process.initialize(),
                      [tiny_models.classification_dataset(0)])
      self.assertEqual(list(output.client_states), [()], name)

  def test_next_in_phases_restores_client_order(self):
    # TFF's mergeable context can return the client outputs of a later subround first.
    process = registry.build('flare', _MODEL_FN, _HPARAMS)
    datasets = [tiny_models.classification_dataset(seed) for seed in range(3)]
    state = process.initialize()
    states = [process.initial_client_state()] * 3
    inputs = process.client_inputs(_IDS)
    whole = process.next(state, datasets, states, inputs)
    real = process.phases

    def client_phase_later_subround_first(*args):
      outputs = real.client_phase(*args)
      return outputs[2:] + outputs[:2]

    shuffled = types.SimpleNamespace(phases=composer.RoundPhases(
        client_phase=client_phase_later_subround_first, server_phase=real.server_phase))
    phased = composer.next_in_phases(shuffled, state, datasets, states, inputs)
    for a, b in zip(tf.nest.flatten((whole.state, whole.client_states)),
                    tf.nest.flatten((phased.state, phased.client_states))):
      self.assertAllEqual(a, b)

    def client_phase_losing_a_client(*args):
      return real.client_phase(*args)[1:]

    lossy = types.SimpleNamespace(phases=composer.RoundPhases(
        client_phase=client_phase_losing_a_client, server_phase=real.server_phase))
    with self.assertRaisesRegex(RuntimeError, r'outputs of clients \[1, 2\], expected each of '
                                r'0..2 once'):
      composer.next_in_phases(lossy, state, datasets, states, inputs)


class ClientStateTest(tf.test.TestCase):

  def test_error_feedback_state_is_the_accumulator(self):
    process = flare.build_flare(_MODEL_FN, keep_percent=20.0,
                                client_optimizer=_HPARAMS.client_optimizer, tau=0.1,
                                tau_decay=1.1)
    state = process.initial_client_state()
    self.assertEqual(list(state), [error_feedback.ACCUMULATOR])
    self.assertEqual([np.shape(t) for t in state[error_feedback.ACCUMULATOR]], [(4, 3), (3,)])


if __name__ == '__main__':
  tf.test.main()
