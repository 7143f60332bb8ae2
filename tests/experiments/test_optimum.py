"""Tests of `experiments.optimum`: the objective against Keras's loss, and its minimum."""

import json
import pathlib

import numpy as np
import tensorflow as tf

from experiments import optimum
from experiments import spec


def _problem(n=300, features=6, classes=3, seed=0):
  rng = np.random.default_rng(seed)
  x = rng.normal(size=(n, features))
  y = (x @ rng.normal(size=(features, classes)) + rng.normal(size=(n, classes)) * 2).argmax(1)
  return x, y


class ObjectiveTest(tf.test.TestCase):

  def test_loss_is_kerass_cross_entropy_of_the_softmax_and_the_gradient_its_derivative(self):
    x, y = _problem()
    loss_and_gradient, size = optimum.softmax_regression(x, y)
    theta = np.random.default_rng(1).normal(size=size) * 0.3
    loss, gradient = loss_and_gradient(theta)
    weights, bias = theta[:18].reshape(6, 3), theta[18:]
    keras = tf.keras.losses.SparseCategoricalCrossentropy()(y, tf.nn.softmax(x @ weights + bias))
    self.assertAllClose(loss, float(keras), rtol=1e-6)
    step = 1e-6
    numeric = [(loss_and_gradient(theta + step * e)[0] - loss_and_gradient(theta - step * e)[0]) /
               (2 * step) for e in np.eye(size)]
    self.assertAllClose(gradient, numeric, atol=1e-7)

  def test_the_minimum_is_stationary_and_below_any_other_point(self):
    x, y = _problem()
    found = optimum.minimize(x, y)
    self.assertLess(found['gradient_max'], optimum.GRADIENT_TOLERANCE * 10)
    loss_and_gradient, size = optimum.softmax_regression(x, y)
    rng = np.random.default_rng(2)
    for _ in range(5):
      self.assertGreater(loss_and_gradient(rng.normal(size=size))[0], found['f_star'])
    self.assertLess(found['f_star'], loss_and_gradient(np.zeros(size))[0])


class WriteOptimumTest(tf.test.TestCase):

  def test_the_figures_examples_and_their_minimum_are_written(self):
    base = pathlib.Path(self.get_temp_dir())
    rng = np.random.default_rng(0)
    np.savez(base / 'mnist.npz',
             x_train=rng.integers(0, 256, (1000, 28, 28), dtype=np.uint8),
             y_train=(np.arange(1000) % 10).astype(np.uint8),
             x_test=rng.integers(0, 256, (50, 28, 28), dtype=np.uint8),
             y_test=(np.arange(50) % 10).astype(np.uint8))
    figure = spec.Figure(name='convex',
                         title='t',
                         paper='p',
                         grids=(spec.Grid(
                             'R{keep_percent}',
                             dict(task='mnist_logreg',
                                  source='npz',
                                  data_path='{data}/mnist.npz',
                                  total_clients=20,
                                  num_clients=2), 10, dict(keep_percent=(1.0,))),),
                         draw=(spec.SparsityScaling(('flare', 'ec'),
                                                    gaps=(0.1,),
                                                    sparse_at_most=0.01),))
    self.assertTrue(optimum.needs_optimum(figure))
    x, y = optimum.objective_data(figure, str(base))
    self.assertEqual(x.shape, (100, 784))  # The 2 clients in use of 20, 50 images each.
    self.assertLessEqual(x.max(), 1.0)
    found = optimum.write_optimum(figure, base / 'results' / 'convex', str(base))
    written = json.loads((base / 'results' / 'convex' / spec.OPTIMUM_FILE).read_text())
    self.assertEqual(written, found)
    self.assertEqual(found['examples'], 100)
    loss_and_gradient, size = optimum.softmax_regression(x, y)
    self.assertLess(found['f_star'], loss_and_gradient(np.zeros(size))[0])


if __name__ == '__main__':
  tf.test.main()
