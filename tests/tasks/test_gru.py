"""Tests of `tff_flare.tasks.gru`: the same layer as Keras's GRU, computed a sequence at a time."""

import os
from unittest import mock

import numpy as np
import tensorflow as tf

from tff_flare.tasks import gru
from tff_flare.tasks import models

_BATCH, _STEPS, _FEATURES, _UNITS = 4, 7, 5, 6


def _model(layer_class, **kwargs):
  """A stateful GRU of the authors' kind with a non-zero bias (so that it is exercised)."""
  return tf.keras.Sequential([
      tf.keras.layers.Input(batch_shape=(_BATCH, _STEPS, _FEATURES)),
      layer_class(_UNITS,
                  return_sequences=True,
                  stateful=True,
                  reset_after=False,
                  implementation=1,
                  kernel_initializer=tf.keras.initializers.GlorotUniform(1),
                  recurrent_initializer=tf.keras.initializers.GlorotUniform(2),
                  bias_initializer=tf.keras.initializers.RandomUniform(-0.5, 0.5, seed=3),
                  **kwargs)
  ])


def _loss_and_gradients(model, x):
  weights = tf.sin(tf.range(_UNITS, dtype=tf.float32))  # Every output unit counts differently.
  with tf.GradientTape() as tape:
    tape.watch(x)
    outputs = model(x)
    loss = tf.reduce_sum(outputs * weights)
  return outputs, tape.gradient(loss, model.trainable_variables + [x])


class GruTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    rng = np.random.default_rng(0)
    self.batches = [
        tf.constant(rng.normal(size=(_BATCH, _STEPS, _FEATURES)), tf.float32) for _ in range(3)
    ]

  def test_same_variables_as_keras(self):
    ours, keras = _model(gru.GRU), _model(tf.keras.layers.GRU)
    self.assertEqual([v.name.split('/', 1)[1] for v in ours.variables],
                     [v.name.split('/', 1)[1] for v in keras.variables])
    self.assertEqual(ours.layers[0].name.rstrip('_0123456789'), 'gru')
    for mine, theirs in zip(ours.variables, keras.variables):
      self.assertAllEqual(mine, theirs)

  def _compare(self, run):
    """Outputs, gradients and the carried state over three batches, eager or traced."""
    ours, keras = _model(gru.GRU), _model(tf.keras.layers.GRU)
    for x in self.batches:  # The state carries from batch to batch (stateful).
      mine, theirs = run(ours, x), run(keras, x)
      self.assertAllClose(mine[0], theirs[0], atol=1e-6)
      for g_mine, g_theirs in zip(mine[1], theirs[1]):
        self.assertAllClose(g_mine, g_theirs, rtol=1e-5, atol=1e-5)
      self.assertAllClose(ours.layers[0].states[0], keras.layers[0].states[0], atol=1e-6)
    self.assertNotAllClose(ours.layers[0].states[0], tf.zeros((_BATCH, _UNITS)))
    for model in (ours, keras):
      model.reset_states()
    mine, theirs = run(ours, self.batches[0]), run(keras, self.batches[0])
    self.assertAllClose(mine[0], theirs[0], atol=1e-6)

  def test_equals_keras_eagerly(self):
    self._compare(_loss_and_gradients)

  def test_equals_keras_in_a_function(self):
    self._compare(lambda model, x: tf.function(_loss_and_gradients)(model, x))

  def test_equals_keras_in_either_layout(self):
    for layout in (gru.PLAIN, gru.TRANSPOSED):
      with mock.patch.dict(os.environ,
                           {gru.LAYOUT_ENV: layout}), mock.patch.object(gru,
                                                                        '_times',
                                                                        wraps=gru._times) as times:  # pylint: disable=protected-access
        self._compare(lambda model, x: tf.function(_loss_and_gradients)(model, x))
      # Every per-step matmul, forward and backward, ran in this layout.
      self.assertNotEmpty(times.call_args_list)
      self.assertEqual({call.args[2] for call in times.call_args_list}, {layout})

  def test_the_layout_is_measured_once_and_can_be_fixed(self):
    with mock.patch.dict(os.environ), mock.patch.object(gru, '_layouts', {}):
      os.environ.pop(gru.LAYOUT_ENV, None)
      with mock.patch.object(gru, '_time_layouts', wraps=gru._time_layouts) as timed:  # pylint: disable=protected-access
        first = gru.few_row_layout(_BATCH, _UNITS)
        self.assertIn(first, (gru.PLAIN, gru.TRANSPOSED))
        self.assertEqual(gru.few_row_layout(_BATCH, _UNITS), first)
        self.assertEqual(timed.call_count, 1)
      # (plain seconds, transposed seconds) -> the layout kept: transposed only 1.5x faster.
      cases = [((3.0, 1.0), gru.TRANSPOSED), ((1.4, 1.0), gru.PLAIN), ((1.0, 3.0), gru.PLAIN)]
      for (plain, transposed), chosen in cases:
        seconds = {gru.PLAIN: plain, gru.TRANSPOSED: transposed}
        with mock.patch.object(gru, '_layouts', {}), mock.patch.object(gru,
                                                                       '_time_layouts',
                                                                       return_value=seconds):
          self.assertEqual(gru.few_row_layout(_BATCH, _UNITS), chosen, seconds)
      os.environ[gru.LAYOUT_ENV] = gru.TRANSPOSED
      self.assertEqual(gru.few_row_layout(_BATCH, _UNITS), gru.TRANSPOSED)
      os.environ[gru.LAYOUT_ENV] = 'sideways'
      with self.assertRaisesRegex(ValueError, 'TFF_FLARE_GRU_LAYOUT.*plain'):
        gru.few_row_layout(_BATCH, _UNITS)

  def test_reset_states_starts_from_zero(self):
    model = _model(gru.GRU)
    first = model(self.batches[0])
    model(self.batches[1])
    model.reset_states()
    self.assertAllClose(model(self.batches[0]), first)

  def test_other_configurations_are_keras_own(self):
    # reset_after=True is not the authors' GRU: Keras's path runs, with Keras's result.
    x = self.batches[0]
    ours = tf.keras.Sequential(
        [tf.keras.layers.Input((_STEPS, _FEATURES)),
         gru.GRU(_UNITS, kernel_initializer='ones')])
    keras = tf.keras.Sequential([
        tf.keras.layers.Input((_STEPS, _FEATURES)),
        tf.keras.layers.GRU(_UNITS, kernel_initializer='ones')
    ])
    ours.set_weights(keras.get_weights())
    self.assertAllClose(ours(x), keras(x))
    self.assertFalse(ours.layers[0]._takes_whole_sequences(None, None))  # pylint: disable=protected-access

  def test_the_authors_model_keeps_its_variables(self):
    ours = models.shakespeare_gru(seed=0, units=8)
    keras = models.shakespeare_gru(seed=0, units=8, layer=tf.keras.layers.GRU)
    self.assertEqual([(v.name.split('/', 1)[-1], v.shape) for v in ours.trainable_variables],
                     [(v.name.split('/', 1)[-1], v.shape) for v in keras.trainable_variables])
    for mine, theirs in zip(ours.trainable_variables, keras.trainable_variables):
      self.assertAllEqual(mine, theirs)
    x = tf.constant(np.random.default_rng(1).integers(0, 86, (8, 100)), tf.int64)
    self.assertAllClose(ours(x), keras(x), atol=1e-5)


if __name__ == '__main__':
  tf.test.main()
