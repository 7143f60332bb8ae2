"""Tests of `tff_flare.algorithms.flare`: a hand computation, the EC equivalences, bad input; the
masks, the pull and its gradient by hand."""

import collections

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import reference_numpy
from tests import tiny_models
from tff_flare.algorithms import ec
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import flare
from tff_flare.algorithms import schedules

KEEP_PERCENT = 10.0  # n = 3: k = 0.3 -> k' = 2 -> one entry of the kernel is sent.


def _client_batches(seed, num_batches, batch_size=4):
  x, y = tiny_models.regression_arrays(seed, num_batches * batch_size)
  return [(x[i:i + batch_size], y[i:i + batch_size]) for i in range(0, len(y), batch_size)]


class FlareHandComputationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(('p1_switch', 1, True), ('p2_switch', 2, True),
                                  ('p2_no_switch', 2, False))
  def test_three_rounds_two_clients_match_numpy(self, reg_steps, restart):
    lr, mu, tau, decay = 0.1, 0.9, 0.3, 1.5
    clients = [_client_batches(seed, num_batches=3) for seed in (1, 2)]
    process = flare.build_flare(tiny_models.linear_regression_model_fn(3),
                                keep_percent=KEEP_PERCENT,
                                client_optimizer=tff.learning.optimizers.build_sgdm(lr,
                                                                                    momentum=mu),
                                tau=tau,
                                tau_decay=decay,
                                reg_steps=reg_steps,
                                restart_optimizer_after_reg_steps=restart)
    datasets = [
        tiny_models.dataset_from_arrays(np.concatenate([b[0] for b in c]),
                                        np.concatenate([b[1] for b in c]), 4) for c in clients
    ]
    state = process.initialize()
    client_states = [process.initial_client_state()] * 2

    server = np.zeros((3, 1), np.float32)
    accumulators = [np.zeros((3, 1), np.float32)] * 2
    for round_num in range(3):
      tau_r = np.float32(schedules.tau_at_round(tau, decay, round_num))
      results = [
          reference_numpy.flare_client_round(server,
                                             a,
                                             batches,
                                             learning_rate=lr,
                                             momentum=mu,
                                             tau_r=tau_r,
                                             reg_steps=reg_steps,
                                             restart=restart,
                                             keep_percent=KEEP_PERCENT)
          for a, batches in zip(accumulators, clients)
      ]
      server = server + np.mean([m for m, _ in results], axis=0)
      accumulators = [a for _, a in results]

      output = tiny_models.next_round(process, state, datasets, client_states)
      state, client_states = output.state, output.client_states
      self.assertAllClose(output.metrics['client_work']['tau'], tau_r)
      self.assertAllClose(tiny_models.trainable_arrays(process, state)[0],
                          server,
                          rtol=1e-5,
                          atol=1e-6)
      for got, want in zip(client_states, accumulators):
        self.assertAllClose(got[error_feedback.ACCUMULATOR][0], want, rtol=1e-5, atol=1e-6)
      self.assertEqual(output.metrics['aggregator']['communication']['entries_sent_total'], 2)
    # The pull made a difference: round 2's mask is not empty.
    self.assertGreater(np.sum(reference_numpy.percentile_mask(accumulators[0], 50.0)), 0)


def _run_rounds(process, datasets, num_rounds):
  weights, client_states, _ = tiny_models.train(process, datasets, num_rounds)
  return weights, client_states


class FlareOverEpochsHandComputationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters('authors', 'global')
  def test_matches_hand_computation_over_epochs_with_clients_sitting_out(self, topk_rule):
    # E = 2 epochs of 2 batches (4 steps), p = 3 pulled steps, then the switch; momentum;
    # four rounds on the softmax model, each client sitting out one round.
    process = flare.build_flare(tiny_models.softmax_model_fn(),
                                keep_percent=20.0,
                                client_optimizer=tff.learning.optimizers.build_sgdm(0.5,
                                                                                    momentum=0.9),
                                tau=0.5,
                                tau_decay=1.5,
                                reg_steps=3,
                                topk_rule=topk_rule)
    (weights, states, _), (expected, expected_states,
                           _) = tiny_models.hand_computation(process,
                                                             'flare',
                                                             epochs=2,
                                                             learning_rate=0.5,
                                                             momentum=0.9,
                                                             keep_percent=20.0,
                                                             tau=0.5,
                                                             tau_decay=1.5,
                                                             reg_steps=3,
                                                             topk_rule=topk_rule)
    for ours, theirs in zip(weights, expected):
      self.assertAllClose(ours, theirs, rtol=1e-5, atol=1e-6)
    for i in range(3):
      self.assertAllClose(states[i], expected_states[i], rtol=1e-5, atol=1e-6)


class FlareEqualsEcTest(tf.test.TestCase, parameterized.TestCase):

  def setUp(self):
    super().setUp()
    self.model_fn = tiny_models.softmax_model_fn()

  @parameterized.named_parameters(
      # One local step (a single batch): the two-model switch cannot matter.
      ('one_step_momentum', 8, 0.9, True),
      # No momentum: restarting the optimizer changes nothing.
      ('many_steps_no_momentum', 2, None, True),
      # Switch off: FLARE's momentum carries on, as EC's does.
      ('many_steps_switch_off', 2, 0.9, False))
  def test_tau_zero_equals_ec(self, batch_size, momentum, restart):
    optimizer = tff.learning.optimizers.build_sgdm(0.5, momentum=momentum)
    datasets = [tiny_models.classification_dataset(s, batch_size=batch_size) for s in range(3)]
    flare_process = flare.build_flare(self.model_fn,
                                      keep_percent=20.0,
                                      client_optimizer=optimizer,
                                      tau=0.0,
                                      tau_decay=1.1,
                                      reg_steps=1,
                                      restart_optimizer_after_reg_steps=restart)
    ec_process = ec.build_ec(self.model_fn, keep_percent=20.0, client_optimizer=optimizer)
    flare_weights, flare_states = _run_rounds(flare_process, datasets, 3)
    ec_weights, ec_states = _run_rounds(ec_process, datasets, 3)
    for f, e in zip(flare_weights, ec_weights):
      self.assertAllClose(f, e, rtol=0, atol=1e-7)
    for f, e in zip(flare_states, ec_states):
      for ft, et in zip(f[error_feedback.ACCUMULATOR], e[error_feedback.ACCUMULATOR]):
        self.assertAllClose(ft, et, rtol=0, atol=1e-7)

  def test_round_zero_equals_ec_and_round_one_differs(self):
    # Round 0: the accumulator is zero, so the mask is empty whatever tau is (faithfulness Q8).
    optimizer = tff.learning.optimizers.build_sgdm(0.5)
    datasets = [tiny_models.classification_dataset(s, batch_size=8) for s in range(3)]
    flare_process = flare.build_flare(self.model_fn,
                                      keep_percent=20.0,
                                      client_optimizer=optimizer,
                                      tau=1.0,
                                      tau_decay=1.0)
    ec_process = ec.build_ec(self.model_fn, keep_percent=20.0, client_optimizer=optimizer)
    flare_0, _ = _run_rounds(flare_process, datasets, 1)
    ec_0, _ = _run_rounds(ec_process, datasets, 1)
    for f, e in zip(flare_0, ec_0):
      self.assertAllClose(f, e, rtol=0, atol=1e-7)
    flare_1, _ = _run_rounds(flare_process, datasets, 2)
    ec_1, _ = _run_rounds(ec_process, datasets, 2)
    self.assertNotAllClose(flare_1[0], ec_1[0])


class FlareValidationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ('keep_percent_zero', dict(keep_percent=0.0), 'keep_percent must be in'),
      ('keep_percent_above_100', dict(keep_percent=150.0), 'keep_percent must be in'),
      ('keep_percent_too_large_for_bias', dict(keep_percent=50.0), 'too large for'),
      ('negative_tau', dict(tau=-0.1), 'tau'), ('zero_decay', dict(tau_decay=0.0), 'tau_decay'),
      ('negative_decay', dict(tau_decay=-1.0), 'tau_decay'),
      ('percentile_above_100', dict(mask_percentile=101.0), 'mask_percentile'),
      ('percentile_negative', dict(mask_percentile=-1.0), 'mask_percentile'),
      ('negative_reg_steps', dict(reg_steps=-1), 'reg_steps'),
      ('reg_steps_word', dict(reg_steps='every'), 'reg_steps'),
      ('nan_tau', dict(tau=float('nan')), 'tau'))
  def test_bad_arguments(self, overrides, message):
    kwargs = collections.OrderedDict(keep_percent=1.0,
                                     client_optimizer=tff.learning.optimizers.build_sgdm(0.1),
                                     tau=0.1,
                                     tau_decay=1.1)
    kwargs.update(overrides)
    # The model has a 3-entry bias: R=50 asks for the 4th largest of 3 under the authors' rule.
    with self.assertRaisesRegex(ValueError, message):
      flare.build_flare(tiny_models.softmax_model_fn(), **kwargs)


class PercentileMaskTest(tf.test.TestCase, parameterized.TestCase):

  def test_median_mask_by_hand(self):
    # |a| sorted: 0.1 0.2 0.3 0.5 0.7; n=5, t=50 -> index rne(2.0)=2 -> threshold 0.3.
    a = tf.constant([-0.5, 0.1, 0.3, -0.7, 0.2])
    self.assertAllEqual(flare.percentile_mask(a, 50.0), [1, 0, 0, 1, 0])

  def test_entry_equal_to_threshold_is_not_masked(self):
    # n=4, t=50: index rne(1.5) = 2 (half to even) -> threshold is the 3rd smallest, 0.3.
    a = tf.constant([0.3, 0.1, 0.3, 0.4])
    self.assertEqual(flare.percentile_index(4, 50.0), 2)
    self.assertAllEqual(flare.percentile_mask(a, 50.0), [0, 0, 0, 1])

  def test_bankers_rounding_of_the_index(self):
    # n=6: (n-1)*0.5 = 2.5 -> rne 2; n=8: 3.5 -> rne 4.
    self.assertEqual(flare.percentile_index(6, 50.0), 2)
    self.assertEqual(flare.percentile_index(8, 50.0), 4)
    self.assertEqual(flare.percentile_index(8, 0.0), 0)
    self.assertEqual(flare.percentile_index(8, 100.0), 7)

  def test_zero_accumulator_gives_empty_mask(self):
    self.assertAllEqual(flare.percentile_mask(tf.zeros([3, 4]), 50.0), tf.zeros([3, 4]))

  def test_mostly_zeros_masks_only_strictly_larger(self):
    a = tf.constant([0.0, 0.0, 0.0, 0.0, 0.0, 0.2, -0.4])
    self.assertAllEqual(flare.percentile_mask(a, 50.0), [0, 0, 0, 0, 0, 1, 1])

  @parameterized.parameters((10, 5), (32, 15), (64, 31), (512, 255), (800, 399), (4069, 2034))
  def test_masked_counts_of_spec(self, n, expected):
    a = tf.constant(np.random.default_rng(n).permutation(n) + 1.0, tf.float32)
    self.assertEqual(int(tf.reduce_sum(flare.percentile_mask(a, 50.0))), expected)

  def test_matches_a_sort_on_a_matrix(self):
    a = tf.random.stateless_normal([17, 9], seed=[3, 4])
    flat = np.sort(np.abs(a.numpy()).ravel())
    threshold = flat[int(np.round((flat.size - 1) * 0.3))]
    self.assertAllEqual(flare.percentile_mask(a, 30.0),
                        (np.abs(a.numpy()) > threshold).astype(np.float32))

  def test_unregularized_tensors_get_zero_masks(self):
    a = [tf.constant([1.0, 2.0, 3.0]), tf.constant([1.0, 2.0, 3.0])]
    masks = flare.flare_masks(a, [True, False], 50.0)
    self.assertAllEqual(masks[0], [0, 0, 1])
    self.assertAllEqual(masks[1], [0, 0, 0])

  @parameterized.parameters(-1.0, 100.1)
  def test_invalid_percentile(self, t):
    with self.assertRaisesRegex(ValueError, 'mask_percentile'):
      flare.validate_percentile(t)


class FlarePenaltyTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.w = [tf.constant([0.5, -1.0, 2.0]), tf.constant([[1.0, 0.0], [0.0, 3.0]])]
    self.s = [tf.constant([0.0, -1.0, 1.0]), tf.constant([[1.0, 1.0], [1.0, 1.0]])]
    self.a = [tf.constant([1.0, 0.5, 0.0]), tf.constant([[0.0, -2.0], [0.5, 1.0]])]
    self.thresholds = [tf.constant(0.5), tf.constant(0.4)]  # |a| > theta, strictly:
    self.masks = [tf.constant([1.0, 0.0, 0.0]), tf.constant([[0.0, 1.0], [1.0, 1.0]])]
    self.targets = [s + a for s, a in zip(self.s, self.a)]
    self.tau = tf.constant(0.25)

  def gradient(self, weights, thresholds=None):
    return flare.flare_penalty_gradient(weights, self.s, self.a, thresholds or self.thresholds,
                                        self.tau)

  def test_value_by_hand(self):
    # targets: [1.0, -0.5, 1.0] and [[1, -1], [1.5, 2]].
    # masked |w - target|: |0.5-1| = 0.5 and |0+1| + |0-1.5| + |3-2| = 3.5.
    value = flare.flare_penalty(self.w, self.targets, self.masks, self.tau)
    self.assertAllClose(value, 0.25 * 4.0)

  def test_gradient_by_hand_and_by_autodiff(self):
    grads = self.gradient(self.w)
    self.assertAllEqual(grads[0], [-0.25, 0.0, 0.0])
    self.assertAllEqual(grads[1], [[0.0, 0.25], [-0.25, 0.25]])
    variables = [tf.Variable(w) for w in self.w]
    with tf.GradientTape() as tape:
      value = flare.flare_penalty(variables, self.targets, self.masks, self.tau)
    for autodiff, closed_form in zip(tape.gradient(value, variables), grads):
      self.assertAllEqual(autodiff, closed_form)

  def test_gradient_is_zero_at_the_target(self):
    for g in self.gradient(self.targets):
      self.assertAllEqual(g, tf.zeros_like(g))

  def test_first_step_gradient_is_minus_tau_mask_sign_a(self):
    # At w = s, the gradient is -tau * m * sign(a) (`docs/faithfulness.md`, FLARE's pull).
    for g, m, a in zip(self.gradient(self.s), self.masks, self.a):
      self.assertAllEqual(g, -self.tau * m * tf.sign(a))

  def test_no_term_for_an_unregularized_tensor(self):
    grads = self.gradient(self.w, [None, self.thresholds[1]])
    self.assertIsNone(grads[0])
    self.assertAllEqual(grads[1], [[0.0, 0.25], [-0.25, 0.25]])

  def test_threshold_is_the_masks(self):
    a = tf.constant(np.random.default_rng(3).normal(size=(40, 7)).astype(np.float32))
    for t in (0.0, 30.0, 50.0, 100.0):
      self.assertAllEqual(flare.percentile_mask(a, t),
                          tf.cast(tf.abs(a) > flare.mask_threshold(a, t), tf.float32))
      self.assertAllEqual(
          flare.flare_penalty_gradient([tf.zeros_like(a)], [tf.zeros_like(a)], [a],
                                       [flare.mask_threshold(a, t)], self.tau)[0],
          -self.tau * flare.percentile_mask(a, t) * tf.sign(a))


if __name__ == '__main__':
  tf.test.main()
