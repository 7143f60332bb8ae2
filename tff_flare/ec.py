"""Top-k error correction (EC) and the authors' EC+FedProx, as TFF processes.

EC (spec §3.2): client i trains plainly to get its delta `d_i = w_i - s`, forms
`u_i = d_i + a_i` with its accumulator `a_i`, sends `y_i = TopK_R(u_i)` (per tensor) and keeps
`a_i <- u_i - y_i`. The server adds the unweighted mean: `s <- s + mean_i y_i`.

EC+FedProx (spec §3.4, the authors' "FedProx" / second algorithm): the same, with
`tau_r * sum (w - s)^2` (no 1/2) on every regularized tensor added to the loss of every local
step, `tau_r = tau / tau_decay**(r + 1)`. With one local step it equals EC exactly (Q11).
"""

import collections
from collections.abc import Callable
import functools
from typing import Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare import local_training
from tff_flare import regularizers
from tff_flare import sparsification
from tff_flare import stateful_process

ACCUMULATOR = 'accumulator'


def zero_accumulator(specs: list[tf.TensorSpec]) -> collections.OrderedDict:
  """A new client's state: `OrderedDict(accumulator=[zeros shaped like each weight])`."""
  return collections.OrderedDict([(ACCUMULATOR, [tf.zeros(s.shape, s.dtype) for s in specs])])


def compress_with_error_feedback(delta, accumulator, keep_percent: float,
                                 rule: sparsification.TopKRule):
  """Error-feedback compression shared by EC, EC+FedProx and FLARE.

  Args:
    delta: list of tensors, the local model delta `w - s`.
    accumulator: list of tensors shaped like `delta`, the residual kept from earlier rounds.
    keep_percent: the paper's R, in percent.
    rule: the top-k rule.

  Returns:
    `(sent, new_accumulator)` with `sent = TopK_R(delta + accumulator)` and
    `new_accumulator = delta + accumulator - sent`.
  """
  corrected = [d + a for d, a in zip(delta, accumulator)]
  return sparsification.sparsify(corrected, keep_percent, rule)


def local_delta(result: local_training.LocalTrainingResult, server_weights) -> list[tf.Tensor]:
  """`w_final - s` for the trainable weights, as a list of tensors."""
  return [w - s for w, s in zip(result.trainable_weights, server_weights.trainable)]


def regularized_tensor_flags(model_fn: stateful_process.ModelFn,
                             is_regularized: Optional[Callable[[str], bool]]) -> list[bool]:
  """One bool per trainable tensor: does the penalty apply to it (default: all of them)?"""
  names = stateful_process.trainable_names(model_fn)
  if is_regularized is None:
    return [True] * len(names)
  return [bool(is_regularized(name)) for name in names]


def validate_compression(model_fn: stateful_process.ModelFn, keep_percent: float,
                         rule: sparsification.TopKRule) -> None:
  """Checks `keep_percent` against every trainable tensor of the model."""
  if not isinstance(rule, sparsification.TopKRule):
    raise TypeError(f'rule must be a sparsification.TopKRule, got {rule!r}.')
  specs = stateful_process.trainable_specs(model_fn)
  sparsification.check_rule_fits([s.shape for s in specs], keep_percent, rule,
                                 stateful_process.trainable_names(model_fn))


def _ec_client_update(model, optimizer, server_weights, tau, dataset, client_state, *,
                      keep_percent, rule, regularized, proximal):
  penalty_gradient_fn = None
  if proximal:
    server_trainable = list(server_weights.trainable)
    penalty_gradient_fn = lambda w: regularizers.proximal_penalty_gradient(  # pylint: disable=g-long-lambda
        w, server_trainable, regularized, tau)
  result = local_training.train_locally(model, optimizer, server_weights, dataset,
                                        penalty_gradient_fn=penalty_gradient_fn)
  sent, residual = compress_with_error_feedback(
      local_delta(result, server_weights), client_state[ACCUMULATOR], keep_percent, rule)
  return stateful_process.ClientOutput(
      message=sent,
      client_state=collections.OrderedDict([(ACCUMULATOR, residual)]),
      counters=collections.OrderedDict(entries_sent=sparsification.count_nonzero(sent)))


def default_server_optimizer() -> tff.learning.optimizers.Optimizer:
  """The authors' server step: SGD with learning rate 1 (`s <- s + aggregate`)."""
  return tff.learning.optimizers.build_sgdm(learning_rate=1.0)


def build_ec(
    model_fn: stateful_process.ModelFn,
    *,
    keep_percent: float,
    client_optimizer: tff.learning.optimizers.Optimizer,
    rule: sparsification.TopKRule = sparsification.TopKRule.AUTHORS,
    server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None,
    model_aggregator: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> stateful_process.StatefulClientsProcess:
  """Builds top-k error correction (EC).

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    keep_percent: the paper's R, the percentage of entries of each tensor to send.
    client_optimizer: local optimizer, e.g. `tff.learning.optimizers.build_sgdm(lr, momentum)`.
    rule: top-k rule; `TopKRule.AUTHORS` reproduces the authors' counts (spec §1).
    server_optimizer: applied to the negated mean message; default SGD with lr 1.
    model_aggregator: default `tff.aggregators.UnweightedMeanFactory()`.

  Returns:
    A `StatefulClientsProcess` whose client state is `OrderedDict(accumulator=[...])`.

  Raises:
    ValueError: for `keep_percent` outside (0, 100] or too large for a tensor under `rule`.
  """
  return _build_error_feedback(model_fn, keep_percent=keep_percent,
                               client_optimizer=client_optimizer, rule=rule,
                               server_optimizer=server_optimizer,
                               model_aggregator=model_aggregator, proximal=False)


def build_ec_fedprox(
    model_fn: stateful_process.ModelFn,
    *,
    keep_percent: float,
    client_optimizer: tff.learning.optimizers.Optimizer,
    tau: float,
    tau_decay: float,
    rule: sparsification.TopKRule = sparsification.TopKRule.AUTHORS,
    is_regularized: Optional[Callable[[str], bool]] = None,
    server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None,
    model_aggregator: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> stateful_process.StatefulClientsProcess:
  """Builds the authors' "FedProx": EC plus `tau_r * sum (w - s)^2` on every local step.

  Args (beyond `build_ec`'s):
    tau: TAU, the proximal strength at round -1 (round r uses `tau / tau_decay**(r+1)`).
    tau_decay: c, the per-round decay (> 0).
    is_regularized: predicate on a trainable variable's name; default: every tensor.

  Raises:
    ValueError: as `build_ec`, and for `tau < 0` or `tau_decay <= 0`.
  """
  return _build_error_feedback(model_fn, keep_percent=keep_percent,
                               client_optimizer=client_optimizer, rule=rule,
                               server_optimizer=server_optimizer,
                               model_aggregator=model_aggregator, proximal=True, tau=tau,
                               tau_decay=tau_decay, is_regularized=is_regularized)


def _build_error_feedback(model_fn, *, keep_percent, client_optimizer, rule, server_optimizer,
                          model_aggregator, proximal, tau=0.0, tau_decay=1.0,
                          is_regularized=None):
  validate_compression(model_fn, keep_percent, rule)
  client_update_fn = functools.partial(
      _ec_client_update, keep_percent=keep_percent, rule=rule,
      regularized=regularized_tensor_flags(model_fn, is_regularized), proximal=proximal)
  return build_accumulator_process(
      model_fn, client_update_fn, client_optimizer=client_optimizer,
      server_optimizer=server_optimizer, model_aggregator=model_aggregator, tau=tau,
      tau_decay=tau_decay)


def build_accumulator_process(model_fn, client_update_fn, *, client_optimizer,
                              server_optimizer=None, model_aggregator=None, tau=0.0,
                              tau_decay=1.0) -> stateful_process.StatefulClientsProcess:
  """A process whose clients keep an accumulator, with the authors' server defaults.

  The server defaults are SGD with lr 1 and an unweighted mean (spec §2).
  """
  return stateful_process.build_stateful_clients_process(
      model_fn,
      client_update_fn=client_update_fn,
      client_state_fn=zero_accumulator,
      client_optimizer=client_optimizer,
      server_optimizer=server_optimizer or default_server_optimizer(),
      model_aggregator=model_aggregator or tff.aggregators.UnweightedMeanFactory(),
      tau=tau,
      tau_decay=tau_decay)
