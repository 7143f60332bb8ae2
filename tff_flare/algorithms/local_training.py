"""One client's local training: SGD steps with an optional penalty on the first steps.

All algorithms of the FLARE paper train locally the same way (`docs/faithfulness.md` R2, R3):
the model starts
from the broadcast server weights, a fresh optimizer (zero momentum) is created every round,
and one step is taken per batch of the client's dataset, the step counter running across
epochs (epochs are repeats in the dataset, as in `tff.learning`). The dataset is read into
tensors first and the steps run in a `tf.while_loop` over them (`batches`): the same batches
in the same order, at the cost of a bare Keras step instead of 2-3x that inside tf.data. The optimizer is a
`tff.learning.optimizers.Optimizer`, the same object TFF's own FedAvg takes.

FLARE adds a penalty to the loss of the first `Penalty.steps` steps only. The authors do this
with two Keras models (`docs/faithfulness.md` Q7): a regularized model_0 for steps 1..p, copied into a
plain model_1 after every such step, and model_1 for the rest; model_1 has its own momentum,
which is zero at step p+1. That equals one set of weights whose optimizer state is re-created
before step p+1 (`Penalty.restart_optimizer=True`, the authors' behaviour); with `False`
the momentum carries on. (With p=0 the authors' model_1 would start from its random
initialisation; here p=0 simply means no penalized step.)

The penalty enters through its closed-form gradient (`flare`, `ec`), added to the
gradient of the model's own loss (`forward_pass(...).loss`, which includes the Keras
layer regularization losses as TFF 0.20 did). Sparse gradients (an embedding's
`tf.IndexedSlices`) are made dense before the penalty is added, so that every model trains
with every algorithm.
"""

from collections.abc import Callable
from typing import Any, NamedTuple

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import batches
from tff_flare.algorithms import hyperparameters

# Maps the current trainable weights (a list of tensors) to the penalty's gradient, a tensor
# per weight or None where the penalty does not depend on it.
PenaltyGradientFn = Callable[[list[tf.Tensor]], list[tf.Tensor | None]]

ALL_STEPS = 'all'  # `Penalty.steps` (FLARE's `reg_steps`): every local step.


class Penalty(NamedTuple):
  """A term added to the loss of a client's first local steps, by its gradient.

  Attributes:
    gradient_fn: the term's gradient at the current trainable weights (`PenaltyGradientFn`).
    steps: int >= 0, the number of leading steps that carry it (the paper's p), or
      `ALL_STEPS` for every step (as checked by `validate_penalized_steps`).
    restart_optimizer: re-create the optimizer state before the first step without it
      (the authors' two-model switch).
  """

  gradient_fn: PenaltyGradientFn
  steps: Any = ALL_STEPS
  restart_optimizer: bool = False


def validate_penalized_steps(steps: Any, name: str = 'reg_steps') -> None:
  """Raises `ValueError` unless `steps` is an int >= 0 or `ALL_STEPS`."""
  if steps == ALL_STEPS and isinstance(steps, str):
    return
  if not hyperparameters.is_int(steps) or steps < 0:
    raise ValueError(f"{name} (the paper's p) must be an int >= 0 or '{ALL_STEPS}' (every "
                     f'step), got {steps!r}.')


REG_STEPS = hyperparameters.Knob(
    None, "p: FLARE's regularized local steps, an int or 'all' (default: the task's).",
    validate_penalized_steps)
LOCAL_EPOCHS = hyperparameters.Knob(1, 'E: local epochs (the client datasets repeat E times).',
                                    hyperparameters.check_int('local_epochs', 1))


class LocalTrainingResult(NamedTuple):
  """What local training returns.

  Attributes:
    trainable_weights: list of tensors, the trained trainable weights.
    num_examples: int64 scalar, examples seen over all steps.
    num_steps: int32 scalar, optimizer steps taken.
  """

  trainable_weights: list[tf.Tensor]
  num_examples: tf.Tensor
  num_steps: tf.Tensor


def train_locally(
    model: tff.learning.models.VariableModel,
    optimizer: tff.learning.optimizers.Optimizer,
    initial_weights: tff.learning.models.ModelWeights,
    dataset: tf.data.Dataset,
    penalty: Penalty | None = None,
) -> LocalTrainingResult:
  """Trains `model` on `dataset` from `initial_weights`; call inside a `tf.function`.

  Args:
    model: the client's model; its variables are overwritten.
    optimizer: a TFF optimizer, initialized here (fresh state every call).
    initial_weights: `ModelWeights` to start from (the server model).
    dataset: batches for `model.forward_pass`; one optimizer step per batch.
    penalty: a term added to the loss of the leading steps (FLARE's pull), or None.

  Returns:
    A `LocalTrainingResult`.
  """
  model_weights = tff.learning.models.ModelWeights.from_model(model)
  tf.nest.map_structure(lambda v, t: v.assign(t), model_weights, initial_weights)
  trainable = list(model_weights.trainable)
  specs = tuple(tf.TensorSpec(v.shape, v.dtype) for v in trainable)

  client_batches = batches.as_batches(dataset)

  def step(num_examples, step_num, optimizer_state):
    batch = batches.batch_at(client_batches, step_num)
    with tf.GradientTape() as tape:
      output = model.forward_pass(batch, training=True)
    gradients = [tf.convert_to_tensor(g) for g in tape.gradient(output.loss, trainable)]
    weights = [tf.convert_to_tensor(v) for v in trainable]
    if penalty is not None and penalty.steps == ALL_STEPS:
      gradients = _add_penalty(gradients, penalty.gradient_fn(weights))
    elif penalty is not None:
      gradients = tf.cond(tf.less(step_num, penalty.steps),
                          lambda: _add_penalty(gradients, penalty.gradient_fn(weights)),
                          lambda: list(gradients))
      if penalty.restart_optimizer:
        optimizer_state = tf.cond(tf.equal(step_num, penalty.steps),
                                  lambda: optimizer.initialize(specs), lambda: optimizer_state)
    optimizer_state, new_weights = optimizer.next(optimizer_state, tuple(weights), tuple(gradients))
    for variable, value in zip(trainable, new_weights):
      variable.assign(value)
    num_examples += tf.cast(output.num_examples, tf.int64)
    return num_examples, step_num + 1, optimizer_state

  # The steps in a while loop over the batches' tensors, not inside tf.data (`batches`).
  num_examples, num_steps, _ = tf.while_loop(
      lambda num_examples, step_num, optimizer_state: step_num < client_batches.num_steps,
      step, (tf.constant(0, tf.int64), tf.constant(0, tf.int32), optimizer.initialize(specs)),
      parallel_iterations=1)
  return LocalTrainingResult(trainable_weights=[tf.convert_to_tensor(v) for v in trainable],
                             num_examples=num_examples,
                             num_steps=num_steps)


def _add_penalty(gradients: list[tf.Tensor], terms: list[tf.Tensor | None]) -> list[tf.Tensor]:
  return [g if p is None else g + p for g, p in zip(gradients, terms)]


def model_delta(result: LocalTrainingResult, server_weights) -> list[tf.Tensor]:
  """`w_final - s` for the trainable weights (the local model delta), a list of tensors."""
  return [w - s for w, s in zip(result.trainable_weights, server_weights.trainable)]
