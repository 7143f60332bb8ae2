"""What an algorithm supplies to the composer: plain TensorFlow functions, no TFF wiring.

Every algorithm of this project (FLARE, EC, EC+FedProx, EC-FFL, EF21, FedAvg, update
masking) is an `AlgorithmParts`: a client update, an optional client state, optional
per-client inputs, a round schedule held at the server, an aggregation and optional server
metrics. `composer.compose` wires the parts into a TFF iterative process; the in-process
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
from typing import Any, Optional

import attrs
import tensorflow as tf

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
  record_test_loss: Optional[Callable[[Any, tf.Tensor], Any]] = None


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


def _mean_finalize(state, weighted_sum, weight_sum):
  return state, [tf.math.divide_no_nan(t, tf.cast(weight_sum, t.dtype)) for t in weighted_sum]


def weighted_mean() -> Aggregation:
  """`sum_i w_i m_i / sum_i w_i`; with every `w_i = 1` the authors' plain mean (stateless)."""
  return Aggregation(initial_state=lambda specs: (), finalize=_mean_finalize)


@attrs.frozen
class ClientInputs:
  """A per-client value the driver passes to `next` with the client states (e.g. a mask key).

  Attributes:
    spec: the `tf.TensorSpec` of one client's value.
    from_client_ids: `client ids -> list of values`, one per client, in order.
  """

  spec: tf.TensorSpec
  from_client_ids: Callable[[Sequence[str]], list]


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
  initial_client_state: Optional[Callable[[Sequence[tf.TensorSpec]], Any]] = None
  client_inputs: Optional[ClientInputs] = None
  schedule: RoundSchedule = attrs.field(factory=round_counter)
  aggregation: Aggregation = attrs.field(factory=weighted_mean)
  server_metrics: Optional[Callable[[Any, tf.Tensor], Any]] = None
