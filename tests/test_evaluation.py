"""Tests of `tff_flare.evaluation`: loss and accuracy of given weights, by hand."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare import evaluation


class EvaluationTest(tf.test.TestCase):

  def test_matches_numpy(self):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=(10, 1)).astype(np.int32)
    test = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(4)
    evaluate = evaluation.build_evaluate_fn(tiny_models.softmax_model_fn(), test)
    kernel = rng.normal(size=(4, 3)).astype(np.float32)
    bias = np.array([0.1, -0.2, 0.3], np.float32)
    result = evaluate(tff.learning.models.ModelWeights(trainable=[kernel, bias],
                                                       non_trainable=[]))
    logits = x @ kernel + bias
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    self.assertAllClose(result['loss'], -np.mean(log_probs[np.arange(10), y[:, 0]]), rtol=1e-5)
    self.assertAllClose(result['accuracy'], np.mean(np.argmax(logits, 1) == y[:, 0]))
    self.assertEqual(result['num_examples'], 10)


if __name__ == '__main__':
  tf.test.main()
