"""Top-k error correction (EC) and the authors' EC+FedProx.

EC (`docs/faithfulness.md` R4): client i trains plainly to get its delta `d_i = w_i - s`,
forms `u_i = d_i + a_i` with its accumulator `a_i`, sends `y_i = TopK_R(u_i)` (per tensor)
and keeps `a_i <- u_i - y_i`. The server adds the unweighted mean: `s <- s + mean_i y_i`.

EC+FedProx (`docs/faithfulness.md` R6, the authors' "FedProx"): the same, with
`tau_r * sum (w - s)^2` (no 1/2) on every regularized tensor added to the loss of every local
step, `tau_r = tau / tau_decay**(r + 1)`. With one local step it equals EC exactly (Q11).
The term enters the steps by its closed-form gradient `2 * tau_r * (w - s)`, checked against
autodiff by the tests.
"""

import dataclasses
from collections.abc import Callable

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
from tff_flare.algorithms import sparsification


@dataclasses.dataclass(frozen=True)
class EcParams(hyperparameters.Params):
  """EC's knobs: the paper's R and the top-k rule."""

  keep_percent: float = sparsification.KEEP_PERCENT.field()
  topk_rule: str = sparsification.TOPK_RULE.field()


@dataclasses.dataclass(frozen=True)
class EcFedProxParams(hyperparameters.Params):
  """EC+FedProx's knobs: R, the top-k rule, TAU and c."""

  keep_percent: float = sparsification.KEEP_PERCENT.field()
  topk_rule: str = sparsification.TOPK_RULE.field()
  tau: float = schedules.TAU.field()
  tau_decay: float = schedules.TAU_DECAY.field()


def proximal_penalty(weights, server_weights, regularized, tau: tf.Tensor) -> tf.Tensor:
  """The authors' FedProx term `tau * sum (w - s)^2` over the regularized tensors."""
  terms = [
      tf.reduce_sum(tf.square(w - s))
      for w, s, reg in zip(weights, server_weights, regularized)
      if reg
  ]
  return tau * tf.add_n(terms) if terms else tf.zeros([], tf.float32)


def proximal_penalty_gradient(weights, server_weights, regularized, tau: tf.Tensor):
  """Gradient of `proximal_penalty`: `2 * tau * (w - s)` on regularized tensors, None (no
  term: `local_training.PenaltyGradientFn`) on the others."""
  return [(tau * 2.0) * (w - s) if reg else None
          for w, s, reg in zip(weights, server_weights, regularized)]


def proximal_training(regularized: list[bool]) -> parts.LocalTraining:
  """The authors' "FedProx" local training: `tau_r * sum (w - s)^2` on every step."""

  def penalty(server_weights, client_state, params) -> local_training.Penalty:
    del client_state
    server_trainable = list(server_weights.trainable)
    return local_training.Penalty(gradient_fn=lambda w: proximal_penalty_gradient(
        w, server_trainable, regularized, params['tau']))

  return parts.LocalTraining(penalty=penalty)


@process.records_build
def build_ec(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    keep_percent: float = sparsification.KEEP_PERCENT.default,
    topk_rule: sparsification.TopKRule | str = sparsification.TOPK_RULE.default,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: composer.AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
) -> process.AlgorithmProcess:
  """Builds top-k error correction (EC).

  Unlike `tff.learning.algorithms`' processes, `next` takes and returns the round's client
  states (`process`): EC's clients keep an accumulator (the error of top-k) from round to round, which TFF's learning
  processes have no place for; `tff_flare.simulate` (or `simulation.loop`) keeps them.

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    keep_percent: the paper's R, the percentage of entries of each tensor to send.
    client_optimizer: local optimizer, e.g. `tff.learning.optimizers.build_sgdm(lr, momentum)`.
    topk_rule: a `sparsification.TopKRule` or its value: `AUTHORS` (the default)
      reproduces the authors' counts, `GLOBAL` is one top-k over the whole update.
    server_optimizer: applied to the negated mean message; default SGD with lr 1.
    model_aggregator: a `tff.aggregators` factory in place of the mean (`composer`).
    client_weighting: how the mean weighs the clients (`composer`): uniform (the
      authors') or by examples.

  Returns:
    An `AlgorithmProcess` whose client state is `OrderedDict(accumulator=[...])`.

  Raises:
    ValueError: for `keep_percent` outside (0, 100] or too large for a tensor under `rule`.
  """
  EcParams(keep_percent=keep_percent, topk_rule=topk_rule)  # Checks every knob.
  rule = sparsification.as_rule(topk_rule)
  error_feedback.check_fits_model(model_fn, keep_percent, rule)
  return composer.compose(
      model_fn,
      parts.AlgorithmParts(compressor=error_feedback.topk_compressor(keep_percent, rule)),
      client_optimizer=client_optimizer,
      server_optimizer=server_optimizer,
      model_aggregator=model_aggregator,
      client_weighting=client_weighting)


@process.records_build
def build_ec_fedprox(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    keep_percent: float = sparsification.KEEP_PERCENT.default,
    tau: float = schedules.TAU.default,
    tau_decay: float = schedules.TAU_DECAY.default,
    topk_rule: sparsification.TopKRule | str = sparsification.TOPK_RULE.default,
    is_regularized: Callable[[str], bool] | None = None,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: composer.AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
) -> process.AlgorithmProcess:
  """Builds the authors' "FedProx": EC plus `tau_r * sum (w - s)^2` on every local step.

  Args (beyond `build_ec`'s):
    tau: TAU, the proximal strength at round -1 (round r uses `tau / tau_decay**(r+1)`).
    tau_decay: c, the per-round decay (> 0).
    is_regularized: predicate on a trainable variable's name; default: every tensor.

  Raises:
    ValueError: as `build_ec`, and for `tau < 0` or `tau_decay <= 0`.
  """
  EcFedProxParams(keep_percent=keep_percent, topk_rule=topk_rule, tau=tau,
                  tau_decay=tau_decay)  # Checks every knob.
  rule = sparsification.as_rule(topk_rule)
  error_feedback.check_fits_model(model_fn, keep_percent, rule)
  regularized = model_facts.tensor_flags(model_fn, is_regularized)
  return composer.compose(model_fn,
                          parts.AlgorithmParts(training=proximal_training(regularized),
                                               compressor=error_feedback.topk_compressor(
                                                   keep_percent, rule),
                                               schedule=schedules.tau_schedule(tau, tau_decay)),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer,
                          model_aggregator=model_aggregator,
                          client_weighting=client_weighting)
