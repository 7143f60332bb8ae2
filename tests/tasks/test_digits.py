"""Tests of `tff_flare.tasks.digits`: the demo's real data and its client split."""

import numpy as np
import tensorflow as tf

from tff_flare.tasks import digits
from tff_flare.tasks import registry


class DigitsTest(tf.test.TestCase):

  def test_arrays_and_split(self):
    x_train, y_train, x_test, y_test = digits.load_arrays(seed=0)
    self.assertEqual(len(y_train) + len(y_test), 1797)
    self.assertEqual(len(y_test), 359)
    self.assertEqual(x_train.shape[1:], (64,))
    self.assertBetween(float(x_train.min()), 0.0, 0.0)
    self.assertBetween(float(x_train.max()), 1.0, 1.0)
    self.assertEqual(y_train.dtype, np.int32)
    task = registry.build_task('digits_demo', batch_size=1)
    data = task.train_data
    self.assertEqual(data.client_ids, [f'client_{i}' for i in range(10)])
    sizes = [len(list(data.create_tf_dataset_for_client(c))) for c in data.client_ids]
    self.assertEqual(sizes, [143] * 10)
    first = next(iter(data.create_tf_dataset_for_client('client_1')))
    self.assertAllEqual(first['x'][0], x_train[143])  # Contiguous slices in shuffled order.

  def test_seeded_shuffle(self):
    a = digits.load_arrays(seed=3)[1]
    b = digits.load_arrays(seed=3)[1]
    c = digits.load_arrays(seed=4)[1]
    self.assertAllEqual(a, b)
    self.assertNotAllEqual(a, c)

  def test_full_batch_over_two_epochs(self):
    data = registry.build_task('digits_demo', epochs=2).train_data
    batches = list(data.create_tf_dataset_for_client('client_0'))
    self.assertLen(batches, 2)  # One full batch per epoch.
    self.assertEqual([b['x'].shape[0] for b in batches], [143, 143])

  def test_partition_and_population_are_used(self):
    # A request the task cannot honour is an error, never ignored.
    task = registry.build_task('digits_demo',
                               total_clients=20,
                               num_clients=5,
                               partition='dirichlet',
                               alpha=0.05)
    self.assertLen(task.train_data.client_ids, 5)
    sizes = [
        sum(len(b['y'])
            for b in task.train_data.create_tf_dataset_for_client(c))
        for c in task.train_data.client_ids
    ]
    self.assertNotEqual(len(set(sizes)), 1)  # Dirichlet, not contiguous equal slices.
    labels = np.concatenate(
        [b['y'][:, 0] for b in task.train_data.create_tf_dataset_for_client('client_0')])
    self.assertLessEqual(len(set(labels.tolist())), 4)  # alpha 0.05: few classes a client.
    with self.assertRaisesRegex(ValueError, 'exceeds total_clients'):
      registry.build_task('digits_demo', total_clients=5, num_clients=10)


if __name__ == '__main__':
  tf.test.main()
