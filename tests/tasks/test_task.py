"""Tests of `tff_flare.tasks.task`: batching, and the step cap's reshuffled stream."""

import collections

import numpy as np
import tensorflow as tf

from tff_flare.tasks import task as task_lib


def _examples(n):
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(x=np.arange(n, dtype=np.int32), y=np.arange(n, dtype=np.int32) % 3))


class CappedClientTest(tf.test.TestCase):

  def test_exactly_steps_batches_of_the_batch_size(self):
    capped = task_lib.capped_client(_examples(1000), 8, 25, seed=3)
    self.assertEqual(int(capped.cardinality()), 25)  # Known: the client batches read it whole.
    sizes = [int(b['x'].shape[0]) for b in capped]
    self.assertEqual(sizes, [8] * 25)

  def test_the_stream_passes_over_every_example_once_per_pass(self):
    # 7 examples, 6 steps of 7 (crossing the passes' ends): 6 passes, each a permutation.
    stream = np.concatenate(
        [b['x'].numpy() for b in task_lib.capped_client(_examples(7), 5, 7, seed=1)])
    self.assertLen(stream, 35)
    passes = stream.reshape(5, 7)
    for one_pass in passes:
      self.assertCountEqual(one_pass.tolist(), range(7))
    self.assertGreater(len({tuple(p) for p in passes}), 1)  # Reshuffled at every pass.

  def test_a_new_permutation_every_round_the_same_in_every_run(self):

    def first_batch(round_num):
      capped = task_lib.capped_client(_examples(500), 10, 2, seed=task_lib.round_seed(0, round_num))
      return next(iter(capped))['x'].numpy()

    self.assertAllEqual(first_batch(4), first_batch(4))
    self.assertNotAllEqual(first_batch(4), first_batch(5))
    self.assertNotAllEqual(first_batch(0), np.arange(10))  # Shuffled, not the first ten.

  def test_full_batch_takes_every_example_each_step(self):
    capped = task_lib.capped_client(_examples(13), 0, 3, seed=0)
    batches = [b['x'].numpy() for b in capped]
    self.assertLen(batches, 3)
    for batch in batches:
      self.assertAllEqual(batch, np.arange(13))


class BatchClientTest(tf.test.TestCase):

  def test_epochs_repeat_and_full_batch(self):
    self.assertEqual([int(b['x'].shape[0]) for b in task_lib.batch_client(_examples(10), 4, 2)],
                     [4, 4, 2, 4, 4, 2])
    self.assertEqual([int(b['x'].shape[0]) for b in task_lib.batch_client(_examples(10), 0, 1)],
                     [10])


if __name__ == '__main__':
  tf.test.main()
