"""Update masking under federated averaging (`docs/masking.md`), composed as a TFF process.

After local training, client k holds `delta_k = w_k - w`. With keep probability `q` it sends
`(m * delta_k) / q` for a binary mask `m` (each coordinate kept with probability q); the server
averages with weights `p_k` (uniform `1/K`, or by example count) and applies
`w <- w + eta_s * sum_k p_k masked_delta_k` through a TFF optimizer (SGD, `eta_s = 1`).

Masks come from a stateless RNG, so no mask is ever transmitted. The server draws the round's
seed from its state and `tff.federated_broadcast`s it:
- `MaskMode.SYNCHRONIZED`: every client regenerates the same mask from the round seed;
- `MaskMode.INDEPENDENT`: a client folds its own key (its per-client input, `parts.client_key` of
  its id) into the round seed: its own mask;
- `MaskMode.NONE`: plain FedAvg.

Every round's metrics carry the survival measurement (`survival_metrics` documents it): the
closed-form masking variances R_ind and R_sync of the aggregate, the survival factor
`S = R_sync / R_ind`, its maximum `S_max = 1 / sum_k p_k**2`, delta norms, and, with
`num_mask_draws > 0`, the same variances measured on the actual masked aggregates of
`num_mask_draws` fresh mask draws per mode on the round's client deltas. The measurement
needs the unmasked mean delta at the server, which a deployment would not send; it is a
simulation instrument and does not touch the model update.
"""

import dataclasses
import collections
from collections.abc import Callable, Sequence
import enum
import functools
import math

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import process
from tff_flare.algorithms import sparsification


class MaskMode(enum.Enum):
  NONE = 'none'
  INDEPENDENT = 'independent'
  SYNCHRONIZED = 'synchronized'


# Draw index of the mask actually applied; the empirical draws use 1..num_mask_draws.
APPLIED_DRAW = 0


def validate_keep_probability(keep_probability: float) -> None:
  """Raises ValueError unless 0 < q <= 1."""
  if (not hyperparameters.is_number(keep_probability) or not math.isfinite(keep_probability) or
      not 0.0 < keep_probability <= 1.0):
    raise ValueError(f'keep probability q must be in (0, 1], got {keep_probability!r}.')


KEEP_PROBABILITY = hyperparameters.Knob(
    0.5, 'mask_*: the keep probability q of update '
    'masking, in (0, 1].', validate_keep_probability)
NUM_MASK_DRAWS = hyperparameters.Knob(
    0, 'mask_*: fresh mask draws per mode and round for the '
    'empirical variances.', hyperparameters.check_int('num_mask_draws', 0))


@dataclasses.dataclass(frozen=True)
class MaskingParams(hyperparameters.Params):
  """Update masking's knobs: q and the empirical draws (the aggregation weights p_k are the
  run's `client_weighting`)."""

  keep_probability: float = KEEP_PROBABILITY.field()
  num_mask_draws: int = NUM_MASK_DRAWS.field()


def _seed_for(round_seed: tf.Tensor, client_key: tf.Tensor | None, draw: int,
              tensor_index: int) -> tf.Tensor:
  """Stateless seed (int64[2]) of one tensor's mask; `client_key=None` is the shared mask."""
  seed = round_seed
  if client_key is not None:
    seed = tf.random.experimental.stateless_fold_in(seed, client_key)
  seed = tf.random.experimental.stateless_fold_in(seed, draw)
  return tf.random.experimental.stateless_fold_in(seed, tensor_index)


def keep_masks(shapes: Sequence[tf.TensorShape],
               keep_probability: float,
               round_seed: tf.Tensor,
               client_key: tf.Tensor | None,
               draw: int = APPLIED_DRAW) -> list[tf.Tensor]:
  """Boolean masks, one per shape, each entry True with probability q.

  Args:
    shapes: the tensors' shapes.
    keep_probability: q in (0, 1].
    round_seed: int64[2], the round's seed broadcast by the server.
    client_key: int64 scalar for the client's own (independent) mask, None for the round's
      shared (synchronized) mask.
    draw: which draw of the round (0 is the applied mask).
  """
  return [
      tf.less(tf.random.stateless_uniform(shape, _seed_for(round_seed, client_key, draw, i)),
              keep_probability) for i, shape in enumerate(shapes)
  ]


def apply_masks(delta: Sequence[tf.Tensor], masks: Sequence[tf.Tensor | None],
                keep_probability: float) -> list[tf.Tensor]:
  """`(m * delta) / q` per tensor; a None mask leaves its tensor unmasked."""
  return [
      d if m is None else tf.where(m, d / keep_probability, tf.zeros_like(d))
      for d, m in zip(delta, masks)
  ]


def _masks_for(mode, shapes, masked, keep_probability, round_seed, client_key, draw):
  if mode == MaskMode.NONE:
    return [None] * len(shapes)
  key = client_key if mode == MaskMode.INDEPENDENT else None
  masks = keep_masks(shapes, keep_probability, round_seed, key, draw)
  return [m if flag else None for m, flag in zip(masks, masked)]


def _squared_norm(tensors) -> tf.Tensor:
  # A sum of the stacked parts, not `tf.add_n` (see `sparsification.count_nonzero`).
  return tf.reduce_sum(tf.stack([tf.reduce_sum(tf.square(tf.cast(t, tf.float64))) for t in tensors
                                ]))


def _masking_noise_draws(delta, masked, keep_probability, round_seed, client_key, mode, num_draws):
  """Per tensor, `[num_draws, *shape]` noises `(m/q - 1) * delta` of the mode's fresh draws.

  One `tf.map_fn` over the draw indices 1..num_draws (int32, as a Python int draw index
  folds into the seed), so the graph does not grow with `num_draws`.
  """
  shapes = [d.shape for d in delta]

  def noise_of_draw(draw):
    masks = _masks_for(mode, shapes, masked, keep_probability, round_seed, client_key, draw)
    return [sent - d for sent, d in zip(apply_masks(delta, masks, keep_probability), delta)]

  return tf.map_fn(noise_of_draw,
                   tf.range(1, num_draws + 1, dtype=tf.int32),
                   fn_output_signature=[tf.TensorSpec(d.shape, d.dtype) for d in delta])


def _round_seed_schedule(seed: int) -> parts.RoundSchedule:
  """The server keeps `(round_num, seed)` and broadcasts the round's seed (int64[2])."""

  def initial_state():
    return collections.OrderedDict(round_num=tf.constant(0, tf.int64),
                                   seed=tf.constant(seed, tf.int64))

  def round_params(state):
    return collections.OrderedDict(
        round_seed=tf.random.stateless_uniform([2],
                                               seed=tf.stack([state['seed'], state['round_num']]),
                                               minval=None,
                                               maxval=None,
                                               dtype=tf.int64))

  def advance(state):
    return collections.OrderedDict(round_num=state['round_num'] + 1, seed=state['seed'])

  return parts.RoundSchedule(initial_state=initial_state,
                             round_params=round_params,
                             advance=advance)


def _mask_delta(delta, client_state, params, client_input, num_examples, *, mask_mode, masked,
                keep_probability, num_mask_draws, by_examples):
  """One client's masking of its delta, and its survival statistics."""
  del client_state  # Masked FedAvg keeps no client state.
  shapes = [d.shape for d in delta]
  round_seed = params['round_seed']
  masks = _masks_for(mask_mode, shapes, masked, keep_probability, round_seed, client_input,
                     APPLIED_DRAW)
  weight = tf.cast(num_examples, tf.float32) if by_examples else None
  weight32 = tf.constant(1.0, tf.float32) if weight is None else weight
  masked_delta = [d for d, flag in zip(delta, masked) if flag]
  squared_norm = _squared_norm(masked_delta or [tf.zeros([])])
  weight64 = tf.cast(weight32, tf.float64)
  noises = collections.OrderedDict()
  if num_mask_draws:
    for mode in (MaskMode.INDEPENDENT, MaskMode.SYNCHRONIZED):
      noises[mode.value] = [
          weight32 * n for n in _masking_noise_draws(delta, masked, keep_probability, round_seed,
                                                     client_input, mode, num_mask_draws)
      ]
  statistics = collections.OrderedDict(weighted_delta=[weight32 * d for d in masked_delta],
                                       sums=collections.OrderedDict(
                                           weight=weight64,
                                           squared_weight=tf.square(weight64),
                                           weighted_squared_norm=tf.square(weight64) * squared_norm,
                                           delta_norm=tf.sqrt(squared_norm),
                                           num_clients=tf.constant(1.0, tf.float64)),
                                       weighted_noises=noises)
  message = apply_masks(delta, masks, keep_probability)
  return parts.ClientOutput(
      message=message,
      weight=weight,
      statistics=statistics,
      counters=collections.OrderedDict(entries_sent=sparsification.count_nonzero(message)))


@process.records_build
def build_masked_fedavg(
    model_fn: model_facts.ModelFn,
    *,
    keep_probability: float,
    mask_mode: MaskMode,
    client_optimizer: tff.learning.optimizers.Optimizer,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: composer.AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
    is_masked: Callable[[str], bool] | None = None,
    num_mask_draws: int = 0,
    seed: int = 0,
) -> process.AlgorithmProcess:
  """Builds FedAvg with update masking and the survival measurement.

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    keep_probability: q in (0, 1]; q = 1 is FedAvg bit for bit in every mode.
    mask_mode: a `MaskMode` (or its value).
    client_optimizer: local optimizer, re-initialized every round.
    server_optimizer: applied to the negated weighted mean; default SGD with lr 1.
    model_aggregator: a `tff.aggregators` factory in place of the mean (`composer`).
    client_weighting: the aggregation weights p_k of the mean and of the survival factor:
      `tff.learning.ClientWeighting.UNIFORM` (p_k = 1/K) or `NUM_EXAMPLES` (p_k = n_k / n).
    is_masked: predicate on a trainable variable's name; default: mask every tensor.
    num_mask_draws: fresh mask draws per mode and round for the empirical variances (0: off).
    seed: the server's base seed; round r's seed is drawn from `(seed, r)`.

  Returns:
    An `AlgorithmProcess` whose per-client input is the client's mask key (`client_key`).
    Its metrics: `train`, `communication`, `finalizer` (as every process) and `survival`
    (see `survival_metrics`).

  Raises:
    ValueError: for q outside (0, 1], an unknown mode or client weighting, or a negative
      `num_mask_draws`.
  """
  MaskingParams(keep_probability=keep_probability,
                num_mask_draws=num_mask_draws)  # Checks every knob.
  try:
    mask_mode = MaskMode(mask_mode)
  except ValueError:
    raise ValueError(f'mask_mode must be one of {", ".join(m.value for m in MaskMode)} (a '
                     f'MaskMode), got {mask_mode!r}.') from None
  masked = model_facts.tensor_flags(model_fn, is_masked)
  compress = functools.partial(
      _mask_delta,
      mask_mode=mask_mode,
      masked=masked,
      keep_probability=keep_probability,
      num_mask_draws=num_mask_draws,
      by_examples=client_weighting == tff.learning.ClientWeighting.NUM_EXAMPLES)

  def server_metrics(statistics, weight_sum):
    mean_delta = [tf.math.divide_no_nan(t, weight_sum) for t in statistics['weighted_delta']]
    mean_noises = collections.OrderedDict(
        (mode, [tf.math.divide_no_nan(n, weight_sum)
                for n in noises])
        for mode, noises in statistics['weighted_noises'].items())
    return collections.OrderedDict(
        survival=survival_metrics(mean_delta, statistics['sums'], mean_noises, keep_probability))

  compressor = parts.Compressor(compress=compress,
                                server_metrics=server_metrics,
                                client_inputs=parts.client_keys())
  return composer.compose(model_fn,
                          parts.AlgorithmParts(compressor=compressor,
                                               schedule=_round_seed_schedule(seed)),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer,
                          model_aggregator=model_aggregator)


def survival_metrics(mean_delta: Sequence[tf.Tensor], sums: dict, mean_noises: dict,
                     keep_probability: float) -> collections.OrderedDict:
  """The round's survival figures (float64 scalars).

  With `w_k` the aggregation weights (1, or example counts) and `p_k = w_k / sum w`:
  - `sum_p2_norm2` = `sum_k p_k**2 |delta_k|**2`; `mean_delta_norm` = `|sum_k p_k delta_k|`;
  - `r_ind` = `(1-q)/q * sum_p2_norm2`, `r_sync` = `(1-q)/q * mean_delta_norm**2`: the
    closed-form total variances of the masked aggregate with independent / synchronized masks;
  - `survival` S = `mean_delta_norm**2 / sum_p2_norm2` (0 when all deltas are 0),
    `s_max` = `1 / sum_k p_k**2`, `survival_normalized` = S / S_max;
  - `mean_client_delta_norm` = the unweighted mean of `|delta_k|` over the round's clients;
  - with mask draws: `r_ind_empirical`, `r_sync_empirical` (mean over draws of the squared
    norm of the aggregate's masking noise), their standard errors over draws
    (`*_stderr`), and `survival_empirical` = their ratio.
  Only masked tensors count (`is_masked`).

  Args:
    mean_delta: per masked tensor, `sum_k p_k delta_k`.
    sums: client sums of `weight`, `squared_weight`, `weighted_squared_norm`, `delta_norm`,
      `num_clients`.
    mean_noises: {'independent'|'synchronized': per tensor `[draws, *shape]` weighted means
      of the clients' masking noises}, or empty.
    keep_probability: q.
  """
  total_weight = sums['weight']
  sum_p2_norm2 = tf.math.divide_no_nan(sums['weighted_squared_norm'], tf.square(total_weight))
  mean_norm2 = _squared_norm(mean_delta) if mean_delta else tf.constant(0.0, tf.float64)
  variance_factor = tf.constant((1.0 - keep_probability) / keep_probability, tf.float64)
  survival = tf.math.divide_no_nan(mean_norm2, sum_p2_norm2)
  s_max = tf.math.divide_no_nan(tf.square(total_weight), sums['squared_weight'])
  metrics = collections.OrderedDict(r_ind=variance_factor * sum_p2_norm2,
                                    r_sync=variance_factor * mean_norm2,
                                    survival=survival,
                                    s_max=s_max,
                                    survival_normalized=tf.math.divide_no_nan(survival, s_max),
                                    mean_client_delta_norm=tf.math.divide_no_nan(
                                        sums['delta_norm'], sums['num_clients']),
                                    mean_delta_norm=tf.sqrt(mean_norm2),
                                    num_clients=sums['num_clients'])
  for mode, noise in mean_noises.items():
    per_draw = tf.add_n([
        tf.reduce_sum(tf.square(tf.cast(n, tf.float64)), axis=list(range(1, n.shape.rank)))
        for n in noise
    ])
    num_draws = tf.cast(tf.size(per_draw), tf.float64)
    metrics[f'r_{_short(mode)}_empirical'] = tf.reduce_mean(per_draw)
    metrics[f'r_{_short(mode)}_empirical_stderr'] = (tf.math.reduce_std(per_draw) /
                                                     tf.sqrt(tf.maximum(num_draws - 1.0, 1.0)))
  if mean_noises:
    metrics['survival_empirical'] = tf.math.divide_no_nan(metrics['r_sync_empirical'],
                                                          metrics['r_ind_empirical'])
  return metrics


def _short(mode: str) -> str:
  return {'independent': 'ind', 'synchronized': 'sync'}[mode]
