"""Tests of `tff_flare.algorithms.process`: a builder's arguments checked against its signature."""

from absl.testing import parameterized
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import ef21
from tff_flare.algorithms import flare
from tff_flare.algorithms import masking

_OPTIMIZER = tff.learning.optimizers.build_sgdm(0.1)


def _flare(**kwargs):
  return flare.build_flare(tiny_models.softmax_model_fn(), client_optimizer=_OPTIMIZER, **kwargs)


def _masked(**kwargs):
  return masking.build_masked_fedavg(tiny_models.softmax_model_fn(),
                                     keep_probability=0.5,
                                     client_optimizer=_OPTIMIZER,
                                     **dict(dict(mask_mode='independent'), **kwargs))


def _ef21(**kwargs):
  return ef21.build_ef21(tiny_models.softmax_model_fn(),
                         keep_percent=10.0,
                         client_optimizer=_OPTIMIZER,
                         **dict(dict(total_clients=3), **kwargs))


class BuilderArgumentsTest(tf.test.TestCase, parameterized.TestCase):

  # Each was accepted (a string flag is true: a silently different run) or failed deep inside
  # Python or TensorFlow with a message that named no argument.
  @parameterized.named_parameters(
      ('a_flag_given_a_string', _flare, dict(restart_optimizer_after_reg_steps='no'), ValueError,
       'restart_optimizer_after_reg_steps must be True or False'),
      ('another_flag', _ef21, dict(dense_state_shortcut='yes'), ValueError,
       'dense_state_shortcut must be True or False'),
      ('a_predicate_not_a_function', _flare, dict(is_regularized='kernel'), ValueError,
       'is_regularized must be a function'),
      ('a_mask_predicate', _masked, dict(is_masked=3), ValueError, 'is_masked must be a function'),
      ('a_seed_given_a_float', _masked, dict(seed=0.5), ValueError, 'seed must be an int'),
      ('a_seed_past_int32', _masked, dict(seed=2**70), ValueError, 'seed must be an int below'),
      ('a_population_past_int32', _ef21, dict(total_clients=2**40), ValueError,
       'total_clients must be an int below'),
      ('a_server_optimizer_not_tffs', _flare, dict(server_optimizer='sgd'), ValueError,
       'server_optimizer must be a tff.learning.optimizers.Optimizer'),
      ('a_client_optimizer_not_tffs',
       lambda **k: flare.build_flare(tiny_models.softmax_model_fn(), **k),
       dict(client_optimizer=0.1), ValueError,
       'client_optimizer must be a tff.learning.optimizers.Optimizer'),
      ('an_aggregator_not_a_factory', _flare, dict(model_aggregator='mean'), ValueError,
       'model_aggregator must be a tff.aggregators factory or None'),
      ('an_unknown_mode', _masked, dict(mask_mode='bogus'), ValueError,
       'mask_mode must be one of none, independent, synchronized'),
      ('an_unknown_keyword', _flare, dict(taus=0.1), TypeError,
       "build_flare: got an unexpected keyword argument 'taus'"),
  )
  def test_refused_in_one_line_naming_the_argument(self, build, kwargs, error, message):
    with self.assertRaisesRegex(error, message) as raised:
      build(**kwargs)
    self.assertLen(str(raised.exception).splitlines(), 1)

  def test_numpy_numbers_and_enum_values_are_taken(self):
    process = _masked(seed=np.int64(3), num_mask_draws=np.int32(0), mask_mode='synchronized')
    self.assertEqual(process.build['arguments']['seed'], 3)


if __name__ == '__main__':
  tf.test.main()
