"""Tests of `tff_flare.algorithms.ec`: EC at 100 % equals FedAvg and TFF's FedAvg; EC+FedProx and
its proximal term by hand."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import reference_numpy
from tests import tiny_models
from tff_flare.algorithms import ec
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import sparsification
from tff_flare.algorithms import tff_baselines


def _train(process, datasets, num_rounds):
  """Trains `num_rounds`; returns (final trainable weights, outputs, initial weights)."""
  state = process.initialize()
  initial = tiny_models.trainable_arrays(process, state)
  weights, _, outputs = tiny_models.train(process, datasets, num_rounds, state=state)
  return weights, outputs, initial


class EcKeepingEverythingTest(tf.test.TestCase):

  def test_ec_at_100_percent_equals_fedavg_equals_tff_fedavg(self):
    model_fn = tiny_models.softmax_model_fn()
    optimizer = tff.learning.optimizers.build_sgdm(0.3, momentum=0.9)
    # Two batches per client: two local steps with momentum.
    datasets = [tiny_models.classification_dataset(s, batch_size=4) for s in range(3)]
    ec_weights, ec_outputs, _ = _train(
        ec.build_ec(model_fn,
                    keep_percent=100.0,
                    client_optimizer=optimizer,
                    topk_rule=sparsification.TopKRule.EXACT), datasets, 3)
    ours, _, initial = _train(fedavg.build_fedavg(model_fn, client_optimizer=optimizer), datasets,
                              3)
    theirs, _, _ = _train(tff_baselines.build_tff_fedavg(model_fn, client_optimizer=optimizer),
                          datasets, 3)
    self.assertNotAllClose(ours[0], initial[0])  # Training moved the model.
    for e, o, t in zip(ec_weights, ours, theirs):
      self.assertAllClose(e, o, rtol=1e-6, atol=1e-7)
      self.assertAllClose(o, t, rtol=1e-6, atol=1e-7)
    communication = ec_outputs[-1].metrics['aggregator']['communication']
    self.assertAllClose(communication['density'], 1.0)
    self.assertEqual(communication['entries_sent_total'], 3 * 15)
    # Dense float32 (4 bytes an entry) is cheaper than 15 (value, index) pairs.
    self.assertEqual(communication['bytes_sent_total'], 3 * 15 * 4)


class EcFedProxTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.model_fn = tiny_models.softmax_model_fn()
    self.optimizer = tff.learning.optimizers.build_sgdm(0.3, momentum=0.9)

  def _pair(self, batch_size):
    datasets = [tiny_models.classification_dataset(s, batch_size=batch_size) for s in range(3)]
    ec_weights, _, _ = _train(
        ec.build_ec(self.model_fn, keep_percent=20.0, client_optimizer=self.optimizer), datasets, 3)
    prox_weights, _, _ = _train(
        ec.build_ec_fedprox(self.model_fn,
                            keep_percent=20.0,
                            client_optimizer=self.optimizer,
                            tau=5.0,
                            tau_decay=1.0), datasets, 3)
    return ec_weights, prox_weights

  def test_one_local_step_equals_ec(self):
    # At the only step w = s, so the proximal gradient 2 tau (w - s) is zero (faithfulness Q11).
    ec_weights, prox_weights = self._pair(batch_size=8)
    for e, p in zip(ec_weights, prox_weights):
      self.assertAllEqual(e, p)

  def test_several_local_steps_differ_from_ec(self):
    ec_weights, prox_weights = self._pair(batch_size=2)
    self.assertNotAllClose(ec_weights[0], prox_weights[0])


class EcAccumulatorTest(tf.test.TestCase):

  def test_residual_accumulates_what_was_not_sent(self):
    model_fn = tiny_models.linear_regression_model_fn(3)
    process = ec.build_ec(model_fn,
                          keep_percent=10.0,
                          client_optimizer=tff.learning.optimizers.build_sgdm(0.1))
    x, y = tiny_models.regression_arrays(0, 4)
    dataset = tiny_models.dataset_from_arrays(x, y, 4)
    output = tiny_models.next_round(process, process.initialize(), [dataset])
    delta = -0.1 * (2.0 / 4) * x.T @ (x @ np.zeros((3, 1), np.float32) - y)
    sent = tiny_models.trainable_arrays(process, output.state)[0]
    accumulator = output.client_states[0][error_feedback.ACCUMULATOR][0]
    self.assertEqual(np.count_nonzero(sent), 1)
    self.assertAllClose(sent + accumulator, delta, rtol=1e-6)
    self.assertEqual(np.argmax(np.abs(sent)), np.argmax(np.abs(delta)))


class HandComputationTest(tf.test.TestCase, parameterized.TestCase):
  """EC and EC+FedProx over several momentum steps and rounds in which clients sit out,
  against the spec written out in numpy (`tests/reference_numpy.simulate`)."""

  @parameterized.named_parameters(('ec', 'ec', 'authors'), ('ec_fedprox', 'ec_fedprox', 'authors'),
                                  ('ec_global', 'ec', 'global'),
                                  ('ec_fedprox_global', 'ec_fedprox', 'global'))
  def test_matches_hand_computation(self, algorithm, topk_rule):
    optimizer = tff.learning.optimizers.build_sgdm(0.5, momentum=0.9)
    model_fn = tiny_models.softmax_model_fn()
    if algorithm == 'ec':
      process = ec.build_ec(model_fn,
                            keep_percent=20.0,
                            client_optimizer=optimizer,
                            topk_rule=topk_rule)
    else:
      process = ec.build_ec_fedprox(model_fn,
                                    keep_percent=20.0,
                                    client_optimizer=optimizer,
                                    tau=0.5,
                                    tau_decay=1.5,
                                    topk_rule=topk_rule)
    # Two epochs of two batches: four steps a round, the proximal term on each.
    (weights, states, metrics), (expected, expected_states,
                                 notes) = (tiny_models.hand_computation(process,
                                                                        algorithm,
                                                                        epochs=2,
                                                                        learning_rate=0.5,
                                                                        momentum=0.9,
                                                                        keep_percent=20.0,
                                                                        tau=0.5,
                                                                        tau_decay=1.5,
                                                                        topk_rule=topk_rule))
    for ours, theirs in zip(weights, expected):
      self.assertAllClose(ours, theirs, rtol=1e-5, atol=1e-6)
    for i in range(3):
      self.assertAllClose(states[i], expected_states[i], rtol=1e-5, atol=1e-6)
    for round_metrics, note in zip(metrics, notes):
      self.assertEqual(round_metrics['aggregator']['communication']['entries_sent_total'],
                       sum(note['sent'].values()))

  def test_the_proximal_term_matters_in_the_hand_computation(self):
    # Not vacuous: with several steps the reference's EC+FedProx is not EC.
    initial = [np.zeros([4, 3]), np.zeros([3])]
    clients = {i: tiny_models.client_batches(i) for i in range(3)}
    ec_run, prox_run = (reference_numpy.simulate(name,
                                                 initial,
                                                 clients,
                                                 tiny_models.PARTICIPATION,
                                                 epochs=2,
                                                 learning_rate=0.5,
                                                 momentum=0.9,
                                                 keep_percent=20.0,
                                                 tau=0.5,
                                                 tau_decay=1.5)[0] for name in ('ec', 'ec_fedprox'))
    self.assertGreater(np.max(np.abs(ec_run[0] - prox_run[0])), 1e-3)


class ProximalPenaltyTest(tf.test.TestCase):

  def test_value_and_gradient(self):
    w = [tf.constant([1.0, 2.0]), tf.constant([3.0])]
    s = [tf.constant([0.0, 4.0]), tf.constant([0.0])]
    tau = tf.constant(0.5)
    # Only the first tensor is regularized: 0.5 * (1 + 4) = 2.5; gradient 2*0.5*(w - s).
    self.assertAllClose(ec.proximal_penalty(w, s, [True, False], tau), 2.5)
    grads = ec.proximal_penalty_gradient(w, s, [True, False], tau)
    self.assertAllEqual(grads[0], [1.0, -2.0])
    self.assertIsNone(grads[1])  # No term (was a zero tensor made at every step).
    variables = [tf.Variable(x) for x in w]
    with tf.GradientTape() as tape:
      value = ec.proximal_penalty(variables, s, [True, False], tau)
    autodiff = tape.gradient(value, variables)
    self.assertAllEqual(autodiff[0], grads[0])


if __name__ == '__main__':
  tf.test.main()
