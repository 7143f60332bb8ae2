"""Tests of `tff_flare.tasks.models`: the authors' parameter counts per tensor, loss semantics."""

import collections

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tff_flare.tasks import models

CNN_SHAPES = [(5, 5, 1, 32), (32,), (5, 5, 32, 64), (64,), (1024, 512), (512,), (512, 10), (10,)]
FC_SHAPES = [(784, 4069), (4069,), (4069, 4069), (4069,), (4069, 4069), (4069,), (4069, 10), (10,)]


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


VGG19_SHAPES = ([(3, 3, 3, 64), (64,), (3, 3, 64, 64), (64,), (3, 3, 64, 128), (128,),
                 (3, 3, 128, 128), (128,), (3, 3, 128, 256),
                 (256,)] + [(3, 3, 256, 256), (256,)] * 3 + [(3, 3, 256, 512),
                                                             (512,)] + [(3, 3, 512, 512),
                                                                        (512,)] * 7 + [(512, 4096),
                                                                                       (4096,),
                                                                                       (4096, 4096),
                                                                                       (4096,),
                                                                                       (4096, 10),
                                                                                       (10,)])
GRU_SHAPES = [(86, 256), (256, 3072), (1024, 3072), (3072,), (1024, 86), (86,)]


class MoreModelsTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((19, 38_947_914), (16, 33_638_218), (11, 28_144_010))
  def test_vgg_parameter_counts(self, depth, count):
    model = models.vgg(depth)
    self.assertEqual(model.count_params(), count)
    if depth == 19:
      self.assertEqual([tuple(v.shape) for v in model.trainable_variables], VGG19_SHAPES)
      self.assertLen(model.trainable_variables, 38)

  def test_vgg11_has_one_relu_per_paired_block(self):
    convs = [l for l in models.vgg(11).layers if isinstance(l, tf.keras.layers.Conv2D)]
    activations = [l.activation.__name__ for l in convs]
    self.assertEqual(activations,
                     ['relu', 'relu', 'linear', 'relu', 'linear', 'relu', 'linear', 'relu'])

  def test_vgg_cifar100_head_and_seeding(self):
    self.assertEqual(models.vgg(11, num_classes=100).output_shape, (None, 100))
    first = models.vgg(11, seed=5).get_weights()
    second = models.vgg(11, seed=5).get_weights()
    self.assertAllEqual(first[-2], second[-2])
    # Per-layer seeds: two 512x512 kernels of one model differ.
    self.assertNotAllClose(first[10], first[12])
    with self.assertRaisesRegex(ValueError, 'VGG depth'):
      models.vgg(13)

  def test_gru_tensors_match_spec(self):
    model = models.shakespeare_gru()
    self.assertEqual([tuple(v.shape) for v in model.trainable_variables], GRU_SHAPES)
    self.assertEqual(model.count_params(), 4_045_398)
    tff_model = models.shakespeare_model_fn(seed=0)()
    x = np.random.default_rng(0).integers(0, 86, size=(8, 100))
    output = tff_model.forward_pass(collections.OrderedDict(x=x, y=x), training=False)
    self.assertAllClose(output.loss, np.log(86.0), atol=0.05)  # Fresh model: ~uniform.

  def test_masking_cnn(self):
    model = models.masking_cnn(seed=0)
    self.assertEqual(model.output_shape, (None, 10))
    self.assertAllEqual(model.get_weights()[0], models.masking_cnn(seed=0).get_weights()[0])


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
    first_softmax = tf.keras.Model(
        model._keras_model.inputs,  # pylint: disable=protected-access
        model._keras_model.layers[-2].output)(x)  # pylint: disable=protected-access
    expected = -np.mean(np.log(tf.nn.softmax(first_softmax).numpy()[np.arange(5), y[:, 0]]))
    self.assertAllClose(output.loss, expected, rtol=1e-5)
    self.assertAllClose(p1, tf.nn.softmax(first_softmax), rtol=1e-5)
    self.assertGreater(float(output.loss), np.log(1 + 9 / np.e) - 1e-4)  # The loss floor.

  def test_cnn_without_double_softmax(self):
    model = models.mnist_cnn(double_softmax=False)
    self.assertEqual(model.count_params(), 582_026)
    self.assertIsInstance(model.layers[-1], tf.keras.layers.Dense)

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
