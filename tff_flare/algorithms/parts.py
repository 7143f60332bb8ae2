"""What an algorithm supplies to the composer: plain TensorFlow functions, no TFF wiring.

Every algorithm of this project (FLARE, EC, EC+FedProx, EC-FFL, EF21, FedAvg, update
masking, QSGD with error feedback) is an `AlgorithmParts`: a client update, an optional
client state, optional per-client inputs, a round schedule held at the server, an
aggregation and optional server metrics.

Most are made of two parts, as TFF separates client work from aggregation and pfl-research
adds postprocessors: a `LocalTraining` (plain, or with a penalty from the server weights,
the client's state and the round's parameters) and a `Compressor` (what the client sends of
its delta and what it keeps: `compress(delta, state, params, input) -> ClientOutput`, with its
own state, aggregation and server metrics). `algorithm(training, compressor, schedule)`
makes the parts: FLARE is `LocalTraining(flare_pull)` + top-k error feedback, EC plain
training + the same feedback, EF21 and update masking their own compressors. A new
compressor is one module (`qsgd` shows one). `composer.compose` wires the parts into a TFF iterative process; the in-process
executor (`tff_flare.execution.inprocess`) runs the very same functions without TFF's runtime.
So an algorithm is written once and both ways of running it compute the same arithmetic.

A round, in terms of the parts (`r` the round, `s` the server model):

  1. `params = schedule.round_params(schedule_state)` at the server, broadcast with `s`;
  2. each client: `client_update(model, optimizer, s, params, dataset, client_state,
     client_input) -> ClientOutput`;
  3. the server sums `weight * message`, `weight`, the counters and the statistics over the
     clients, and `aggregation.finalize` turns the sums into the update (a weighted mean by
     default: every client weighs 1, as the authors average);
  4. the server optimizer applies the update (SGD with learning rate 1: `s <- s + update`),
     `schedule.advance` moves the schedule on, and `server_metrics` reads the statistics.
"""

import collections
from collections.abc import Callable, Sequence
import re
from typing import Any
import zlib

import attrs
import tensorflow as tf

from tff_flare.algorithms import local_training
from tff_flare.algorithms import sparsification

# client_update(model, optimizer, server_weights, round_params, dataset, client_state,
#               client_input) -> ClientOutput; called inside a `tf.function`.
ClientUpdateFn = Callable[..., 'ClientOutput']


@attrs.frozen
class ClientOutput:
  """What an algorithm's client update returns (tensors, inside a `tf.function`).

  Attributes:
    message: list of tensors shaped like the trainable weights: what the client sends.
    client_state: the client's new state (a nest of tensors), `()` for a stateless algorithm.
    counters: `OrderedDict` of int64 scalars, summed over the round's clients; holds at least
      `entries_sent`, the nonzero entries the client puts on the wire.
    weight: float32 scalar, the client's aggregation weight; None means 1 (the authors'
      unweighted mean).
    statistics: `OrderedDict` of tensors summed over the round's clients and handed to the
      algorithm's `server_metrics` (e.g. the survival measurement of update masking).
  """

  message: Any
  client_state: Any = ()
  counters: Any = attrs.field(factory=collections.OrderedDict)
  weight: Any = None
  statistics: Any = attrs.field(factory=collections.OrderedDict)


@attrs.frozen
class RoundSchedule:
  """The algorithm's part of the server state, and what it broadcasts each round.

  Attributes:
    initial_state: `() -> OrderedDict` of tensors (e.g. the round number and TAU).
    round_params: `state -> OrderedDict` of tensors broadcast to the clients this round
      (e.g. `tau_r`); an empty dict broadcasts nothing.
    advance: `state -> state`, the state of the next round.
    report: `state -> OrderedDict` of scalars added to the round's metrics (default: none).
    record_test_loss: `(state, float32 loss) -> state`, for a schedule that adapts to the
      test loss of the current model (EC-FFL); the loop evaluates the model before the round
      and records the loss through it. None for the others.
  """

  initial_state: Callable[[], Any]
  round_params: Callable[[Any], Any]
  advance: Callable[[Any], Any]
  report: Callable[[Any], Any] = lambda state: collections.OrderedDict()
  record_test_loss: Callable[[Any, tf.Tensor], Any] | None = None


def round_counter() -> RoundSchedule:
  """The plain schedule: a round number (int32), nothing broadcast."""
  return RoundSchedule(
      initial_state=lambda: collections.OrderedDict(round_num=tf.constant(0, tf.int32)),
      round_params=lambda state: collections.OrderedDict(),
      advance=lambda state: collections.OrderedDict(round_num=state['round_num'] + 1))


@attrs.frozen
class Aggregation:
  """How the server turns the summed client messages into the model update.

  Attributes:
    initial_state: `list[tf.TensorSpec] -> state`, given the trainable weights' specs.
    finalize: `(state, weighted_message_sum, weight_sum) -> (new state, update)`, where
      `weighted_message_sum` is `sum_i weight_i * message_i` (a list of tensors) and
      `weight_sum` the float32 `sum_i weight_i` over the round's clients.
  """

  initial_state: Callable[[Sequence[tf.TensorSpec]], Any]
  finalize: Callable[[Any, Any, tf.Tensor], tuple[Any, Any]]


def _no_state(specs):
  del specs
  return ()


def _mean_finalize(state, weighted_sum, weight_sum):
  return state, [tf.math.divide_no_nan(t, tf.cast(weight_sum, t.dtype)) for t in weighted_sum]


def weighted_mean() -> Aggregation:
  """`sum_i w_i m_i / sum_i w_i`; with every `w_i = 1` the authors' plain mean (stateless).

  Every `weighted_mean()` equals every other (`==`): the composer tells by it that a TFF
  aggregation factory may take the mean's place (`composer.compose(model_aggregator=...)`).
  """
  return Aggregation(initial_state=_no_state, finalize=_mean_finalize)


@attrs.frozen
class ClientInputs:
  """A per-client value the driver passes to `next` with the client states (e.g. a mask key).

  Attributes:
    spec: the `tf.TensorSpec` of one client's value.
    from_client_ids: `client ids -> list of values`, one per client, in order.
  """

  spec: tf.TensorSpec
  from_client_ids: Callable[[Sequence[str]], list]


def client_key(client_id: str) -> int:
  """A client's key for its random draws (masks, QSGD's rounding): the number ending its id
  ('client_7' -> 7), else a stable hash of the id."""
  match = re.fullmatch(r'\D*(\d+)', client_id)
  if match:
    return int(match.group(1))
  return zlib.crc32(client_id.encode('utf-8'))


def client_keys() -> ClientInputs:
  """Every client's `client_key` as its per-client input (int64)."""
  return ClientInputs(spec=tf.TensorSpec([], tf.int64),
                      from_client_ids=lambda ids: [client_key(cid) for cid in ids])


@attrs.frozen
class AlgorithmParts:
  """Everything that makes one algorithm (see the module docstring).

  Attributes:
    client_update: the client's round (`ClientUpdateFn`).
    initial_client_state: `list[tf.TensorSpec] -> state` of a new client (zeros shaped like
      the model, say), or None for an algorithm whose clients keep no state.
    client_inputs: per-client inputs, or None.
    schedule: the server-side round schedule (default: a round counter).
    aggregation: default `weighted_mean()`.
    server_metrics: `(statistics_sum, weight_sum) -> OrderedDict` of the round's
      algorithm-specific metrics, or None.
  """

  client_update: ClientUpdateFn
  initial_client_state: Callable[[Sequence[tf.TensorSpec]], Any] | None = None
  client_inputs: ClientInputs | None = None
  schedule: RoundSchedule = attrs.field(factory=round_counter)
  aggregation: Aggregation = attrs.field(factory=weighted_mean)
  server_metrics: Callable[[Any, tf.Tensor], Any] | None = None


# The pieces of `LocalTraining.penalty`'s answer: the penalty's gradient on the current
# weights, how many leading steps carry it (an int, `local_training.ALL_STEPS`), and whether
# the optimizer restarts after them (the authors' two-model switch).
Penalty = tuple[local_training.PenaltyGradientFn, Any, bool]


@attrs.frozen
class LocalTraining:
  """How a client trains before it compresses its delta (`local_training.train_locally`).

  Attributes:
    penalty: `(server_weights, client_state, params) -> Penalty`, or None for plain training.
    dataset: `(dataset, params) -> dataset` to train on (EC-FFL's adapted epochs), or None.
  """

  penalty: Callable[[Any, Any, Any], Penalty] | None = None
  dataset: Callable[[Any, Any], Any] | None = None


@attrs.frozen
class Compressor:
  """What a client sends of its model delta, and what it keeps for the next rounds.

  Attributes:
    compress: `(delta, client_state, params, client_input, num_examples) -> ClientOutput`:
      the message (list of tensors shaped like the weights), the client's new state, the
      counters (`entries_sent` at least: the nonzero entries sent), and optionally a weight
      and statistics. Called inside a `tf.function`.
    initial_state: `list[tf.TensorSpec] -> state` of a new client, or None (stateless).
    aggregation: how the server turns the summed messages into the update.
    client_inputs: per-client inputs the compressor takes (a mask key, say), or None.
    server_metrics: `(statistics_sum, weight_sum) -> OrderedDict`, or None.
  """

  compress: Callable[..., 'ClientOutput']
  initial_state: Callable[[Sequence[tf.TensorSpec]], Any] | None = None
  aggregation: Aggregation = attrs.field(factory=weighted_mean)
  client_inputs: ClientInputs | None = None
  server_metrics: Callable[[Any, tf.Tensor], Any] | None = None


def _dense(delta, client_state, params, client_input, num_examples) -> ClientOutput:
  del client_state, params, client_input, num_examples
  return ClientOutput(
      message=list(delta),
      counters=collections.OrderedDict(entries_sent=sparsification.count_nonzero(delta)))


def no_compression() -> Compressor:
  """The dense delta, as FedAvg sends it (no state)."""
  return Compressor(compress=_dense)


def client_update(training: LocalTraining, compressor: Compressor) -> ClientUpdateFn:
  """The client's round: `training` from the server weights, then `compressor` on the delta."""

  def update(model, optimizer, server_weights, params, dataset, client_state, client_input):
    if training.dataset is not None:
      dataset = training.dataset(dataset, params)
    penalty_gradient_fn, penalized_steps, restart = None, local_training.ALL_STEPS, False
    if training.penalty is not None:
      penalty_gradient_fn, penalized_steps, restart = training.penalty(
          server_weights, client_state, params)
    result = local_training.train_locally(model,
                                          optimizer,
                                          server_weights,
                                          dataset,
                                          penalty_gradient_fn=penalty_gradient_fn,
                                          penalized_steps=penalized_steps,
                                          restart_optimizer_after_penalty=restart)
    return compressor.compress(local_training.model_delta(result, server_weights), client_state,
                               params, client_input, result.num_examples)

  return update


def algorithm(training: LocalTraining,
              compressor: Compressor,
              schedule: RoundSchedule | None = None) -> AlgorithmParts:
  """The parts of an algorithm made of a local training and a compressor."""
  return AlgorithmParts(client_update=client_update(training, compressor),
                        initial_client_state=compressor.initial_state,
                        client_inputs=compressor.client_inputs,
                        schedule=schedule or round_counter(),
                        aggregation=compressor.aggregation,
                        server_metrics=compressor.server_metrics)
