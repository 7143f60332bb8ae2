"""Tests of `tff_flare.algorithms.selection`: exactly `top_k` and `NthElement`, ties included."""

import os
import shutil

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tff_flare.algorithms import selection


def _cases():
  rng = np.random.default_rng(0)
  normal = np.abs(rng.normal(size=(700, 300))).astype(np.float32)
  ties = np.round(normal * 4) / 4  # Few distinct values: ties at every cut.
  sparse = normal * (rng.uniform(size=normal.shape) < 0.3)  # 70 % exact zeros.
  heavy = (np.abs(rng.standard_cauchy(size=(2000, 50)))).astype(np.float32)
  return dict(normal=normal,
              ties=ties.astype(np.float32),
              sparse=sparse.astype(np.float32),
              heavy=heavy)


class KthLargestTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters((name, name) for name in _cases())
  def test_equals_top_k(self, name):
    magnitudes = tf.constant(_cases()[name])
    flat = tf.reshape(magnitudes, [-1])
    for k in (1, 2, 7, 169, 400):
      expected = tf.math.top_k(flat, k=k).values[-1]
      self.assertEqual(float(selection.kth_largest(magnitudes, k)),
                       float(expected),
                       msg=f'{name} k={k}')

  def test_all_equal_rows_and_a_tensor_k(self):
    magnitudes = tf.ones([500, 200])
    self.assertEqual(float(selection.kth_largest(magnitudes, 3)), 1.0)
    flat = tf.reshape(tf.constant(_cases()['normal']), [-1])
    self.assertEqual(float(selection.kth_largest(flat, tf.constant(5))),
                     float(tf.math.top_k(flat, k=5).values[-1]))


class KthSmallestTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters((name, name) for name in _cases())
  def test_equals_nth_element(self, name):
    values = tf.reshape(tf.constant(_cases()[name]), [-1])
    n = int(values.shape[0])
    for index in (0, 1, n // 4, n // 2, (n - 1) // 2, n - 2, n - 1):
      expected = tf.raw_ops.NthElement(input=values, n=index, reverse=False)
      self.assertEqual(float(selection.kth_smallest(values, index)),
                       float(expected),
                       msg=f'{name} index={index}')

  def test_a_misleading_sample_falls_back_to_the_full_selection(self):
    n = 1 << 17
    values = np.arange(n, dtype=np.float32)
    values[::n >> 15] += 1e6  # Every sampled entry is huge: the bracket misses the median.
    values = tf.constant(values)
    self.assertEqual(float(selection.kth_smallest(values, n // 2)),
                     float(tf.raw_ops.NthElement(input=values, n=n // 2, reverse=False)))


class NativeKernelsTest(tf.test.TestCase, parameterized.TestCase):
  """The compiled kernels (`make kernels`) give the TensorFlow ops' values, exactly."""

  def setUp(self):
    super().setUp()
    if selection.native_ops() is None:
      compiler = shutil.which(os.environ.get('CXX', 'c++')) or shutil.which('g++')
      if compiler is None:  # The README's install without a C++ compiler: TF ops only.
        self.skipTest(f'{selection.NATIVE_LIBRARY} is not built and there is no C++ compiler.')
      self.fail(f'{selection.NATIVE_LIBRARY} is not built although {compiler} is here: run '
                '`make kernels` (make install builds it).')

  def _both(self, fn, *args):
    with selection.native_kernels():
      native = tf.function(fn)(*args)
    plain = tf.function(fn)(*args)
    return native, plain

  @parameterized.named_parameters((name, name) for name in _cases())
  def test_same_values_as_tensorflow(self, name):
    x = tf.constant(_cases()[name]) * tf.constant(
        np.where(np.random.default_rng(1).uniform(size=_cases()[name].shape) < 0.5, -1.0,
                 1.0).astype(np.float32))  # Signed entries.
    n = int(np.prod(x.shape))
    for k in (1, 3, 169):
      native, plain = self._both(lambda t, k=k: selection.kth_largest_magnitude(t, k), x)
      self.assertEqual(float(native), float(plain), msg=f'{name} k={k}')
    for index in (0, n // 2, n - 1):
      native, plain = self._both(lambda t, i=index: selection.kth_smallest_magnitude(t, i), x)
      self.assertEqual(float(native), float(plain), msg=f'{name} index={index}')
    threshold = tf.constant(float(np.median(np.abs(_cases()[name]))))
    native, plain = self._both(lambda t: selection.magnitude_mask(t, threshold), x)
    self.assertAllEqual(native, plain)
    native, plain = self._both(lambda t: selection.split_by_magnitude(t, threshold), x)
    for a, b in zip(native, plain):
      self.assertAllEqual(a, b)
    # Bit for bit, signs of zeros included.
    self.assertAllEqual(np.signbit(native[1]), np.signbit(plain[1]))

  def test_pull_same_values_as_tensorflow(self):
    rng = np.random.default_rng(2)
    w, s, a = (rng.normal(size=(600, 300)).astype(np.float32) for _ in range(3))
    w[0, :4] = s[0, :4] + a[0, :4]  # w - (s + a) = 0: sign 0.
    w[1, 0], a[1, 1], s[1, 2], w[1, 3] = np.nan, np.nan, np.inf, -np.inf  # NaN propagates.
    a[2, :3] = [0.0, -0.0, 0.5]  # Exactly at the threshold: not pulled.
    threshold, tau = tf.constant(0.5), tf.constant(0.03)
    native, plain = self._both(lambda w, s, a: selection.masked_sign_pull(w, s, a, threshold, tau),
                               *map(tf.constant, (w, s, a)))
    self.assertAllEqual(np.isnan(native), np.isnan(plain))
    self.assertTrue(np.isnan(native[1, 1]))
    self.assertAllEqual(np.nan_to_num(native), np.nan_to_num(plain))
    self.assertAllEqual(np.signbit(native), np.signbit(plain))  # Signs of zeros too.
    self.assertAllClose(np.unique(np.nan_to_num(native[2:])), [-0.03, 0.0, 0.03])

  def test_only_inside_the_block(self):
    x = tf.constant(_cases()['normal'])
    with selection.native_kernels():
      graph = tf.function(lambda t: selection.magnitude_mask(t, 0.5)).get_concrete_function(x).graph
    self.assertIn('MagnitudeMask', [op.type for op in graph.get_operations()])
    graph = tf.function(lambda t: selection.magnitude_mask(t, 0.5)).get_concrete_function(x).graph
    self.assertNotIn('MagnitudeMask', [op.type for op in graph.get_operations()])


if __name__ == '__main__':
  tf.test.main()
