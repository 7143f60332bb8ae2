"""Tests of `tff_flare.algorithms.ef21`: as defined versus the authors' dense-state shortcut."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import reference_numpy
from tests import tiny_models
from tff_flare.algorithms import ef21
from tff_flare.execution import modes
from tff_flare.simulation import hooks
from tff_flare.simulation import loop
from tff_flare.simulation import sampling


def _client_data(num_clients):
  return tff.simulation.datasets.TestClientData(
      {f'c{i}': dict(zip(('x', 'y'), _arrays(i))) for i in range(num_clients)})


def _arrays(seed):
  rng = np.random.default_rng(seed)
  return (rng.normal(size=(8, 4)).astype(np.float32), rng.integers(0, 3,
                                                                   size=(8, 1)).astype(np.int32))


def _run(process, num_clients, clients_per_round, num_rounds=4):
  data = _client_data(num_clients).preprocess(lambda d: d.batch(4))
  with modes.build_execution('inprocess') as execution:
    run = loop.AlgorithmRun('ef21', process, execution)
    rows = hooks.CollectRows()
    loop.run_rounds([run],
                    loop.datasets_of(data),
                    sampling.build_client_sampler(data.client_ids, clients_per_round, seed=3),
                    start_round=0,
                    end_round=num_rounds,
                    hooks=[rows])
  return run, rows.rows[:-1]


class Ef21Test(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    model_fn = tiny_models.softmax_model_fn()
    optimizer = tff.learning.optimizers.build_sgdm(0.5, momentum=0.5)
    self.proper = ef21.build_ef21(model_fn,
                                  keep_percent=20.0,
                                  client_optimizer=optimizer,
                                  total_clients=4)
    self.shortcut = ef21.build_ef21(model_fn,
                                    keep_percent=20.0,
                                    client_optimizer=optimizer,
                                    dense_state_shortcut=True)

  def test_full_participation_same_trajectory(self):
    proper, proper_history = _run(self.proper, 4, 4)
    shortcut, _ = _run(self.shortcut, 4, 4)
    for p, s in zip(proper.model_weights().trainable, shortcut.model_weights().trainable):
      self.assertAllClose(p, s, rtol=1e-5, atol=1e-6)
    communication = proper_history[-1]['ef21'].train['aggregator']['communication']
    # As defined, the wire carries the sparse corrections only.
    self.assertEqual(communication['entries_sent_total'], communication['correction_entries_total'])
    # Kernel 4x3 at R=20: k=2.4 -> 3 kept; bias of 3: k=0.6 -> 2 kept; 5 a client at most.
    self.assertEqual(communication['entries_sent_total'], 4 * 5)

  def test_partial_participation_differs_and_server_keeps_mean_of_all_states(self):
    proper, _ = _run(self.proper, 4, 2)
    shortcut, history = _run(self.shortcut, 4, 2)
    self.assertNotAllClose(proper.model_weights().trainable[0],
                           shortcut.model_weights().trainable[0])
    # The server's running G is the mean over all 4 clients' states, present or not.
    all_states = [proper.store.get(f'c{i}')[ef21.EF21_STATE] for i in range(4)]
    mean_state = [np.mean([s[j] for s in all_states], axis=0) for j in range(2)]
    for g, m in zip(proper.state.aggregator, mean_state):
      self.assertAllClose(g, m, rtol=1e-5, atol=1e-7)
    # The shortcut sends dense states: more entries than the corrections.
    communication = history[-1]['ef21'].train['aggregator']['communication']
    self.assertGreater(communication['entries_sent_total'],
                       communication['correction_entries_total'])

  def test_needs_total_clients(self):
    with self.assertRaisesRegex(ValueError, 'total_clients'):
      ef21.build_ef21(tiny_models.softmax_model_fn(),
                      keep_percent=1.0,
                      client_optimizer=tff.learning.optimizers.build_sgdm(0.1))


# Three clients, two steps each (momentum), over four rounds in which each sits out once.
_PARTICIPATION = [[0, 1], [1, 2], [0, 2], [0, 1, 2]]


class HandComputationTest(tf.test.TestCase, parameterized.TestCase):
  """Both forms of EF21 against the spec written out in numpy (`tests/reference_numpy.py`):
  `c = TopK(d - g)`, `g <- g + c`; as defined `G <- G + sum c / N`, `s <- s + G`; the
  authors' shortcut `s <- s + mean of the present g`."""

  @parameterized.named_parameters(('as_defined', False), ('dense_state_shortcut', True))
  def test_matches_hand_computation(self, dense_state_shortcut):
    optimizer = tff.learning.optimizers.build_sgdm(0.5, momentum=0.9)
    process = ef21.build_ef21(tiny_models.softmax_model_fn(),
                              keep_percent=20.0,
                              client_optimizer=optimizer,
                              total_clients=3,
                              dense_state_shortcut=dense_state_shortcut)
    weights, states, outputs = tiny_models.run_participation(process, 3, _PARTICIPATION)
    expected, expected_states, notes = reference_numpy.simulate(
        'ef21_dense' if dense_state_shortcut else 'ef21',
        tiny_models.initial_trainable(process),
        {i: tiny_models.client_batches(i) for i in range(3)},
        _PARTICIPATION,
        learning_rate=0.5,
        momentum=0.9,
        keep_percent=20.0,
        total_clients=3)
    for ours, theirs in zip(weights, expected):
      self.assertAllClose(ours, theirs, rtol=1e-5, atol=1e-6)
    for i in range(3):
      for ours, theirs in zip(states[i][ef21.EF21_STATE], expected_states[i]):
        self.assertAllClose(ours, theirs, rtol=1e-5, atol=1e-6)
    for output, note in zip(outputs, notes):
      self.assertEqual(output.metrics['aggregator']['communication']['entries_sent_total'],
                       sum(note['sent'].values()))

  def test_the_two_forms_differ_when_clients_sit_out(self):
    # The hand computations above are not vacuous: the forms part ways after round 0.
    initial = [np.zeros([4, 3]), np.zeros([3])]
    clients = {i: tiny_models.client_batches(i) for i in range(3)}
    runs = [
        reference_numpy.simulate(name,
                                 initial,
                                 clients,
                                 _PARTICIPATION,
                                 learning_rate=0.5,
                                 momentum=0.9,
                                 keep_percent=20.0,
                                 total_clients=3)[0] for name in ('ef21', 'ef21_dense')
    ]
    self.assertGreater(np.max(np.abs(runs[0][0] - runs[1][0])), 1e-3)


if __name__ == '__main__':
  tf.test.main()
