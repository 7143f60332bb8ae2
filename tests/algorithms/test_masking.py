"""Tests of update masking and its survival measurement against numpy references."""

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_federated as tff

from tests import reference_numpy
from tests import tiny_models
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import masking

_NUM_FEATURES, _NUM_CLASSES = 20, 5
_MODEL_FN = tiny_models.softmax_model_fn(num_features=_NUM_FEATURES, num_classes=_NUM_CLASSES)
_OPTIMIZER = tff.learning.optimizers.build_sgdm(0.1)


def _client_data(num_clients=4):
  # Unequal sizes (8, 16, 24, 32 examples) so that example weighting matters.
  return [
      tiny_models.classification_dataset(k,
                                         num_examples=8 * (k + 1),
                                         batch_size=4,
                                         num_features=_NUM_FEATURES,
                                         num_classes=_NUM_CLASSES) for k in range(num_clients)
  ]


def _flat(tensors):
  return np.concatenate([np.asarray(t).ravel() for t in tensors])


# --- closed form S on hand-made deltas --------------------------------------------------


def _survival_of(deltas, weights):
  """S through `masking.survival_metrics` (the TF code the process runs), for flat deltas."""
  p = np.asarray(weights, np.float64) / np.sum(weights)
  sums = dict(weight=np.sum(weights),
              squared_weight=np.sum(np.square(weights)),
              weighted_squared_norm=sum(w**2 * d @ d for w, d in zip(weights, deltas)),
              delta_norm=sum(np.linalg.norm(d) for d in deltas),
              num_clients=float(len(deltas)))
  sums = {k: tf.constant(v, tf.float64) for k, v in sums.items()}
  mean = [tf.constant(sum(pk * d for pk, d in zip(p, deltas)))]
  return {k: float(v) for k, v in masking.survival_metrics(mean, sums, {}, 0.5).items()}


@pytest.mark.parametrize('weights', [[1.0] * 5, [1.0, 2.0, 3.0, 4.0, 10.0]])
def test_identical_deltas_reach_s_max(weights):
  delta = np.random.default_rng(0).normal(size=30)
  metrics = _survival_of([delta] * 5, weights)
  assert metrics['survival'] == pytest.approx(metrics['s_max'], rel=1e-12)
  assert metrics['s_max'] == pytest.approx(np.sum(weights)**2 / np.sum(np.square(weights)))
  assert metrics['survival_normalized'] == pytest.approx(1.0)


def test_orthogonal_equal_norm_deltas_give_one():
  deltas = list(3.0 * np.eye(6)[:5])
  metrics = _survival_of(deltas, [1.0] * 5)
  assert metrics['survival'] == pytest.approx(1.0, rel=1e-12)
  assert metrics['s_max'] == pytest.approx(5.0)


def test_opposing_deltas_fall_below_one():
  delta = np.random.default_rng(1).normal(size=30)
  metrics = _survival_of([delta, -0.8 * delta], [1.0, 1.0])
  assert metrics['survival'] < 1.0
  assert metrics['survival'] == pytest.approx(
      reference_numpy.survival([delta, -0.8 * delta], [1.0, 1.0]))
  # R_ind and R_sync by hand (the spec's formulas; (1 - q) / q = 1 at q = 0.5, p = 1/2):
  # sum p^2 |d|^2 = (1 + 0.64) |d|^2 / 4 and |sum p d|^2 = (0.2 / 2)^2 |d|^2.
  assert metrics['r_ind'] == pytest.approx(1.64 / 4 * delta @ delta, rel=1e-12)
  assert metrics['r_sync'] == pytest.approx(0.01 * delta @ delta, rel=1e-12)


# --- masks ----------------------------------------------------------------------------------


def test_synchronized_masks_are_shared_and_independent_masks_are_not():
  shapes = [tf.TensorShape([50, 20]), tf.TensorShape([20])]
  seed = tf.constant([7, 11], tf.int64)
  sync = [
      masking._masks_for(masking.MaskMode.SYNCHRONIZED, shapes, [True, True], 0.5, seed,
                         tf.constant(k, tf.int64), 0) for k in range(3)
  ]
  independent = [
      masking._masks_for(masking.MaskMode.INDEPENDENT, shapes, [True, True], 0.5, seed,
                         tf.constant(k, tf.int64), 0) for k in range(3)
  ]
  for k in (1, 2):
    assert all(np.array_equal(a, b) for a, b in zip(sync[0], sync[k]))
    assert not np.array_equal(independent[0][0], independent[k][0])
  # Reproducible from the seed; about q of the entries kept.
  again = masking._masks_for(masking.MaskMode.INDEPENDENT, shapes, [True, True], 0.5, seed,
                             tf.constant(1, tf.int64), 0)
  assert np.array_equal(again[0], independent[1][0])
  assert np.mean(_flat(independent[0])) == pytest.approx(0.5, abs=0.05)


def test_unmasked_tensors_pass_through():
  delta = [tf.ones([4]), tf.ones([3])]
  masks = [tf.constant([True, False, True, False]), None]
  out = masking.apply_masks(delta, masks, 0.5)
  np.testing.assert_array_equal(out[0], [2.0, 0.0, 2.0, 0.0])
  np.testing.assert_array_equal(out[1], [1.0, 1.0, 1.0])


# --- the process ----------------------------------------------------------------------------


@pytest.mark.parametrize('bad_q', [0.0, -0.1, 1.5, float('nan'), True])
def test_invalid_keep_probability_is_a_clear_error(bad_q):
  with pytest.raises(ValueError, match='keep.probability'):
    masking.build_masked_fedavg(_MODEL_FN,
                                keep_probability=bad_q,
                                mask_mode=masking.MaskMode.INDEPENDENT,
                                client_optimizer=_OPTIMIZER)


def test_unknown_mode_is_a_clear_error():
  with pytest.raises(ValueError, match='sometimes'):
    masking.build_masked_fedavg(_MODEL_FN,
                                keep_probability=0.5,
                                mask_mode='sometimes',
                                client_optimizer=_OPTIMIZER)


def _trained_weights(process, data, rounds):
  """Trainable weights after `rounds` rounds on `data` (clients `client_0`, ...)."""
  return tiny_models.train(process, data, rounds)[0]


@pytest.mark.parametrize('mode', list(masking.MaskMode))
def test_keep_all_equals_fedavg_bit_for_bit(mode):
  data = _client_data()
  masked = masking.build_masked_fedavg(_MODEL_FN,
                                       keep_probability=1.0,
                                       mask_mode=mode,
                                       client_optimizer=_OPTIMIZER)
  plain = fedavg.build_fedavg(_MODEL_FN, client_optimizer=_OPTIMIZER)
  for a, b in zip(_trained_weights(masked, data, 3), _trained_weights(plain, data, 3)):
    np.testing.assert_array_equal(a, b)


def test_weighted_keep_all_equals_tff_weighted_fedavg():
  data = _client_data()
  masked = masking.build_masked_fedavg(_MODEL_FN,
                                       keep_probability=1.0,
                                       mask_mode=masking.MaskMode.SYNCHRONIZED,
                                       client_optimizer=_OPTIMIZER,
                                       client_weighting=tff.learning.ClientWeighting.NUM_EXAMPLES)
  reference = tff.learning.algorithms.build_weighted_fed_avg(
      _MODEL_FN,
      client_optimizer_fn=_OPTIMIZER,
      server_optimizer_fn=tff.learning.optimizers.build_sgdm(1.0))
  state = reference.initialize()
  for _ in range(2):
    state = reference.next(state, data).state
  for a, b in zip(_trained_weights(masked, data, 2), reference.get_model_weights(state).trainable):
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


def _client_deltas(data):
  """Each client's delta after one round from the initial model (plain FedAvg, numpy)."""
  deltas = []
  for dataset in data:
    process = fedavg.build_fedavg(_MODEL_FN, client_optimizer=_OPTIMIZER)
    state = process.initialize()
    before = _flat(process.get_model_weights(state).trainable)
    after = _flat(
        process.get_model_weights(tiny_models.next_round(process, state,
                                                         [dataset]).state).trainable)
    deltas.append(after - before)
  return deltas


@pytest.mark.parametrize('weighting', list(tff.learning.ClientWeighting))
def test_closed_form_matches_numpy_and_empirical_variance_agrees(weighting):
  data = _client_data()
  q = 0.8
  process = masking.build_masked_fedavg(_MODEL_FN,
                                        keep_probability=q,
                                        mask_mode=masking.MaskMode.INDEPENDENT,
                                        client_optimizer=_OPTIMIZER,
                                        client_weighting=weighting,
                                        num_mask_draws=200,
                                        seed=3)
  output = tiny_models.next_round(process, process.initialize(), data)
  survival = output.metrics['aggregator']['survival']

  deltas = _client_deltas(data)
  weights = ([8.0, 16.0, 24.0, 32.0]
             if weighting == tff.learning.ClientWeighting.NUM_EXAMPLES else [1.0] * 4)
  p = np.asarray(weights) / np.sum(weights)
  mean = sum(pk * d for pk, d in zip(p, deltas))
  sum_p2_norm2 = sum(pk**2 * d @ d for pk, d in zip(p, deltas))
  assert survival['r_ind'] == pytest.approx((1 - q) / q * sum_p2_norm2, rel=1e-5)
  assert survival['r_sync'] == pytest.approx((1 - q) / q * mean @ mean, rel=1e-5)
  assert survival['survival'] == pytest.approx(reference_numpy.survival(deltas, weights), rel=1e-5)
  assert survival['s_max'] == pytest.approx(1 / np.sum(p**2))
  assert survival['mean_client_delta_norm'] == pytest.approx(np.mean(
      [np.linalg.norm(d) for d in deltas]),
                                                             rel=1e-5)
  # The actual masked aggregates, over 200 fresh draws per mode, agree with the closed form
  # within 4 standard errors; the two modes' variances differ by far more than that.
  for mode in ('ind', 'sync'):
    error = abs(survival[f'r_{mode}_empirical'] - survival[f'r_{mode}'])
    assert error < 4 * survival[f'r_{mode}_empirical_stderr'], mode
  assert abs(survival['r_ind'] - survival['r_sync']) > 8 * max(survival['r_ind_empirical_stderr'],
                                                               survival['r_sync_empirical_stderr'])


def test_masked_round_applies_the_mask_and_mode_matters():
  data = _client_data()
  weights = {}
  for mode in (masking.MaskMode.INDEPENDENT, masking.MaskMode.SYNCHRONIZED):
    process = masking.build_masked_fedavg(_MODEL_FN,
                                          keep_probability=0.3,
                                          mask_mode=mode,
                                          client_optimizer=_OPTIMIZER,
                                          seed=5)
    state = process.initialize()
    before = _flat(process.get_model_weights(state).trainable)
    after = _flat(
        process.get_model_weights(tiny_models.next_round(process, state, data).state).trainable)
    weights[mode] = after - before
  # Synchronized: one mask for all, so about 70% of the coordinates do not move at all;
  # independent: a coordinate stays only if all four clients dropped it (0.7**4 = 24%).
  sync_zero = np.mean(weights[masking.MaskMode.SYNCHRONIZED] == 0)
  independent_zero = np.mean(weights[masking.MaskMode.INDEPENDENT] == 0)
  assert sync_zero == pytest.approx(0.7, abs=0.1)
  assert independent_zero == pytest.approx(0.7**4, abs=0.1)
