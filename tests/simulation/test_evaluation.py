"""Tests of `tff_flare.simulation.evaluation`: by hand, against TFF's evaluation, GRU state."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.simulation import evaluation
from tff_flare.tasks import models


class EvaluationTest(tf.test.TestCase):

  def test_matches_numpy(self):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(10, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=(10, 1)).astype(np.int32)
    test = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(4)
    evaluate = evaluation.build_evaluate_fn(tiny_models.softmax_model_fn(), test)
    kernel = rng.normal(size=(4, 3)).astype(np.float32)
    bias = np.array([0.1, -0.2, 0.3], np.float32)
    result = evaluate(tff.learning.models.ModelWeights(trainable=[kernel, bias], non_trainable=[]))
    logits = x @ kernel + bias
    log_probs = logits - np.log(np.sum(np.exp(logits), axis=1, keepdims=True))
    self.assertAllClose(result['loss'], -np.mean(log_probs[np.arange(10), y[:, 0]]), rtol=1e-5)
    self.assertAllClose(result['accuracy'], np.mean(np.argmax(logits, 1) == y[:, 0]))
    self.assertEqual(result['num_examples'], 10)

  def test_equals_tff_fed_eval(self):
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(30, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, size=(30, 1)).astype(np.int32)
    test = tf.data.Dataset.from_tensor_slices(collections.OrderedDict(x=x, y=y)).batch(8)
    model_fn = models.tff_model_fn(models.mnist_cnn, (28, 28, 1))
    tff_eval = tff.learning.algorithms.build_fed_eval(model_fn)
    state = tff_eval.initialize()
    weights = tff_eval.get_model_weights(state)
    metrics = tff_eval.next(state, [test]).metrics['client_work']['eval']['current_round_metrics']
    ours = evaluation.build_evaluate_fn(model_fn, test)(weights)
    self.assertAllClose(ours['loss'], metrics['loss'], rtol=1e-6)
    self.assertEqual(ours['accuracy'], metrics['sparse_categorical_accuracy'])
    self.assertEqual(ours['num_examples'], metrics['num_examples'])

  def test_stateful_gru_starts_every_evaluation_from_zero_state(self):
    rng = np.random.default_rng(2)
    ids = rng.integers(0, models.SHAKESPEARE_VOCAB_SIZE, size=(2, 8, 101)).astype(np.int64)
    test = tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=ids[:, :, :-1], y=ids[:, :, 1:]))
    model_fn = models.shakespeare_model_fn(seed=0, units=16)
    evaluate = evaluation.build_evaluate_fn(model_fn, test)
    with tf.Graph().as_default():
      specs = [(v.shape, v.dtype) for v in model_fn().trainable_variables]
    weights = tff.learning.models.ModelWeights(
        trainable=[rng.normal(scale=0.1, size=s).astype(np.float32) for s, _ in specs],
        non_trainable=[])
    first, second = evaluate(weights), evaluate(weights)
    self.assertEqual(first, second)  # No state left over from the first evaluation.
    # The state carries from batch to batch: the second batch alone gives another loss.
    alone = evaluation.build_evaluate_fn(model_fn, test.skip(1))(weights)
    two = evaluation.build_evaluate_fn(model_fn, test.take(1))(weights)
    self.assertNotAlmostEqual((alone['loss'] + two['loss']) / 2, first['loss'], places=6)


if __name__ == '__main__':
  tf.test.main()
