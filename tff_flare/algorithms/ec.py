"""Top-k error correction (EC) and the authors' EC+FedProx.

EC (`docs/faithfulness.md` R4): client i trains plainly to get its delta `d_i = w_i - s`,
forms `u_i = d_i + a_i` with its accumulator `a_i`, sends `y_i = TopK_R(u_i)` (per tensor)
and keeps `a_i <- u_i - y_i`. The server adds the unweighted mean: `s <- s + mean_i y_i`.

EC+FedProx (`docs/faithfulness.md` R6, the authors' "FedProx"): the same, with
`tau_r * sum (w - s)^2` (no 1/2) on every regularized tensor added to the loss of every local
step, `tau_r = tau / tau_decay**(r + 1)`. With one local step it equals EC exactly (Q11).
"""

from collections.abc import Callable
import functools
from typing import Optional

import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import local_training
from tff_flare.algorithms import parts
from tff_flare.algorithms import regularizers
from tff_flare.algorithms import schedules
from tff_flare.algorithms import sparsification


def ec_client_update(model, optimizer, server_weights, params, dataset, client_state,
                     client_input, *, keep_percent, rule, regularized, proximal):
  """EC's client round (with the proximal term when `proximal`); see the module docstring."""
  del client_input  # EC takes no per-client input.
  penalty_gradient_fn = None
  if proximal:
    server_trainable = list(server_weights.trainable)
    penalty_gradient_fn = lambda w: regularizers.proximal_penalty_gradient(  # pylint: disable=g-long-lambda
        w, server_trainable, regularized, params['tau'])
  result = local_training.train_locally(model, optimizer, server_weights, dataset,
                                        penalty_gradient_fn=penalty_gradient_fn)
  return error_feedback.compress(local_training.model_delta(result, server_weights),
                                 client_state[error_feedback.ACCUMULATOR], keep_percent, rule)


def build_ec(
    model_fn: composer.ModelFn,
    *,
    keep_percent: float,
    client_optimizer: tff.learning.optimizers.Optimizer,
    rule: sparsification.TopKRule = sparsification.TopKRule.AUTHORS,
    server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None,
) -> composer.AlgorithmProcess:
  """Builds top-k error correction (EC).

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    keep_percent: the paper's R, the percentage of entries of each tensor to send.
    client_optimizer: local optimizer, e.g. `tff.learning.optimizers.build_sgdm(lr, momentum)`.
    rule: top-k rule; `TopKRule.AUTHORS` reproduces the authors' counts.
    server_optimizer: applied to the negated mean message; default SGD with lr 1.

  Returns:
    An `AlgorithmProcess` whose client state is `OrderedDict(accumulator=[...])`.

  Raises:
    ValueError: for `keep_percent` outside (0, 100] or too large for a tensor under `rule`.
  """
  error_feedback.validate_compression(model_fn, keep_percent, rule)
  client_update = functools.partial(ec_client_update, keep_percent=keep_percent, rule=rule,
                                    regularized=None, proximal=False)
  return composer.compose(
      model_fn, parts.AlgorithmParts(client_update=client_update,
                                     initial_client_state=error_feedback.zero_accumulator),
      client_optimizer=client_optimizer, server_optimizer=server_optimizer)


def build_ec_fedprox(
    model_fn: composer.ModelFn,
    *,
    keep_percent: float,
    client_optimizer: tff.learning.optimizers.Optimizer,
    tau: float,
    tau_decay: float,
    rule: sparsification.TopKRule = sparsification.TopKRule.AUTHORS,
    is_regularized: Optional[Callable[[str], bool]] = None,
    server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None,
) -> composer.AlgorithmProcess:
  """Builds the authors' "FedProx": EC plus `tau_r * sum (w - s)^2` on every local step.

  Args (beyond `build_ec`'s):
    tau: TAU, the proximal strength at round -1 (round r uses `tau / tau_decay**(r+1)`).
    tau_decay: c, the per-round decay (> 0).
    is_regularized: predicate on a trainable variable's name; default: every tensor.

  Raises:
    ValueError: as `build_ec`, and for `tau < 0` or `tau_decay <= 0`.
  """
  error_feedback.validate_compression(model_fn, keep_percent, rule)
  regularized = regularizers.regularized_tensor_flags(composer.trainable_names(model_fn),
                                                      is_regularized)
  client_update = functools.partial(ec_client_update, keep_percent=keep_percent, rule=rule,
                                    regularized=regularized, proximal=True)
  return composer.compose(
      model_fn, parts.AlgorithmParts(client_update=client_update,
                                     initial_client_state=error_feedback.zero_accumulator,
                                     schedule=schedules.tau_schedule(tau, tau_decay)),
      client_optimizer=client_optimizer, server_optimizer=server_optimizer)
