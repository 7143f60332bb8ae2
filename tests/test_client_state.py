"""Tests of `tff_flare.client_state.ClientStateStore`."""

import collections

import numpy as np
import tensorflow as tf

from tff_flare import client_state


def _initial():
  return collections.OrderedDict(accumulator=[np.zeros((2, 3), np.float32),
                                              np.zeros((3,), np.float32)])


class ClientStateStoreTest(tf.test.TestCase):

  def test_new_client_gets_initial_state(self):
    store = client_state.ClientStateStore(_initial)
    self.assertNotIn('a', store)
    self.assertAllEqual(store.get('a')['accumulator'][0], np.zeros((2, 3)))
    self.assertEmpty(store)

  def test_update_only_touches_given_clients(self):
    store = client_state.ClientStateStore(_initial)
    new = collections.OrderedDict(accumulator=[np.ones((2, 3), np.float32),
                                               np.ones((3,), np.float32)])
    store.update(['a'], [new])
    self.assertAllEqual(store.get('a')['accumulator'][1], np.ones(3))
    self.assertAllEqual(store.get('b')['accumulator'][1], np.zeros(3))
    self.assertEqual(store.client_ids(), ['a'])

  def test_mismatched_structure_shape_dtype(self):
    store = client_state.ClientStateStore(_initial)
    bad_structure = collections.OrderedDict(accumulator=[np.zeros((2, 3), np.float32)])
    bad_shape = collections.OrderedDict(accumulator=[np.zeros((3, 2), np.float32),
                                                     np.zeros((3,), np.float32)])
    bad_dtype = collections.OrderedDict(accumulator=[np.zeros((2, 3), np.float64),
                                                     np.zeros((3,), np.float32)])
    for bad in (bad_structure, bad_shape, bad_dtype):
      with self.assertRaisesRegex(client_state.ClientStateMismatchError, "'a'"):
        store.update(['a'], [bad])
    self.assertNotIn('a', store)
    with self.assertRaisesRegex(client_state.ClientStateMismatchError, '2 client ids but 1'):
      store.update(['a', 'b'], [_initial()])

  def test_dict_round_trip(self):
    store = client_state.ClientStateStore(_initial)
    store.update(['x'], [_initial()])
    other = client_state.ClientStateStore(_initial)
    other.load_dict(store.as_dict())
    self.assertEqual(other.client_ids(), ['x'])


if __name__ == '__main__':
  tf.test.main()
