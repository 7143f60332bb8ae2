"""Tests of `tff_flare.algorithms.flare`: a hand computation, the EC equivalences, bad input."""

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


if __name__ == '__main__':
  tf.test.main()
