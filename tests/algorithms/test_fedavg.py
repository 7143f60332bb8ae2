"""Tests of `tff_flare.algorithms.fedavg`: one round by hand; no client state."""

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import fedavg


class FedAvgTest(tf.test.TestCase):

  def test_one_round_is_the_mean_of_local_steps(self):
    process = fedavg.build_fedavg(tiny_models.linear_regression_model_fn(3),
                                  client_optimizer=tff.learning.optimizers.build_sgdm(0.1))
    self.assertEqual(process.initial_client_state(), ())
    arrays = [tiny_models.regression_arrays(seed, 4) for seed in (1, 2)]
    datasets = [tiny_models.dataset_from_arrays(x, y, 4) for x, y in arrays]
    output = tiny_models.next_round(process, process.initialize(), datasets)
    # From w = 0: each client takes one step -0.1 * (2/4) X^T (0 - y); the server averages.
    expected = np.mean([-0.1 * 0.5 * x.T @ (-y) for x, y in arrays], axis=0)
    self.assertAllClose(tiny_models.trainable_arrays(process, output.state)[0], expected, rtol=1e-6)
    self.assertEqual(output.metrics['aggregator']['communication']['entries_sent_total'], 6)


if __name__ == '__main__':
  tf.test.main()
