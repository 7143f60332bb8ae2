"""EC-FFL: error correction whose R and E adapt to the test loss (the authors' "FFL" runs).

Before every round the driver evaluates the EC-FFL model on the test set (the loop's
`AlgorithmRun` does it, through the process's `record_test_loss`), and the server schedule
turns the loss into the round's keep-percentage and local epochs (`docs/faithfulness.md` R8):

    R'_r = R * (L_ref / L_r) ** (1/3),    E'_r = max(1, rne(E * (L_r / L_ref) ** (1/3))),

where `L_r` is the test loss of the current model and `L_ref` the first one recorded (that of
the initial model, which every algorithm of a run shares: the authors' "first FLARE
evaluation entry"). The client then does EC (`ec`) with R'_r for E'_r local epochs. As
training lowers the loss, R' grows and E' falls (to 1 for E = 1). Under the authors' top-k
rule, an R' that would ask for more entries than a tensor has is capped at the tensor
(`sparsification`). Before any loss is recorded the schedule uses R and E.

The round's metrics report `keep_percent` (R'), `local_epochs` (E'), `reference_loss` and
`test_loss`.
"""

import dataclasses
import collections

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import error_feedback
from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import local_training
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import process
from tff_flare.algorithms import sparsification


@dataclasses.dataclass(frozen=True)
class EcFflParams(hyperparameters.Params):
  """EC-FFL's knobs: the base R and E it adapts."""

  keep_percent: float = sparsification.KEEP_PERCENT.field()
  local_epochs: int = local_training.LOCAL_EPOCHS.field()


def adaptive_schedule(keep_percent: float, local_epochs: int) -> parts.RoundSchedule:
  """The server keeps R, E and the losses; broadcasts R' (float32) and E' (int32)."""

  def initial_state():
    nan = tf.constant(float('nan'), tf.float64)
    return collections.OrderedDict(round_num=tf.constant(0, tf.int32),
                                   keep_percent=tf.constant(keep_percent, tf.float64),
                                   local_epochs=tf.constant(local_epochs, tf.float64),
                                   reference_loss=nan,
                                   test_loss=nan)

  def round_params(state):
    ratio = state['reference_loss'] / state['test_loss']
    recorded = tf.math.is_finite(ratio)
    ratio = tf.where(recorded, ratio, tf.constant(1.0, tf.float64))
    cube_root = tf.pow(ratio, 1.0 / 3.0)
    epochs = tf.maximum(tf.constant(1.0, tf.float64), tf.round(state['local_epochs'] / cube_root))
    return collections.OrderedDict(keep_percent=tf.cast(state['keep_percent'] * cube_root,
                                                        tf.float32),
                                   local_epochs=tf.cast(epochs, tf.int32))

  def advance(state):
    return collections.OrderedDict(state, round_num=state['round_num'] + 1)

  def report(state):
    return collections.OrderedDict(round_params(state),
                                   reference_loss=state['reference_loss'],
                                   test_loss=state['test_loss'])

  def record_test_loss(state, loss):
    loss = tf.cast(loss, tf.float64)
    reference = tf.where(tf.math.is_nan(state['reference_loss']), loss, state['reference_loss'])
    return collections.OrderedDict(state, reference_loss=reference, test_loss=loss)

  return parts.RoundSchedule(initial_state=initial_state,
                             round_params=round_params,
                             advance=advance,
                             report=report,
                             record_test_loss=record_test_loss)


def epochs_of(dataset: tf.data.Dataset, data_epochs: int, epochs: tf.Tensor) -> tf.data.Dataset:
  """`epochs` passes over a client dataset that holds `data_epochs` passes of its batches."""
  if data_epochs > 1:
    num_batches = dataset.reduce(tf.constant(0, tf.int64), lambda n, _: n + 1)
    dataset = dataset.take(num_batches // data_epochs)
  return dataset.repeat(tf.cast(epochs, tf.int64))


def adapted_epochs(data_epochs: int) -> parts.LocalTraining:
  """Plain training over the round's E' passes of the client's batches."""
  return parts.LocalTraining(
      dataset=lambda dataset, params: epochs_of(dataset, data_epochs, params['local_epochs']))


@process.records_build
def build_ec_ffl(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    keep_percent: float = sparsification.KEEP_PERCENT.default,
    local_epochs: int = local_training.LOCAL_EPOCHS.default,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: composer.AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
) -> process.AlgorithmProcess:
  """Builds EC-FFL (see the module docstring); the authors' top-k rule.

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    keep_percent: R, the base percentage of entries of each tensor to send.
    local_epochs: E, the base local epochs; the client datasets must hold E passes of their
      batches (as a task built with `epochs=E` gives them).
    client_optimizer: local optimizer, re-initialized every round.
    server_optimizer: applied to the negated mean message; default SGD with lr 1.
    model_aggregator: a `tff.aggregators` factory in place of the mean (`composer`).
    client_weighting: how the mean weighs the clients (`composer`): uniform (the
      authors') or by examples.

  Returns:
    An `AlgorithmProcess` whose `record_test_loss` takes each round's test loss.

  Raises:
    ValueError: for an out-of-range `keep_percent` or `local_epochs`.
  """
  EcFflParams(keep_percent=keep_percent, local_epochs=local_epochs)  # Checks every knob.
  rule = sparsification.TopKRule.AUTHORS
  error_feedback.check_fits_model(model_fn, keep_percent, rule)
  # R' from the round's parameters (keep_percent=None), E' passes of the batches.
  return composer.compose(model_fn,
                          parts.AlgorithmParts(
                              training=adapted_epochs(local_epochs),
                              compressor=error_feedback.topk_compressor(None, rule),
                              schedule=adaptive_schedule(keep_percent, local_epochs)),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer,
                          model_aggregator=model_aggregator,
                          client_weighting=client_weighting)
