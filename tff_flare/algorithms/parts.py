"""What an algorithm supplies to the composer: plain TensorFlow functions, no TFF wiring.

Every algorithm of this project (FLARE, EC, EC+FedProx, EC-FFL, EF21, FedAvg, update
masking, QSGD with error feedback) is an `AlgorithmParts` of three, as TFF separates client
work from aggregation and pfl-research adds postprocessors:

  * a `LocalTraining`: plain, or with a penalty made from the server weights, the client's
    state and the round's parameters (FLARE's pull, EC+FedProx's proximal term), or on a
    dataset the round adapts (EC-FFL's epochs);
  * a `Compressor`: what the client sends of its delta and what it keeps
    (`compress(delta, state, params, input, num_examples) -> ClientOutput`), with its
    clients' initial state, the server's aggregation of the messages and its metrics;
  * a `RoundSchedule`: the algorithm's server state and what it broadcasts (TAU_r, say).

FLARE is `LocalTraining(flare_pull)` + top-k error feedback + the TAU schedule, EC plain
training + the same feedback, EF21 and update masking their own compressors. A new
compressor is one module (`qsgd` shows one). `round_functions` makes a round's TensorFlow of
the parts and `composer.compose` wires it into a TFF iterative process; the in-process
executor (`tff_flare.execution.inprocess`) runs the very same functions without TFF's
runtime, so both ways of running an algorithm compute the same arithmetic.

A round, in terms of the parts (`r` the round, `s` the server model):

  1. `params = schedule.round_params(schedule_state)` at the server, broadcast with `s`;
  2. each client trains from `s` (`training`, `local_training.train_locally`), then
     `compressor.compress(w - s, client_state, params, client_input, num_examples)`;
  3. the server sums `weight * message`, `weight`, the counters and the statistics over the
     clients, and `compressor.aggregation.finalize` turns the sums into the update (a
     weighted mean by default: every client weighs 1, as the authors average);
  4. the server optimizer applies the update (SGD with learning rate 1: `s <- s + update`),
     `schedule.advance` moves the schedule on, and the compressor's `server_metrics` reads
     the statistics.
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
class LocalTraining:
  """How a client trains before it compresses its delta (`local_training.train_locally`).

  Attributes:
    penalty: `(server_weights, client_state, params) -> local_training.Penalty` (the
      gradient of a term added to the loss, on which steps, and whether the optimizer
      restarts after them), or None for plain training.
    dataset: `(dataset, params) -> dataset` to train on (EC-FFL's adapted epochs), or None.
  """

  penalty: Callable[[Any, Any, Any], local_training.Penalty] | None = None
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


@attrs.frozen
class AlgorithmParts:
  """Everything that makes one algorithm (see the module docstring): how a client trains,
  what it sends of its delta and keeps (with the server's aggregation and metrics of it),
  and the round schedule held at the server."""

  training: LocalTraining = attrs.field(factory=LocalTraining)
  compressor: Compressor = attrs.field(factory=no_compression)
  schedule: RoundSchedule = attrs.field(factory=round_counter)
