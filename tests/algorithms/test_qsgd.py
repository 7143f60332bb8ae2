"""Tests of `tff_flare.algorithms.qsgd`: QSGD with error feedback against a hand computation."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import qsgd


def _quantize_by_hand(v: np.ndarray, levels: int, uniform: np.ndarray) -> np.ndarray:
  """QSGD's Q(v), written out: |v| sign(v_j) (l_j + 1[u_j < s|v_j|/|v| - l_j]) / s."""
  norm = np.linalg.norm(v.ravel())
  if norm == 0:
    return np.zeros_like(v)
  scaled = levels * np.abs(v) / norm
  lower = np.floor(scaled)
  return norm * np.sign(v) * (lower + (uniform < scaled - lower)) / levels


class QuantizeTest(tf.test.TestCase):

  def test_unbiased_on_average_and_on_the_levels(self):
    v = tf.constant([[0.3, -1.2, 0.0], [2.0, 0.05, -0.6]])
    draws = np.stack(
        [qsgd.quantize(v, 4, tf.constant([7, i], tf.int64)).numpy() for i in range(4000)])
    norm = float(tf.norm(tf.reshape(v, [-1])))
    self.assertAllClose(draws.mean(axis=0), v, atol=0.03)  # E[Q(v)] = v.
    levels = np.round(np.abs(draws) / norm * 4, 4)  # Every entry on a level k |v| / s.
    self.assertAllClose(levels, np.round(levels), atol=1e-3)
    self.assertAllEqual(draws[:, 0, 2], np.zeros(4000))  # Zero stays zero.


class HandComputationTest(tf.test.TestCase):

  def test_matches_hand_computation(self):
    # Two rounds of three clients (one sits out), two momentum steps each: the accumulator,
    # the round counter and the server model by hand, with the same uniform draws.
    levels, lr, momentum = 2, 0.5, 0.9
    process = qsgd.build_qsgd_ef(tiny_models.softmax_model_fn(),
                                 qsgd_levels=levels,
                                 client_optimizer=tff.learning.optimizers.build_sgdm(
                                     lr, momentum=momentum))
    participation = [[0, 1], [1, 2], [0, 2]]
    weights, states, outputs = tiny_models.run_participation(process, 3, participation)

    from tests import reference_numpy  # pylint: disable=g-import-not-at-top
    server = [w.astype(np.float64) for w in tiny_models.initial_trainable(process)]
    accumulators = {i: [np.zeros_like(t) for t in server] for i in range(3)}
    rounds = {i: 0 for i in range(3)}
    for present, output in zip(participation, outputs):
      messages, sent = [], 0
      for i in present:
        delta = reference_numpy.local_delta(server,
                                            tiny_models.client_batches(i),
                                            learning_rate=lr,
                                            momentum=momentum)
        corrected = [d + a for d, a in zip(delta, accumulators[i])]
        message = []
        for j, u in enumerate(corrected):
          seed = qsgd.seed_of(tf.constant(i, tf.int64), tf.constant(rounds[i], tf.int64), j)
          uniform = tf.random.stateless_uniform(u.shape, seed).numpy()
          message.append(_quantize_by_hand(u.astype(np.float32), levels, uniform))
        accumulators[i] = [u - m for u, m in zip(corrected, message)]
        rounds[i] += 1
        messages.append(message)
        sent += sum(int(np.count_nonzero(m)) for m in message)
      server = [s + sum(m[j] for m in messages) / len(messages) for j, s in enumerate(server)]
      self.assertEqual(output.metrics['aggregator']['communication']['entries_sent_total'], sent)
    for ours, theirs in zip(weights, server):
      self.assertAllClose(ours, theirs, rtol=1e-5, atol=1e-6)
    for i in range(3):
      self.assertEqual(int(states[i][qsgd.ROUNDS]), rounds[i])
      for ours, theirs in zip(states[i][error_feedback.ACCUMULATOR], accumulators[i]):
        self.assertAllClose(ours, theirs, rtol=1e-5, atol=1e-6)

  def test_bad_levels(self):
    with self.assertRaisesRegex(ValueError, 'qsgd_levels must be an int >= 1, got 0'):
      qsgd.build_qsgd_ef(tiny_models.softmax_model_fn(),
                         qsgd_levels=0,
                         client_optimizer=tff.learning.optimizers.build_sgdm(0.1))
    # 1e39 levels are inf in float32: the run would send nothing and the model never move.
    with self.assertRaisesRegex(
        ValueError, r'qsgd_levels must be an int below 2\^31 \(the run counts in int32\)'):
      qsgd.build_qsgd_ef(tiny_models.softmax_model_fn(),
                         qsgd_levels=10**39,
                         client_optimizer=tff.learning.optimizers.build_sgdm(0.1))


if __name__ == '__main__':
  tf.test.main()
