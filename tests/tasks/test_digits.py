"""Tests of `tff_flare.tasks.digits`: the demo's real data and its client split."""

import numpy as np
import tensorflow as tf

from tff_flare.tasks import digits


class DigitsTest(tf.test.TestCase):

  def test_arrays_and_split(self):
    x_train, y_train, x_test, y_test = digits.load_arrays(seed=0)
    self.assertEqual(len(y_train) + len(y_test), 1797)
    self.assertEqual(len(y_test), 359)
    self.assertEqual(x_train.shape[1:], (64,))
    self.assertBetween(float(x_train.min()), 0.0, 0.0)
    self.assertBetween(float(x_train.max()), 1.0, 1.0)
    self.assertEqual(y_train.dtype, np.int32)
    data = digits.federated_train_data(x_train, y_train, 10)
    self.assertEqual(data.client_ids, [f'client_{i}' for i in range(10)])
    sizes = [len(list(data.create_tf_dataset_for_client(c))) for c in data.client_ids]
    self.assertEqual(sizes, [143] * 10)
    first = next(iter(data.create_tf_dataset_for_client('client_1')))
    self.assertAllEqual(first['x'], x_train[143])  # Contiguous slices in shuffled order.

  def test_seeded_shuffle(self):
    a = digits.load_arrays(seed=3)[1]
    b = digits.load_arrays(seed=3)[1]
    c = digits.load_arrays(seed=4)[1]
    self.assertAllEqual(a, b)
    self.assertNotAllEqual(a, c)

  def test_full_batch_preprocess(self):
    x, y, _, _ = digits.load_arrays()
    data = digits.federated_train_data(x, y, 10).preprocess(
        lambda d: digits.preprocess(d, batch_size=0, epochs=2))
    batches = list(data.create_tf_dataset_for_client('client_0'))
    self.assertLen(batches, 1)
    self.assertEqual(batches[0]['x'].shape[0], 286)


if __name__ == '__main__':
  tf.test.main()
