"""FLARE: top-k error correction with a masked L1 pull toward `server + accumulator`.

Round r, client i with accumulator `a_i` (`docs/faithfulness.md` R5):

  1. `tau_r = tau / tau_decay**(r + 1)` (the authors decay before round 0; Q8).
  2. Per regularized tensor, the mask `m = 1[|a_i| > percentile_t(|a_i|)]` (`mask_percentile`
     is the paper's t; strict comparison; empty in round 0 since `a_i = 0`).
  3. Local training from `s`: the first `reg_steps` steps (the paper's p) minimise
     `f + tau_r * sum m * |w - (s + a_i)|`, the remaining steps minimise `f` alone; by default
     the optimizer state is re-created before step p+1, reproducing the authors' two-model
     switch (Q7).
  4. `u_i = (w_i - s) + a_i`, send `y_i = TopK_R(u_i)`, keep `a_i <- u_i - y_i`.

The server adds the unweighted mean of the `y_i` (SGD, lr 1). With `tau = 0` FLARE equals EC
wherever the two-model switch cannot matter (one local step, no momentum, or the switch off).

The pull of step 3 on a regularized tensor `l`:

    rho_l(w) = tau_r * sum_j m_lj * |w_lj - (s_lj + a_lj)|,    m_l = 1[|a_l| > theta_l],

`theta_l` the `mask_percentile`-th percentile of `|a_l|` with tfp's 'nearest' interpolation:
the entry at index `rne((n - 1) * t / 100)` of the ascending sort. The comparison is strict,
so entries equal to the threshold (many zeros, say) are not masked (Q9). The term is a raw
sum, not divided by the batch size (Q10). It enters the local steps by its closed-form
gradient `tau_r * m * sign(w - target)` (sign(0) = 0, as TensorFlow's gradient of `abs`), so
that a step adds it to the data loss's gradient without a second tape; tests check it against
autodiff.
"""

import dataclasses
from collections.abc import Callable

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import local_training
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import process
from tff_flare.algorithms import schedules
from tff_flare.algorithms import selection
from tff_flare.algorithms import sparsification


def validate_percentile(mask_percentile: float) -> None:
  """Raises `ValueError` unless `mask_percentile` (the paper's t) is in [0, 100]."""
  if (not hyperparameters.is_number(mask_percentile) or not 0.0 <= mask_percentile <= 100.0):
    raise ValueError(
        f'mask_percentile (the paper\'s t) must be in [0, 100], got {mask_percentile}.')


MASK_PERCENTILE = hyperparameters.Knob(
    50.0, "t: FLARE's mask keeps the entries whose |accumulator| exceeds this percentile.",
    validate_percentile)


@dataclasses.dataclass(frozen=True)
class FlareParams(hyperparameters.Params):
  """FLARE's knobs (the paper's R, TAU, c, t and p; the top-k rule), checked when built."""

  keep_percent: float = sparsification.KEEP_PERCENT.field()
  topk_rule: str = sparsification.TOPK_RULE.field()
  tau: float = schedules.TAU.field()
  tau_decay: float = schedules.TAU_DECAY.field()
  mask_percentile: float = MASK_PERCENTILE.field()
  reg_steps: int | str | None = local_training.REG_STEPS.field()


def percentile_index(num_elements: int, mask_percentile: float) -> int:
  """Index into the ascending sort of `n` values of tfp's 'nearest' percentile `t`.

  `clip(rne((n - 1) * t / 100), 0, n - 1)`, computed in float64 as tfp does.
  """
  position = np.float64(num_elements - 1) * np.float64(mask_percentile) / np.float64(100.0)
  return int(np.clip(np.round(position), 0, num_elements - 1))


def mask_threshold(accumulator: tf.Tensor, mask_percentile: float) -> tf.Tensor:
  """`theta`, the `mask_percentile`-th percentile of `|a|` (tfp's 'nearest'), a scalar."""
  index = percentile_index(accumulator.shape.num_elements(), mask_percentile)
  return selection.kth_smallest_magnitude(accumulator, index)


def percentile_mask(accumulator: tf.Tensor, mask_percentile: float) -> tf.Tensor:
  """FLARE's mask of one tensor: `1[|a| > percentile_t(|a|)]`, float, shaped like `a`."""
  return selection.magnitude_mask(accumulator, mask_threshold(accumulator, mask_percentile))


def flare_masks(accumulator, regularized, mask_percentile: float):
  """Masks for every tensor of a structure; unregularized tensors get an all-zero mask.

  Args:
    accumulator: a list of tensors (the client's accumulator, shaped like the weights).
    regularized: a list of Python bools, one per tensor.
    mask_percentile: the paper's t, in [0, 100].
  """
  return [
      percentile_mask(a, mask_percentile) if reg else tf.zeros_like(a)
      for a, reg in zip(accumulator, regularized)
  ]


def flare_penalty(weights, targets, masks, tau: tf.Tensor) -> tf.Tensor:
  """`tau * sum_l sum_j m_lj |w_lj - target_lj|`, a float32 scalar (`target = s + a`)."""
  terms = [tf.reduce_sum(m * tf.abs(w - t)) for w, t, m in zip(weights, targets, masks)]
  return tau * tf.add_n(terms)


def flare_penalty_gradient(weights, server, accumulator, thresholds, tau: tf.Tensor):
  """Gradient of `flare_penalty` at `weights` (targets `s + a`, masks `1[|a| > theta]`):
  `tau * m * sign(w - (s + a))` per tensor, None for a tensor without a pull (threshold None).

  Made from the server weights, the accumulator and one threshold per tensor at every step,
  so that neither the masks nor the targets are held through the local steps (on the authors'
  FC they would be two more model-sized tensors per client thread).

  Args:
    weights, server, accumulator: lists of tensors of one shape each (`w`, `s`, `a`).
    thresholds: a list of scalars (`mask_threshold`) or None (an unregularized tensor).
    tau: the round's strength.
  """
  return [
      None if theta is None else selection.masked_sign_pull(w, s, a, theta, tau)
      for w, s, a, theta in zip(weights, server, accumulator, thresholds)
  ]


def flare_pull(*, regularized: list[bool], mask_percentile: float, reg_steps,
               restart_optimizer_after_reg_steps: bool) -> parts.LocalTraining:
  """FLARE's local training: the masked L1 pull toward `s + a` on the first p steps."""

  def penalty(server_weights, client_state, params) -> local_training.Penalty:
    accumulator = client_state[error_feedback.ACCUMULATOR]
    thresholds = [
        mask_threshold(a, mask_percentile) if reg else None
        for a, reg in zip(accumulator, regularized)
    ]
    server = list(server_weights.trainable)
    tau = params['tau']
    return local_training.Penalty(
        gradient_fn=lambda w: flare_penalty_gradient(w, server, accumulator, thresholds, tau),
        steps=reg_steps,
        restart_optimizer=restart_optimizer_after_reg_steps)

  return parts.LocalTraining(penalty=penalty)


@process.records_build
def build_flare(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    keep_percent: float = sparsification.KEEP_PERCENT.default,
    tau: float = schedules.TAU.default,
    tau_decay: float = schedules.TAU_DECAY.default,
    mask_percentile: float = MASK_PERCENTILE.default,
    reg_steps: int | str | None = local_training.REG_STEPS.default,
    restart_optimizer_after_reg_steps: bool = True,
    topk_rule: sparsification.TopKRule | str = sparsification.TOPK_RULE.default,
    is_regularized: Callable[[str], bool] | None = None,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: composer.AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
) -> process.AlgorithmProcess:
  """Builds FLARE.

  Unlike `tff.learning.algorithms`' processes, `next` takes and returns the round's client
  states (`process`): FLARE's clients keep an accumulator (the error of top-k) from round to round, which TFF's learning
  processes have no place for; `tff_flare.simulate` (or `simulation.loop`) keeps them.

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    keep_percent: the paper's R, the percentage of entries of each tensor to send.
    client_optimizer: local optimizer, re-initialized every round.
    tau: TAU, the L1 strength before decay (>= 0; 0 switches the pull off).
    tau_decay: c (> 0); round r uses `tau / tau_decay**(r + 1)`.
    mask_percentile: t in [0, 100]; coordinates whose `|a|` exceeds this percentile of their
      tensor's `|a|` are pulled.
    reg_steps: p >= 0, the number of leading local steps that carry the pull, or
      `local_training.ALL_STEPS` ('all') for every step (the authors' GRU variant); None
      (the knob's default: a task sets its own) is 1, the authors' MNIST setting.
    restart_optimizer_after_reg_steps: re-create the optimizer state (zero momentum) after the
      p-th step, as the authors' two-model switch does.
    topk_rule: a `sparsification.TopKRule` or its value: `AUTHORS` (the default)
      reproduces the authors' counts, `GLOBAL` is one top-k over the whole update.
    is_regularized: predicate on a trainable variable's name (e.g. to leave out an
      embedding); default: every tensor.
    server_optimizer: applied to the negated mean message; default SGD with lr 1.
    model_aggregator: a `tff.aggregators` factory in place of the mean (`composer`).
    client_weighting: how the mean weighs the clients (`composer`): uniform (the
      authors') or by examples.

  Returns:
    An `AlgorithmProcess` with client state `OrderedDict(accumulator=[...])`.

  Raises:
    ValueError: for an out-of-range `keep_percent`, `tau`, `tau_decay`, `mask_percentile`
      or `reg_steps`.
  """
  reg_steps = 1 if reg_steps is None else reg_steps
  FlareParams(keep_percent=keep_percent,
              topk_rule=topk_rule,
              tau=tau,
              tau_decay=tau_decay,
              mask_percentile=mask_percentile,
              reg_steps=reg_steps)  # Checks every knob.
  rule = sparsification.as_rule(topk_rule)
  error_feedback.check_fits_model(model_fn, keep_percent, rule)
  training = flare_pull(regularized=model_facts.tensor_flags(model_fn, is_regularized),
                        mask_percentile=mask_percentile,
                        reg_steps=reg_steps,
                        restart_optimizer_after_reg_steps=restart_optimizer_after_reg_steps)
  return composer.compose(model_fn,
                          parts.AlgorithmParts(training=training,
                                               compressor=error_feedback.topk_compressor(
                                                   keep_percent, rule),
                                               schedule=schedules.tau_schedule(tau, tau_decay)),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer,
                          model_aggregator=model_aggregator,
                          client_weighting=client_weighting)
