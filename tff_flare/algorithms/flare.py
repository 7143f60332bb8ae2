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
"""

import dataclasses
from collections.abc import Callable

import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import local_training
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import process
from tff_flare.algorithms import regularizers
from tff_flare.algorithms import schedules
from tff_flare.algorithms import sparsification


@dataclasses.dataclass(frozen=True)
class FlareParams(hyperparameters.Params):
  """FLARE's knobs (the paper's R, TAU, c, t and p; the top-k rule), checked when built."""

  keep_percent: float = sparsification.KEEP_PERCENT.field()
  topk_rule: str = sparsification.TOPK_RULE.field()
  tau: float = schedules.TAU.field()
  tau_decay: float = schedules.TAU_DECAY.field()
  mask_percentile: float = regularizers.MASK_PERCENTILE.field()
  reg_steps: int | str | None = local_training.REG_STEPS.field()


def flare_pull(*, regularized, mask_percentile, reg_steps,
               restart_optimizer_after_reg_steps) -> parts.LocalTraining:
  """FLARE's local training: the masked L1 pull toward `s + a` on the first p steps."""

  def penalty(server_weights, client_state, params):
    accumulator = client_state[error_feedback.ACCUMULATOR]
    masks = regularizers.flare_masks(accumulator, regularized, mask_percentile)
    targets = [s + a for s, a in zip(server_weights.trainable, accumulator)]
    tau = params['tau']
    return (lambda w: regularizers.flare_penalty_gradient(w, targets, masks, tau), reg_steps,
            restart_optimizer_after_reg_steps)

  return parts.LocalTraining(penalty=penalty)


@process.records_build
def build_flare(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    keep_percent: float = sparsification.KEEP_PERCENT.default,
    tau: float = schedules.TAU.default,
    tau_decay: float = schedules.TAU_DECAY.default,
    mask_percentile: float = regularizers.MASK_PERCENTILE.default,
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
  regularizers.validate_percentile(mask_percentile)
  local_training.validate_penalized_steps(reg_steps)
  rule = sparsification.as_rule(topk_rule)
  error_feedback.validate_compression(model_fn, keep_percent, rule)
  training = flare_pull(regularized=regularizers.regularized_tensor_flags(
      model_facts.model_facts(model_fn).names, is_regularized),
                        mask_percentile=mask_percentile,
                        reg_steps=reg_steps,
                        restart_optimizer_after_reg_steps=restart_optimizer_after_reg_steps)
  return composer.compose(model_fn,
                          parts.algorithm(training,
                                          error_feedback.topk_compressor(keep_percent, rule),
                                          schedules.tau_schedule(tau, tau_decay)),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer,
                          model_aggregator=model_aggregator,
                          client_weighting=client_weighting)
