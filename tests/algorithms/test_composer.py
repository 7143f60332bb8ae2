"""Tests of `composer` and `round_functions`: signatures, metrics, the non-finite policy."""

import collections
import dataclasses
from unittest import mock

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import flare
from tff_flare.algorithms import model_aggregators
from tff_flare.algorithms import registry
from tff_flare.simulation import client_state

_MODEL_FN = tiny_models.SOFTMAX_MODEL_FN
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
    self.process = tiny_models.tiny_process('flare')

  def test_one_next_signature_for_every_process(self):
    for name in registry.NAMES:
      process = tiny_models.tiny_process(name)
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
      taus.append(output.metrics['client_work']['tau'])
    self.assertAllClose(taus, [0.5 / 1.5, 0.5 / 1.5**2, 0.5 / 1.5**3])  # TAU / c^(r+1).
    self.assertEqual(state.client_work['round_num'], 3)

  def test_communication_metrics(self):
    datasets = [tiny_models.classification_dataset(s) for s in range(3)]
    output = _round(self.process, self.process.initialize(), datasets)
    communication = output.metrics['aggregator']['communication']
    # Kernel 4x3 at R=20: k = 2.4 -> 3 kept; bias of 3: k = 0.6 -> 2 kept: 5 of 15 a client.
    self.assertEqual(communication['entries_sent_total'], 15)
    self.assertEqual(communication['entries_sent_per_client'], 5.0)
    self.assertEqual(communication['bytes_sent_total'], 15 * 8)
    self.assertAllClose(communication['density'], 5.0 / 15.0)
    self.assertEqual(self.process.num_trainable_parameters, 15)
    self.assertIn('loss', output.metrics['client_work']['train'])
    self.assertEqual(output.metrics['finalizer']['update_non_finite'], 0)


class NonFinitePolicyTest(tf.test.TestCase, parameterized.TestCase):
  """One policy for every algorithm (`composer` module docstring)."""

  @parameterized.named_parameters((name, name) for name in registry.NAMES)
  def test_nonfinite_client_sends_nothing_and_keeps_its_state(self, name):
    process = tiny_models.tiny_process(name)
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
    communication = output.metrics['aggregator']['communication']
    self.assertEqual(communication['nonfinite_clients_total'], 1)
    self.assertEqual(communication['num_clients_total'], 2)
    for kept, old in zip(tf.nest.flatten(output.client_states[1]), tf.nest.flatten(old_state)):
      self.assertAllEqual(kept, old)
    # The bad client left the mean: the round equals the good client's round alone, its
    # training metrics included (they used to be summed in, outside the policy).
    alone = _round(process, state, [good])
    for w, wa in zip(weights, tiny_models.trainable_arrays(process, alone.state)):
      self.assertAllClose(w, wa, rtol=1e-6, atol=1e-7)
    self.assertTrue(np.isfinite(output.metrics['client_work']['train']['loss']), name)
    self.assertAllClose(output.metrics['client_work']['train'],
                        alone.metrics['client_work']['train'],
                        rtol=1e-6,
                        msg=name)

  def test_nonfinite_update_is_not_applied(self):
    process = tiny_models.tiny_process('fedavg')
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


class ClientStateTest(tf.test.TestCase):

  def test_error_feedback_state_is_the_accumulator(self):
    process = flare.build_flare(
        _MODEL_FN,
        keep_percent=20.0,
        client_optimizer=tiny_models.tiny_hparams().context.client_optimizer,
        tau=0.1,
        tau_decay=1.1)
    state = process.initial_client_state()
    self.assertEqual(list(state), [error_feedback.ACCUMULATOR])
    self.assertEqual([np.shape(t) for t in state[error_feedback.ACCUMULATOR]], [(4, 3), (3,)])


def _with_aggregator(name, model_aggregator):
  hparams = tiny_models.tiny_hparams()
  return registry.build(
      name, _MODEL_FN,
      registry.Hyperparameters(hparams.context.client_optimizer,
                               total_clients=hparams.context.total_clients,
                               model_aggregator=model_aggregator,
                               **dataclasses.asdict(hparams.knobs)))


class ModelAggregatorTest(tf.test.TestCase, parameterized.TestCase):
  """A `tff.aggregators` factory in the weighted mean's place (`composer` docstring)."""

  @parameterized.named_parameters(('fedavg_weighted', 'fedavg', tff.aggregators.MeanFactory),
                                  ('ec_weighted', 'ec', tff.aggregators.MeanFactory),
                                  ('ec_unweighted', 'ec', tff.aggregators.UnweightedMeanFactory))
  def test_tff_mean_equals_our_mean(self, name, factory):
    datasets = [tiny_models.classification_dataset(s) for s in range(3)]
    ours, our_states, our_outputs = tiny_models.train(tiny_models.tiny_process(name), datasets, 2)
    process = _with_aggregator(name, factory())
    self.assertTrue(process.runs_only_on_tff)
    theirs, their_states, their_outputs = tiny_models.train(process, datasets, 2)
    self.assertAllClose(ours, theirs, rtol=1e-6, atol=1e-7)
    self.assertAllClose(our_states, their_states, rtol=1e-6, atol=1e-7)
    self.assertEqual(our_outputs[-1].metrics['aggregator']['communication'],
                     their_outputs[-1].metrics['aggregator']['communication'])
    self.assertIn('aggregator', their_outputs[-1].metrics)

  def test_stateful_factory_clips_and_reports(self):
    clip = 1e-3
    factory = tff.aggregators.clipping_factory(clip, tff.aggregators.MeanFactory())
    process = _with_aggregator('fedavg', factory)
    state = process.initialize()
    before = tiny_models.trainable_arrays(process, state)
    output = tiny_models.next_round(process, state,
                                    [tiny_models.classification_dataset(s) for s in range(3)])
    after = tiny_models.trainable_arrays(process, output.state)
    # Every client's delta is clipped to norm `clip`, so their mean moves the model no more.
    moved = np.sqrt(sum(np.sum((a - b)**2) for a, b in zip(after, before)))
    self.assertGreater(moved, 0.0)
    self.assertLessEqual(moved, clip * (1 + 1e-5))
    self.assertEqual(output.metrics['aggregator']['clipped_count'], 3)  # All three clipped.
    self.assertAllClose(output.metrics['aggregator']['clipping_norm'], clip)

  @parameterized.parameters('ef21', 'ef21_dense', 'tff_fedavg')
  def test_refused_where_the_algorithm_aggregates_its_own_way(self, name):
    with self.assertRaisesRegex(ValueError, f'^{name} aggregate.s. their own way'):
      _with_aggregator(name, tff.aggregators.MeanFactory())

  def test_refused_by_the_in_process_executor(self):
    from tff_flare.execution import inprocess  # pylint: disable=g-import-not-at-top
    with self.assertRaisesRegex(ValueError, "TFF's runtime only"):
      inprocess.InProcessProcess(_with_aggregator('fedavg', tff.aggregators.MeanFactory()))

  def test_the_robust_factory_trains(self):
    name = 'robust'  # TFF's MeanFactory: test_tff_mean_equals_our_mean.
    process = _with_aggregator('ec', model_aggregators.build(name))
    state = process.initialize()
    output = tiny_models.next_round(process, state,
                                    [tiny_models.classification_dataset(s) for s in range(3)])
    self.assertTrue(np.isfinite(output.metrics['client_work']['train']['loss']), name)
    self.assertIn('aggregator', output.metrics)
    self.assertNotAllClose(
        np.concatenate([a.ravel() for a in tiny_models.trainable_arrays(process, state)]),
        np.concatenate([a.ravel() for a in tiny_models.trainable_arrays(process, output.state)]))

  def test_zeroing_drops_every_client_over_its_norm(self):
    process = _with_aggregator('fedavg', model_aggregators.build('zeroing', 1e-9))
    state = process.initialize()
    output = tiny_models.next_round(process, state,
                                    [tiny_models.classification_dataset(s) for s in range(3)])
    self.assertEqual(output.metrics['aggregator']['zeroed_count'], 3)
    for before, after in zip(tiny_models.trainable_arrays(process, state),
                             tiny_models.trainable_arrays(process, output.state)):
      self.assertAllEqual(before, after)

  def test_not_a_factory(self):
    with self.assertRaisesRegex(ValueError,
                                'model_aggregator must be a tff.aggregators factory or None'):
      _with_aggregator('fedavg', object())


class StateFilesTest(tf.test.TestCase):
  """`next_with_state_files` against `next` on TFF's local runtime (the remote equality is in
  tests/execution/test_remote.py)."""

  def test_clients_that_keep_their_states_in_files_train_as_next_does(self):
    process = tiny_models.tiny_process('flare')
    datasets = [tiny_models.classification_dataset(seed) for seed in range(3)]
    weights, client_states, _ = tiny_models.train(process, datasets, 3)
    files = client_state.TensorFileClientStateStore(process.initial_client_state,
                                                    self.get_temp_dir())
    state = process.initialize()
    for _ in range(3):
      read, write = files.prefixes(_IDS)
      state, metrics = process.next_with_state_files(state, datasets, read, write,
                                                     process.client_inputs(_IDS))
      files.written(_IDS)
    # Bit for bit: the same TensorFlow, the states through files instead of the driver.
    for ours, theirs in zip(tiny_models.trainable_arrays(process, state), weights):
      self.assertAllEqual(ours, theirs)
    for cid, expected in zip(_IDS, client_states):
      for ours, theirs in zip(tf.nest.flatten(files.get(cid)), tf.nest.flatten(expected)):
        self.assertAllEqual(ours, theirs, msg=cid)
    self.assertIn('client_work', metrics)

  def test_only_processes_with_client_state_have_it(self):
    self.assertIsNone(tiny_models.tiny_process('fedavg').next_with_state_files)
    self.assertIsNotNone(tiny_models.tiny_process('ec').next_with_state_files)

  def test_built_at_the_first_use_once(self):
    # They trace the model and the client work once more: a run that keeps its states
    # elsewhere never pays for them.
    built = []
    real = composer._rounds_with_state_files

    def counted(*args, **kwargs):
      built.append(True)
      return real(*args, **kwargs)

    with mock.patch.object(composer, '_rounds_with_state_files', counted):
      process = registry.build('ec', tiny_models.SOFTMAX_MODEL_FN, tiny_models.tiny_hparams())
      self.assertEmpty(built)
      self.assertIsNotNone(process.client_sums_with_state_files)
      self.assertIsNotNone(process.next_with_state_files)
    self.assertLen(built, 1)


if __name__ == '__main__':
  tf.test.main()
