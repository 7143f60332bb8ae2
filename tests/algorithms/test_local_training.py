"""Tests of `tff_flare.algorithms.local_training`: penalized steps, optimizer restart, counters."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import local_training


def _train(penalty_gradient_fn, penalized_steps, restart, momentum=0.9, num_batches=3):
  model = tiny_models.linear_regression_model_fn(3)()
  x, y = tiny_models.regression_arrays(0, 4 * num_batches)
  dataset = tiny_models.dataset_from_arrays(x, y, 4)
  optimizer = tff.learning.optimizers.build_sgdm(0.1, momentum=momentum)
  initial = tff.learning.models.ModelWeights(
      trainable=[tf.constant([[0.5], [-0.5], [1.0]])], non_trainable=[])

  @tf.function
  def run():
    return local_training.train_locally(model, optimizer, initial, dataset,
                                        penalty_gradient_fn=penalty_gradient_fn,
                                        penalized_steps=penalized_steps,
                                        restart_optimizer_after_penalty=restart)

  result = run()
  return result, x, y


def _numpy(x, y, penalty, penalized_steps, restart, momentum=0.9):
  w = np.array([[0.5], [-0.5], [1.0]], np.float32)
  velocity = np.zeros_like(w)
  for k in range(len(y) // 4):
    xb, yb = x[4 * k:4 * k + 4], y[4 * k:4 * k + 4]
    g = (2.0 / 4) * xb.T @ (xb @ w - yb)
    if k < penalized_steps:
      g = g + penalty
    if restart and k == penalized_steps:
      velocity = np.zeros_like(w)
    velocity = momentum * velocity + g
    w = w - 0.1 * velocity
  return w


class LocalTrainingTest(tf.test.TestCase):

  def test_counts_steps_and_examples(self):
    result, _, _ = _train(None, local_training.ALL_STEPS, False)
    self.assertEqual(int(result.num_steps), 3)
    self.assertEqual(int(result.num_examples), 12)

  def test_constant_penalty_on_leading_steps_with_and_without_restart(self):
    penalty = np.array([[1.0], [0.0], [-2.0]], np.float32)
    penalty_fn = lambda w: [tf.constant(penalty)]
    for penalized_steps in (0, 1, 2, 3):
      for restart in (False, True):
        result, x, y = _train(penalty_fn, penalized_steps, restart)
        self.assertAllClose(result.trainable_weights[0],
                            _numpy(x, y, penalty, penalized_steps, restart),
                            rtol=1e-5, atol=1e-6, msg=f'p={penalized_steps} {restart}')

  def test_restart_changes_the_result_only_with_momentum(self):
    penalty_fn = lambda w: [tf.zeros([3, 1])]
    with_restart, _, _ = _train(penalty_fn, 1, True)
    without, _, _ = _train(penalty_fn, 1, False)
    self.assertNotAllClose(with_restart.trainable_weights[0], without.trainable_weights[0])
    with_restart, _, _ = _train(penalty_fn, 1, True, momentum=None)
    without, _, _ = _train(penalty_fn, 1, False, momentum=None)
    self.assertAllEqual(with_restart.trainable_weights[0], without.trainable_weights[0])


if __name__ == '__main__':
  tf.test.main()
