"""Tests of `tff_flare.tasks.partitions`: disjoint, reproducible, and the skew that was asked."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf

from tff_flare.tasks import partitions

LABELS = np.repeat(np.arange(10), 500)  # 5,000 examples, 10 balanced classes.


def _label_histograms(parts):
  return np.stack([np.bincount(LABELS[p], minlength=10) for p in parts])


class PartitionTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters(('contiguous', {}), ('iid', {}), ('dirichlet', {
      'alpha': 0.5
  }), ('quantity_skew', {
      'ratio': 100.0
  }), ('class_imbalance', {
      'dominant_fraction': 0.8
  }))
  def test_disjoint_and_reproducible(self, kind, options):
    parts = partitions.build(kind, LABELS, 20, seed=3, **options)
    self.assertLen(parts, 20)
    everything = np.concatenate(parts)
    self.assertLen(np.unique(everything), len(everything))  # Disjoint.
    self.assertTrue(np.all((everything >= 0) & (everything < len(LABELS))))
    again = partitions.build(kind, LABELS, 20, seed=3, **options)
    for a, b in zip(parts, again):
      self.assertAllEqual(a, b)
    if kind not in ('contiguous', 'quantity_skew'):
      other = partitions.build(kind, LABELS, 20, seed=4, **options)
      self.assertFalse(all(np.array_equal(a, b) for a, b in zip(parts, other)))

  def test_contiguous_is_the_authors_split(self):
    # MNIST: 60,000 examples over 100 clients of 600; client i holds [600 i, 600 (i + 1)).
    parts = partitions.contiguous(60_000, 100)
    self.assertAllEqual(parts[0], np.arange(600))
    self.assertAllEqual(parts[9], np.arange(5400, 6000))
    self.assertEqual([len(p) for p in parts], [600] * 100)
    # CIFAR: 4 clients of floor(50000 / 4) = 12,500.
    self.assertAllEqual(partitions.contiguous(50_000, 4)[1], np.arange(12_500, 25_000))
    with self.assertRaisesRegex(ValueError, 'need'):
      partitions.contiguous(100, 10, size=11)

  def test_iid_covers_everything_with_balanced_labels(self):
    parts = partitions.iid(len(LABELS), 10, seed=0)
    self.assertLen(np.concatenate(parts), len(LABELS))
    self.assertLess(_label_histograms(parts).std(axis=1).mean(), 15)

  def test_dirichlet_skew_grows_as_alpha_shrinks(self):

    def mean_max_share(alpha):
      hist = _label_histograms(partitions.dirichlet(LABELS, 10, alpha, seed=0))
      return np.mean(hist.max(axis=1) / hist.sum(axis=1))

    shares = [mean_max_share(a) for a in (100.0, 1.0, 0.1)]
    self.assertLess(shares[0], 0.2)  # Near-uniform: ~1/10 per class.
    self.assertGreater(shares[2], 0.6)  # One class dominates most clients.
    self.assertLess(shares[0], shares[1])
    self.assertLess(shares[1], shares[2])
    parts = partitions.dirichlet(LABELS, 10, 1.0, seed=0)
    self.assertLen(np.concatenate(parts), len(LABELS))  # Covers every example.

  def test_quantity_skew_ratio(self):
    parts = partitions.quantity_skew(50_000, 100, 100.0, seed=0)
    sizes = np.array([len(p) for p in parts])
    self.assertBetween(sizes.max() / sizes.min(), 95.0, 105.0)
    self.assertLessEqual(sizes.sum(), 50_000)
    self.assertGreater(sizes.sum(), 0.95 * 50_000)  # Rounding leaves a few examples out.
    with self.assertRaisesRegex(ValueError, 'ratio'):
      partitions.quantity_skew(100, 10, 0.5, seed=0)

  def test_class_imbalance_dominant_share(self):
    parts = partitions.class_imbalance(LABELS, 10, 0.8, seed=0, size=200)
    hist = _label_histograms(parts)
    self.assertAllEqual(hist.argmax(axis=1), np.arange(10))
    self.assertAllEqual(hist.max(axis=1), [160] * 10)

  def test_bad_input(self):
    with self.assertRaisesRegex(ValueError, 'Unknown partition'):
      partitions.build('random', LABELS, 10)
    with self.assertRaisesRegex(
        ValueError, r'^total_clients \(the clients the data are split over\) must be in '
        r'\[1, 5\] \(the number of examples\), got 10\.$'):  # Was named num_clients.
      partitions.iid(5, 10, seed=0)
    with self.assertRaisesRegex(ValueError, 'alpha'):
      partitions.dirichlet(LABELS, 10, 0.0, seed=0)
    # One-hot labels were flattened: C N labels, partitions of examples that do not exist.
    one_hot = np.eye(10)[LABELS]
    for kind in ('contiguous', 'dirichlet', 'class_imbalance'):
      with self.assertRaisesRegex(ValueError, r'^labels must be class indices of shape \[N\] '
                                  r'\(or \[N, 1\]\), got shape \(\d+, 10\)\.$',
                                  msg=kind):
        partitions.build(kind, one_hot, 10)
    for column, vector in zip(partitions.build('dirichlet', LABELS[:, None], 10),
                              partitions.build('dirichlet', LABELS, 10)):
      np.testing.assert_array_equal(column, vector)  # Keras's [N, 1] CIFAR labels pass.

  def test_to_client_data(self):
    x = np.arange(10, dtype=np.float32)[:, None]
    data = partitions.to_client_data({'x': x, 'y': x}, [np.array([0, 1]), np.array([5])])
    self.assertEqual(data.client_ids, ['client_0', 'client_1'])
    values = [float(e['x'][0]) for e in data.create_tf_dataset_for_client('client_1')]
    self.assertEqual(values, [5.0])


if __name__ == '__main__':
  tf.test.main()
