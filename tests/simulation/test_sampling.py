"""Tests of `tff_flare.simulation.sampling`: TFF's sampler and the authors' stream."""

import random

import tensorflow as tf

from tff_flare.simulation import sampling

_IDS = [f'client_{i}' for i in range(10)]


class SamplingTest(tf.test.TestCase):

  def test_uniform_is_a_seeded_function_of_the_round(self):
    sampler = sampling.build_client_sampler(_IDS, 3, seed=1)
    self.assertEqual(sampler(5), sampler(5))
    self.assertLen(set(sampler(5)), 3)
    self.assertNotEqual(sampler(5), sampler(6))

  def test_python_random_is_the_authors_stream_in_any_order_of_calls(self):
    rng = random.Random(0)
    expected = [[_IDS[i] for i in rng.sample(range(10), 3)] for _ in range(41)]
    sampler = sampling.build_client_sampler(_IDS, 3, seed=0, kind='python_random')
    self.assertEqual(sampler(40), expected[40])  # A resumed run starts late.
    self.assertEqual([sampler(r) for r in range(41)], expected)
    self.assertEqual(expected[0], ['client_6', 'client_9', 'client_0'])

  def test_everyone_when_all_take_part(self):
    for kind in sampling.SAMPLERS:
      self.assertEqual(sampling.build_client_sampler(_IDS, 10, 3, kind)(7), _IDS)

  def test_bad_input(self):
    with self.assertRaisesRegex(ValueError, r'clients_per_round must be in \[1, 2\]'):
      sampling.build_client_sampler(['a', 'b'], 3, seed=0)
    with self.assertRaisesRegex(ValueError, r'clients_per_round must be in'):
      sampling.build_client_sampler(['a', 'b'], 0, seed=0)
    with self.assertRaisesRegex(ValueError, 'Unknown client sampling .shuffled.'):
      sampling.build_client_sampler(['a', 'b'], 1, seed=0, kind='shuffled')


if __name__ == '__main__':
  tf.test.main()
