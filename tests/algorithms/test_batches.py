"""Tests of `tff_flare.algorithms.batches`: every batch, in the dataset's order, as tensors."""

import collections

import numpy as np
import tensorflow as tf

from tff_flare.algorithms import batches
from tff_flare.tasks import registry as tasks
from tff_flare.tasks import text


def _read(dataset: tf.data.Dataset) -> list:
  """The batches as `as_batches` gives them, read back one by one with `batch_at`."""

  @tf.function
  def read(dataset):
    client_batches = batches.as_batches(dataset)
    array = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
    labels = tf.TensorArray(tf.int64, size=0, dynamic_size=True, infer_shape=False)
    for i in tf.range(client_batches.num_steps):
      batch = batches.batch_at(client_batches, i)
      array = array.write(i, tf.cast(tf.reshape(batch['x'], [-1]), tf.float32))
      labels = labels.write(i, tf.cast(tf.reshape(batch['y'], [-1]), tf.int64))
    return client_batches.num_steps, array.concat(), labels.concat(), client_batches.sizes

  return read(dataset)


def _iterate(dataset: tf.data.Dataset) -> tuple[int, np.ndarray, np.ndarray, list[int]]:
  """The same, from iterating the dataset (the order local training used to take)."""
  elements = list(dataset)
  x = np.concatenate([np.reshape(np.asarray(e['x'], np.float32), [-1]) for e in elements])
  y = np.concatenate([np.reshape(np.asarray(e['y'], np.int64), [-1]) for e in elements])
  return len(elements), x, y, [len(e['y']) for e in elements]


def _image_client(num_examples, batch_size, epochs):
  rng = np.random.default_rng(0)
  data = tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=rng.integers(0, 256, size=(num_examples, 4, 4, 1), dtype=np.uint8),
                              y=rng.integers(0, 10, size=(num_examples, 1)).astype(np.int32)))
  return tasks.batch_client(data, batch_size, epochs).map(tasks.scale_batch)


class AsBatchesTest(tf.test.TestCase):

  def assert_same_batches(self, make_dataset):
    steps, x, y, sizes = _read(make_dataset())
    expected_steps, expected_x, expected_y, expected_sizes = _iterate(make_dataset())
    self.assertEqual(int(steps), expected_steps)
    self.assertAllEqual(sizes, expected_sizes)
    self.assertAllEqual(x, expected_x)
    self.assertAllEqual(y, expected_y)

  def test_batches_with_a_smaller_last_batch_over_epochs(self):
    # 3 epochs of 10 examples in batches of 4: 4, 4, 2, 4, 4, 2, 4, 4, 2.
    self.assert_same_batches(lambda: _image_client(10, 4, 3))
    self.assertAllEqual(_read(_image_client(10, 4, 3))[3], [4, 4, 2] * 3)

  def test_full_batch_and_one_batch(self):
    self.assert_same_batches(lambda: _image_client(10, 0, 2))
    self.assert_same_batches(lambda: _image_client(10, 10, 1))

  def test_reshuffling_character_batches_of_unknown_length(self):
    # The GRU's pipeline: an `unbatch` (unknown length) and a seeded reshuffle; a dataset
    # built anew gives its first permutation again, so both reads must see the same one.
    snippets = tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(snippets=[('To be, or not to be: that is the question. ' *
                                           40)[i:i + 300] for i in range(0, 1200, 300)]))

    def make():
      return text.character_batches(snippets, seed=7, batch_size=2).repeat(2)

    self.assertEqual(int(make().cardinality()), tf.data.UNKNOWN_CARDINALITY)
    self.assert_same_batches(make)
    first_epoch = [np.asarray(b['x']) for b in make()]
    self.assertNotAllEqual(first_epoch[0], first_epoch[len(first_epoch) // 2])  # Reshuffled.

  def test_static_batch_shape_is_kept(self):
    dataset = tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=tf.zeros([24, 5], tf.int64),
                                y=tf.zeros([24, 5], tf.int64))).batch(8, drop_remainder=True)

    @tf.function
    def first(dataset):
      batch = batches.batch_at(batches.as_batches(dataset), 0)
      self.assertEqual(batch['x'].shape.as_list(), [8, 5])  # Checked while tracing.
      return batch['x']

    self.assertAllEqual(first(dataset), np.zeros([8, 5]))

  def test_empty_dataset_has_no_steps(self):
    num_steps = tf.function(lambda dataset: batches.as_batches(dataset).num_steps)
    self.assertEqual(int(num_steps(_image_client(10, 4, 1).take(0))), 0)
    unknown_and_empty = _image_client(10, 4, 1).filter(lambda b: False)
    self.assertEqual(int(num_steps(unknown_and_empty)), 0)

  def test_infinite_dataset_is_refused(self):
    with self.assertRaisesRegex(tf.errors.InvalidArgumentError, 'must be finite'):
      _read(_image_client(10, 4, 1).repeat())


if __name__ == '__main__':
  tf.test.main()
