"""Tests of `tff_flare.models`: parameter counts per tensor (spec §6) and loss semantics."""

import collections

import numpy as np
import tensorflow as tf

from tff_flare import models

CNN_SHAPES = [(5, 5, 1, 32), (32,), (5, 5, 32, 64), (64,), (1024, 512), (512,), (512, 10),
              (10,)]
FC_SHAPES = [(784, 4069), (4069,), (4069, 4069), (4069,), (4069, 4069), (4069,), (4069, 10),
             (10,)]


class ModelShapesTest(tf.test.TestCase):

  def test_cnn_tensors_match_spec(self):
    model = models.mnist_cnn()
    self.assertEqual([tuple(v.shape) for v in model.trainable_variables], CNN_SHAPES)
    self.assertEqual(model.count_params(), 582_026)
    self.assertEmpty(model.non_trainable_variables)

  def test_fc_tensors_match_spec(self):
    model = models.mnist_fc()
    self.assertEqual([tuple(v.shape) for v in model.trainable_variables], FC_SHAPES)
    self.assertEqual(model.count_params(), 36_356_525)

  def test_cnn_seeded_initialization_is_deterministic(self):
    first = models.mnist_cnn().get_weights()
    second = models.mnist_cnn().get_weights()
    for a, b in zip(first, second):
      self.assertAllEqual(a, b)
    per_layer = models.mnist_cnn('per_layer').get_weights()
    self.assertAllEqual(first[0], per_layer[0])  # Kernel 0 has seed 0 either way.
    self.assertNotAllClose(first[2], per_layer[2])
    self.assertAllEqual(first[1], np.zeros(32))  # Biases start at zero.
    with self.assertRaisesRegex(ValueError, 'kernel_seeds'):
      models.mnist_cnn('random')


class DoubleSoftmaxLossTest(tf.test.TestCase):

  def test_cnn_loss_is_cross_entropy_of_softmax_of_probabilities(self):
    # Spec Q4: Keras takes the final Softmax's input p1 = softmax(z) as the logits.
    model_fn = models.tff_model_fn(models.mnist_cnn, (28, 28, 1))
    model = model_fn()
    rng = np.random.default_rng(0)
    x = rng.uniform(size=(5, 28, 28, 1)).astype(np.float32)
    y = rng.integers(0, 10, size=(5, 1)).astype(np.int32)
    output = model.forward_pass(collections.OrderedDict(x=x, y=y), training=False)
    p1 = model.predict_on_batch(x, training=False)  # The output is softmax(p1)...
    first_softmax = tf.keras.Model(model._keras_model.inputs,  # pylint: disable=protected-access
                                   model._keras_model.layers[-2].output)(x)  # pylint: disable=protected-access
    expected = -np.mean(np.log(tf.nn.softmax(first_softmax).numpy()[np.arange(5), y[:, 0]]))
    self.assertAllClose(output.loss, expected, rtol=1e-5)
    self.assertAllClose(p1, tf.nn.softmax(first_softmax), rtol=1e-5)
    self.assertGreater(float(output.loss), np.log(1 + 9 / np.e) - 1e-4)  # The loss floor.

  def test_fc_loss_is_plain_cross_entropy(self):
    model = models.tff_model_fn(lambda: models.mnist_fc(width=16), (784,))()
    rng = np.random.default_rng(1)
    x = rng.uniform(size=(3, 784)).astype(np.float32)
    y = rng.integers(0, 10, size=(3, 1)).astype(np.int32)
    output = model.forward_pass(collections.OrderedDict(x=x, y=y), training=False)
    probabilities = model.predict_on_batch(x, training=False).numpy()
    expected = -np.mean(np.log(probabilities[np.arange(3), y[:, 0]]))
    self.assertAllClose(output.loss, expected, rtol=1e-5)


if __name__ == '__main__':
  tf.test.main()
