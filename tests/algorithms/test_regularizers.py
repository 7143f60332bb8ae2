"""Tests of `tff_flare.algorithms.regularizers`: masks, penalties and their gradients by hand."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tff_flare.algorithms import regularizers


class PercentileMaskTest(tf.test.TestCase, parameterized.TestCase):

  def test_median_mask_by_hand(self):
    # |a| sorted: 0.1 0.2 0.3 0.5 0.7; n=5, t=50 -> index rne(2.0)=2 -> threshold 0.3.
    a = tf.constant([-0.5, 0.1, 0.3, -0.7, 0.2])
    self.assertAllEqual(regularizers.percentile_mask(a, 50.0), [1, 0, 0, 1, 0])

  def test_entry_equal_to_threshold_is_not_masked(self):
    # n=4, t=50: index rne(1.5) = 2 (half to even) -> threshold is the 3rd smallest, 0.3.
    a = tf.constant([0.3, 0.1, 0.3, 0.4])
    self.assertEqual(regularizers.percentile_index(4, 50.0), 2)
    self.assertAllEqual(regularizers.percentile_mask(a, 50.0), [0, 0, 0, 1])

  def test_bankers_rounding_of_the_index(self):
    # n=6: (n-1)*0.5 = 2.5 -> rne 2; n=8: 3.5 -> rne 4.
    self.assertEqual(regularizers.percentile_index(6, 50.0), 2)
    self.assertEqual(regularizers.percentile_index(8, 50.0), 4)
    self.assertEqual(regularizers.percentile_index(8, 0.0), 0)
    self.assertEqual(regularizers.percentile_index(8, 100.0), 7)

  def test_zero_accumulator_gives_empty_mask(self):
    self.assertAllEqual(regularizers.percentile_mask(tf.zeros([3, 4]), 50.0), tf.zeros([3, 4]))

  def test_mostly_zeros_masks_only_strictly_larger(self):
    a = tf.constant([0.0, 0.0, 0.0, 0.0, 0.0, 0.2, -0.4])
    self.assertAllEqual(regularizers.percentile_mask(a, 50.0), [0, 0, 0, 0, 0, 1, 1])

  @parameterized.parameters((10, 5), (32, 15), (64, 31), (512, 255), (800, 399), (4069, 2034))
  def test_masked_counts_of_spec(self, n, expected):
    a = tf.constant(np.random.default_rng(n).permutation(n) + 1.0, tf.float32)
    self.assertEqual(int(tf.reduce_sum(regularizers.percentile_mask(a, 50.0))), expected)

  def test_matches_a_sort_on_a_matrix(self):
    a = tf.random.stateless_normal([17, 9], seed=[3, 4])
    flat = np.sort(np.abs(a.numpy()).ravel())
    threshold = flat[int(np.round((flat.size - 1) * 0.3))]
    self.assertAllEqual(regularizers.percentile_mask(a, 30.0),
                        (np.abs(a.numpy()) > threshold).astype(np.float32))

  def test_unregularized_tensors_get_zero_masks(self):
    a = [tf.constant([1.0, 2.0, 3.0]), tf.constant([1.0, 2.0, 3.0])]
    masks = regularizers.flare_masks(a, [True, False], 50.0)
    self.assertAllEqual(masks[0], [0, 0, 1])
    self.assertAllEqual(masks[1], [0, 0, 0])

  @parameterized.parameters(-1.0, 100.1)
  def test_invalid_percentile(self, t):
    with self.assertRaisesRegex(ValueError, 'mask_percentile'):
      regularizers.validate_percentile(t)


class FlarePenaltyTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.w = [tf.constant([0.5, -1.0, 2.0]), tf.constant([[1.0, 0.0], [0.0, 3.0]])]
    self.s = [tf.constant([0.0, -1.0, 1.0]), tf.constant([[1.0, 1.0], [1.0, 1.0]])]
    self.a = [tf.constant([1.0, 0.5, 0.0]), tf.constant([[0.0, -2.0], [0.5, 1.0]])]
    self.targets = [s + a for s, a in zip(self.s, self.a)]
    self.masks = [tf.constant([1.0, 0.0, 1.0]), tf.constant([[0.0, 1.0], [1.0, 1.0]])]
    self.tau = tf.constant(0.25)

  def test_value_by_hand(self):
    # targets: [1.0, -0.5, 1.0] and [[1, -1], [1.5, 2]].
    # masked |w - target|: |0.5-1| + |2-1| = 1.5 and |0+1| + |0-1.5| + |3-2| = 3.5.
    value = regularizers.flare_penalty(self.w, self.targets, self.masks, self.tau)
    self.assertAllClose(value, 0.25 * 5.0)

  def test_gradient_by_hand_and_by_autodiff(self):
    grads = regularizers.flare_penalty_gradient(self.w, self.targets, self.masks, self.tau)
    self.assertAllEqual(grads[0], [-0.25, 0.0, 0.25])
    self.assertAllEqual(grads[1], [[0.0, 0.25], [-0.25, 0.25]])
    variables = [tf.Variable(w) for w in self.w]
    with tf.GradientTape() as tape:
      value = regularizers.flare_penalty(variables, self.targets, self.masks, self.tau)
    for autodiff, closed_form in zip(tape.gradient(value, variables), grads):
      self.assertAllEqual(autodiff, closed_form)

  def test_gradient_is_zero_at_the_target(self):
    grads = regularizers.flare_penalty_gradient(self.targets, self.targets, self.masks, self.tau)
    for g in grads:
      self.assertAllEqual(g, tf.zeros_like(g))

  def test_first_step_gradient_is_minus_tau_mask_sign_a(self):
    # At w = s, the gradient is -tau * m * sign(a) (`docs/faithfulness.md`, FLARE's pull).
    grads = regularizers.flare_penalty_gradient(self.s, self.targets, self.masks, self.tau)
    for g, m, a in zip(grads, self.masks, self.a):
      self.assertAllEqual(g, -self.tau * m * tf.sign(a))


class ProximalPenaltyTest(tf.test.TestCase):

  def test_value_and_gradient(self):
    w = [tf.constant([1.0, 2.0]), tf.constant([3.0])]
    s = [tf.constant([0.0, 4.0]), tf.constant([0.0])]
    tau = tf.constant(0.5)
    # Only the first tensor is regularized: 0.5 * (1 + 4) = 2.5; gradient 2*0.5*(w - s).
    self.assertAllClose(regularizers.proximal_penalty(w, s, [True, False], tau), 2.5)
    grads = regularizers.proximal_penalty_gradient(w, s, [True, False], tau)
    self.assertAllEqual(grads[0], [1.0, -2.0])
    self.assertAllEqual(grads[1], [0.0])
    variables = [tf.Variable(x) for x in w]
    with tf.GradientTape() as tape:
      value = regularizers.proximal_penalty(variables, s, [True, False], tau)
    autodiff = tape.gradient(value, variables)
    self.assertAllEqual(autodiff[0], grads[0])


if __name__ == '__main__':
  tf.test.main()
