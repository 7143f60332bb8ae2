"""Tests of `tff_flare.algorithms.sparsification`: the authors' kept counts (Q1, Q2)."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tff_flare.algorithms import sparsification

AUTHORS = sparsification.TopKRule.AUTHORS
EXACT = sparsification.TopKRule.EXACT
GLOBAL = sparsification.TopKRule.GLOBAL

# Spec §1.2: kept entries per tensor (no ties) for the CNN, by R.
CNN_SHAPES = [(5, 5, 1, 32), (32,), (5, 5, 32, 64), (64,), (1024, 512), (512,), (512, 10), (10,)]
CNN_KEPT = {
    0.0001: [1, 1, 1, 1, 2, 1, 1, 1],
    0.001: [1, 1, 2, 1, 6, 1, 1, 1],
    0.01: [1, 1, 6, 1, 53, 1, 2, 1],
    0.1: [2, 1, 52, 1, 525, 2, 6, 1],
}
CNN_TOTAL = {0.0001: 9, 0.001: 14, 0.01: 66, 0.1: 590}
# Spec §1.2, the FC network (784-4069-4069-4069-10).
FC_SHAPES = [(784, 4069), (4069,), (4069, 4069), (4069,), (4069, 4069), (4069,), (4069, 10), (10,)]
FC_KEPT = {
    0.0001: [4, 1, 18, 1, 18, 1, 1, 1],
    0.001: [33, 1, 167, 1, 167, 1, 1, 1],
    0.01: [320, 1, 1657, 1, 1657, 1, 5, 1],
}
FC_TOTAL = {0.0001: 45, 0.001: 372, 0.01: 3643}


def _distinct_tensor(shape, seed):
  """Random values with distinct magnitudes (no ties at any cut)."""
  n = int(np.prod(shape))
  rng = np.random.default_rng(seed)
  magnitudes = rng.permutation(n).astype(np.float64) + 1.0
  signs = rng.choice([-1.0, 1.0], size=n)
  return tf.constant((signs * magnitudes / n).reshape(shape), tf.float32)


class AuthorsRuleTableTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.0001, 0.001, 0.01, 0.1)
  def test_cnn_kept_counts_match_spec(self, keep_percent):
    tensors = [_distinct_tensor(s, i) for i, s in enumerate(CNN_SHAPES)]
    sent = sparsification.sparsify(tensors, keep_percent).sent
    counts = [int(tf.math.count_nonzero(t)) for t in sent]
    self.assertEqual(counts, CNN_KEPT[keep_percent])
    self.assertEqual(sum(counts), CNN_TOTAL[keep_percent])
    self.assertEqual(int(sparsification.count_nonzero(sent)), CNN_TOTAL[keep_percent])

  @parameterized.parameters(0.0001, 0.001, 0.01)
  def test_fc_kept_counts_match_spec(self, keep_percent):
    counts = []
    for i, shape in enumerate(FC_SHAPES):
      sent = sparsification.sparsify([_distinct_tensor(shape, i)], keep_percent).sent
      counts.append(int(tf.math.count_nonzero(sent[0])))
      self.assertEqual(
          counts[-1],
          sparsification.kept_count_without_ties(int(np.prod(shape)), keep_percent, AUTHORS))
    self.assertEqual(counts, FC_KEPT[keep_percent])
    self.assertEqual(sum(counts), FC_TOTAL[keep_percent])

  def test_keeps_the_largest_magnitudes(self):
    x = tf.constant([0.1, -0.9, 0.3, 0.8, -0.2, 0.05, 0.0, 0.4, -0.6, 0.7])
    # n=10, R=25: k = 2.5 -> rne 2 -> k' = 4 -> the 3 largest magnitudes survive.
    sent, residual, _ = sparsification.sparsify([x], 25.0)
    self.assertAllEqual(sent[0], np.float32([0, -0.9, 0, 0.8, 0, 0, 0, 0, 0, 0.7]))
    self.assertAllEqual(residual[0], np.float32([0.1, 0, 0.3, 0, -0.2, 0.05, 0, 0.4, -0.6, 0]))


class AuthorsRuleTiesTest(tf.test.TestCase):
  # n = 10 and R = 1: k = 0.1, rne(k) = 0, k' = 2 (keep the single largest, without ties).

  def test_all_equal_top_magnitudes_send_nothing(self):
    x = tf.constant([5.0, 5.0, 5.0, 1.0, 0, 0, 0, 0, 0, 0])
    sent, residual, _ = sparsification.sparsify([x], 1.0)
    self.assertAllEqual(sent[0], np.zeros(10))
    self.assertAllEqual(residual[0], x)

  def test_tie_below_the_top_keeps_only_the_top(self):
    x = tf.constant([5.0, -4.0, 4.0, 1.0, 0, 0, 0, 0, 0, 0])
    sent = sparsification.sparsify([x], 1.0).sent
    self.assertAllEqual(sent[0], [5.0, 0, 0, 0, 0, 0, 0, 0, 0, 0])

  def test_fewer_nonzeros_than_the_cut_sends_all_nonzeros(self):
    x = tf.constant([0, 0, -3.0, 0, 0, 0, 0, 0, 0, 0])
    sent, residual, _ = sparsification.sparsify([x], 1.0)
    self.assertAllEqual(sent[0], x)
    self.assertAllEqual(residual[0], np.zeros(10))

  def test_bias_of_ten_keeps_one_at_tiny_keep_percent(self):
    x = _distinct_tensor((10,), 3)
    sent = sparsification.sparsify([x], 0.001).sent
    self.assertEqual(int(tf.math.count_nonzero(sent[0])), 1)
    self.assertEqual(float(tf.reduce_max(tf.abs(sent[0]))), float(tf.reduce_max(tf.abs(x))))


class ExactRuleTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((1000, 1.0, 10), (1000, 0.001, 1), (51200, 0.01, 5), (10, 100.0, 10),
                            (10, 45.0, 4), (7, 50.0, 4))
  def test_keeps_exactly_k(self, n, keep_percent, expected):
    x = _distinct_tensor((n,), 0)
    sent = sparsification.sparsify([x], keep_percent, EXACT).sent
    self.assertEqual(int(tf.math.count_nonzero(sent[0])), expected)
    self.assertEqual(sparsification.exact_keep_count(n, keep_percent), expected)
    kept = np.sort(np.abs(sent[0].numpy()))[-expected:]
    self.assertAllEqual(kept, np.sort(np.abs(x.numpy()))[-expected:])

  def test_keeps_exactly_k_with_ties(self):
    x = tf.constant([5.0, 5.0, 5.0, 1.0, 0, 0, 0, 0, 0, 0])
    sent = sparsification.sparsify([x], 20.0, EXACT).sent  # k = 2
    self.assertEqual(int(tf.math.count_nonzero(sent[0])), 2)


class GlobalRuleTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.001, 0.1, 1.0, 10.0, 37.5, 100.0)
  def test_keeps_the_k_largest_of_the_whole_update(self, keep_percent):
    from tests import reference_numpy  # pylint: disable=g-import-not-at-top
    shapes = [(40, 30), (30,), (3, 3, 2, 4), (10,)]
    x = [_distinct_tensor(s, i) * (i + 1) for i, s in enumerate(shapes)]
    split = sparsification.sparsify(x, keep_percent, GLOBAL)
    d = sum(int(np.prod(s)) for s in shapes)  # 1,342 entries.
    k = max(1, int(np.round(keep_percent / 100 * d)))
    self.assertEqual(int(split.num_sent), k)
    expected = reference_numpy.global_topk([t.numpy() for t in x], keep_percent)
    for ours, theirs in zip(split.sent, expected):
      self.assertAllEqual(ours, theirs)

  def test_a_small_tensor_gets_no_entry_of_its_own(self):
    # Per tensor, the authors' rule sends one entry of every bias whatever R; globally a bias
    # of small entries sends none (the density is k / d, down to 1 / d).
    kernel = _distinct_tensor((100, 10), 0)
    bias = tf.range(1.0, 11.0) * 1e-6  # Distinct: the authors' rule drops ties.
    sent = sparsification.sparsify([kernel, bias], 0.1, GLOBAL).sent
    self.assertEqual(int(tf.math.count_nonzero(sent[1])), 0)
    self.assertEqual(int(tf.math.count_nonzero(sent[0])), 1)
    self.assertEqual(
        int(tf.math.count_nonzero(sparsification.sparsify([kernel, bias], 0.1, AUTHORS).sent[1])),
        1)

  def test_ties_go_to_the_earlier_entry(self):
    sent = sparsification.sparsify([tf.ones([3]), tf.ones([2])], 40.0, GLOBAL).sent  # k = 2
    self.assertAllEqual(sent[0], [1.0, 1.0, 0.0])
    self.assertAllEqual(sent[1], [0.0, 0.0])

  def test_a_round_varying_keep_percent_is_refused(self):
    with self.assertRaisesRegex(TypeError, "authors' rule"):
      sparsification.sparsify([tf.ones([3])], tf.constant(10.0), GLOBAL)

  @parameterized.parameters('authors', 'exact', 'global', GLOBAL)
  def test_a_rule_by_value(self, rule):
    self.assertIsInstance(sparsification.as_rule(rule), sparsification.TopKRule)
    sparsification.TOPK_RULE.check(sparsification.as_rule(rule).value)

  @parameterized.parameters('Global', 'per_tensor', 1, None)
  def test_an_unknown_rule_is_refused(self, rule):
    with self.assertRaisesRegex(ValueError, 'topk_rule must be one of authors, exact, global'):
      sparsification.TOPK_RULE.check(rule)


class SentPlusResidualTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.product(rule=[AUTHORS, EXACT, GLOBAL], keep_percent=[0.01, 1.0, 30.0, 70.0])
  def test_partition_is_exact(self, rule, keep_percent):
    shapes = [(7, 13), (13,), (3, 3, 2, 4)]
    x = [tf.random.stateless_normal(s, seed=[i, 1]) for i, s in enumerate(shapes)]
    sent, residual, _ = sparsification.sparsify(x, keep_percent, rule)
    for xi, si, ri in zip(x, sent, residual):
      self.assertAllEqual(si + ri, xi)
      self.assertAllEqual(si * ri, tf.zeros_like(xi))


class ValidationTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(0.0, -1.0, 100.5, float('nan'))
  def test_keep_percent_out_of_range(self, keep_percent):
    with self.assertRaisesRegex(ValueError, 'keep_percent must be in'):
      sparsification.validate_keep_percent(keep_percent)

  def test_too_large_for_a_tensor_under_the_authors_rule(self):
    # n = 10, R = 95: k = 9.5 -> rne 10 -> k' = 12 > 10; the authors' code would crash.
    with self.assertRaisesRegex(ValueError, r'too large for bias.*12-th largest of 10'):
      sparsification.check_rule_fits([tf.TensorShape([10])], 95.0, AUTHORS, ['bias'])
    sparsification.check_rule_fits([tf.TensorShape([10])], 85.0, AUTHORS)  # k' = 10 fits.
    sparsification.check_rule_fits([tf.TensorShape([10])], 95.0, EXACT)
    with self.assertRaisesRegex(ValueError, 'too large'):
      sparsification.sparsify([tf.ones([10])], 100.0, AUTHORS)
    sent = sparsification.sparsify([tf.ones([10])], 100.0, EXACT).sent
    self.assertAllEqual(sent[0], tf.ones([10]))

  def test_encoding_bytes(self):
    self.assertEqual(int(sparsification.sparse_encoding_bytes(tf.constant(14))), 14 * 8)


if __name__ == '__main__':
  tf.test.main()
