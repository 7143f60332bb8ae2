"""Tests of `tff_flare.algorithms.model_aggregators`: names to TFF factories, their checks.

The factories in a process: `tests/algorithms/test_composer.py::ModelAggregatorTest`; from the
flags through a run: `tests/experiment/test_runner.py::ModelAggregatorRunTest`.
"""

from absl.testing import parameterized
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import model_aggregators


class BuildTest(tf.test.TestCase, parameterized.TestCase):

  def test_mean_is_the_algorithms_own(self):
    self.assertIsNone(model_aggregators.build('mean'))

  @parameterized.parameters(('tff_mean', None), ('clipping', 0.5), ('zeroing', 0.5),
                            ('robust', None))
  def test_each_name_is_a_weighted_tff_factory(self, name, norm):
    self.assertIsInstance(model_aggregators.build(name, norm),
                          tff.aggregators.WeightedAggregationFactory)

  @parameterized.parameters(
      ('median', None, 'Unknown model aggregator .median.; known: mean, tff_mean'),
      ('clipping', None, 'needs aggregator_norm'), ('zeroing', -1.0, 'needs aggregator_norm'),
      ('clipping', float('inf'), 'needs aggregator_norm'),
      ('clipping', True, 'needs aggregator_norm'),
      ('robust', 1.0, 'applies to model_aggregator=clipping or zeroing only'))
  def test_bad_combinations_are_refused(self, name, norm, message):
    with self.assertRaisesRegex(ValueError, message):
      model_aggregators.build(name, norm)


if __name__ == '__main__':
  tf.test.main()
