"""Tests of `tff_flare.tasks.text`: the vocabulary and the authors' character pipeline."""

import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.tasks import text


def _snippets(*strings):
  return tf.data.Dataset.from_tensor_slices(
      collections.OrderedDict(snippets=[s.encode() for s in strings]))


class TextTest(tf.test.TestCase):

  def test_vocabulary(self):
    self.assertLen(text.VOCAB, 86)
    self.assertLen(set(text.VOCAB), 86)
    self.assertEqual(text.VOCAB[0], 'd')
    self.assertEqual(text.VOCAB.index('\n'), 62)
    self.assertEqual(text.VOCAB[-1], '\r')

  def test_ids_with_out_of_vocabulary_bytes(self):
    ids = text.to_ids(tf.constant('dh~é'.encode()))
    # 'd' -> 0, 'h' -> 1, '~' is not in the vocabulary -> 0, 'é' is two bytes -> 0, 0.
    self.assertAllEqual(ids, [0, 1, 0, 0, 0])

  def test_batches_shift_by_one_and_drop_remainders(self):
    # 2 snippets concatenated: 1,700 characters -> 16 chunks of 101 -> 2 batches of 8.
    first = ''.join(text.VOCAB[i % 86] for i in range(1000))
    second = ''.join(text.VOCAB[(i + 1000) % 86] for i in range(700))
    batches = list(text.character_batches(_snippets(first, second), seed=1))
    self.assertLen(batches, 2)
    for batch in batches:
      self.assertEqual(batch['x'].shape, (8, 100))
      self.assertEqual(batch['x'].dtype, tf.int64)
      self.assertAllEqual(batch['x'][:, 1:], batch['y'][:, :-1])
      # The stream is 0, 1, 2, ... mod 86, so every target is the next id.
      self.assertAllEqual((batch['x'] + 1) % 86, batch['y'])

  def test_client_selection(self):
    long = ''.join(text.VOCAB[i % 86] for i in range(101 * 8 * 31))  # 31 batches.
    short = ''.join(text.VOCAB[i % 86] for i in range(101 * 8 * 30))  # 30 batches.
    data = tff.simulation.datasets.TestClientData({
        'b_long': collections.OrderedDict(snippets=[long.encode()]),
        'a_short': collections.OrderedDict(snippets=[short.encode()]),
        'c_long': collections.OrderedDict(snippets=[long.encode()])
    })
    self.assertEqual(text.select_clients(data, 10), ['b_long', 'c_long'])
    self.assertEqual(text.select_clients(data, 1), ['b_long'])
    stream = text.test_stream(data, max_batches_per_client=2)
    self.assertEqual(text.count_batches(stream), 6)
    self.assertEqual(np.shape(next(iter(stream))['y']), (8, 100))

  def test_a_full_test_stream_is_the_same_at_every_pass(self):
    # 31 batches and a remainder: a reshuffled pass drops other chunks and orders them anew.
    play = ''.join(text.VOCAB[i % 86] for i in range(101 * 8 * 31 + 101 * 3))
    data = tff.simulation.datasets.TestClientData(
        {'a': collections.OrderedDict(snippets=[play.encode()])})
    passes = lambda stream: [[b['x'].numpy() for b in stream] for _ in range(2)]
    fixed = passes(text.test_stream(data, seed=0, reshuffle=False))
    self.assertAllEqual(fixed[0], fixed[1])
    reshuffled = passes(text.test_stream(data, seed=0))
    self.assertNotAllEqual(np.concatenate(reshuffled[0]), np.concatenate(reshuffled[1]))


if __name__ == '__main__':
  tf.test.main()
