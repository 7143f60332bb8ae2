"""The TensorFlow of a round: an algorithm's parts as plain functions, no TFF wiring.

`build_round_functions(model_fn, parts, ...)` gives a `RoundFunctions`, built once from the
parts; the TFF process wraps each function in a `tff.tensorflow.computation`
(`composer.compose`), and the in-process executor (`tff_flare.execution.inprocess`) calls
the same functions directly, so the two cannot drift.

Non-finite results (one policy for every algorithm, `docs/faithfulness.md` "Non-finite
values"):
  * a client whose trained model, message, new state, statistics or weight holds a NaN or
    an Inf sends nothing: its weighted message, weight, statistics and training metrics are
    zero (it leaves the mean's denominator and the round's training loss, as in TFF's
    FedAvg) and it keeps its old state;
    `metrics['aggregator']['communication']['nonfinite_clients_total']` counts it;
  * an update that is still non-finite is not applied: the server model and optimizer state
    stay as they were, and `metrics['finalizer']['update_non_finite']` is 1 (TFF's
    finalizer rule);
  * a round in which every client was non-finite stops a run (`tff_flare.simulation.hooks`),
    unless the run is told to go on.

The round's metrics are namespaced per component, as in TFF's composed processes:
`client_work` (`train`: the model's own loss and metrics; the schedule's values, e.g. `tau`),
`aggregator` (`communication`: what the clients sent; an algorithm's server statistics, e.g.
update masking's `survival`; a TFF aggregation factory's measurements) and `finalizer`.

Bytes on the wire (`metrics['aggregator']['communication']['bytes_sent_total']`): per client,
a float32 value and an int32 index per nonzero entry, or the dense float32 tensor when that is
smaller.
"""

import collections
from collections.abc import Callable
from typing import Any

import attrs
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import local_training
from tff_flare.algorithms import model_facts as model_facts_lib
from tff_flare.algorithms import parts as parts_lib
from tff_flare.algorithms import sparsification

ModelFn = model_facts_lib.ModelFn


@attrs.frozen
class RoundFunctions:
  """The TensorFlow of a round (see the module docstring); plain functions, no TFF.

  Attributes:
    model_fn: the algorithm's model constructor.
    specs: the trainable weights' `tf.TensorSpec`s; `num_parameters` their total size.
    stateful: whether the algorithm's clients keep a state.
    initial_model_weights: `() -> ModelWeights`, builds a model and reads its weights.
    initial_server_state: `(model_weights) -> LearningAlgorithmState`.
    initial_client_state: `() -> state` of a new client (`()` when stateless).
    round_params: `schedule_state -> params` broadcast to the round's clients.
    client_work: `(model, server_weights, params, dataset, client_state, client_input) ->
      OrderedDict(client_state, summable)`: the client update under the non-finite policy;
      `summable` (`weighted_message` = weight * message, or with `weigh_messages=False`
      the `message` itself for a TFF aggregation factory to weigh; `weight`, `counters`,
      `statistics`, `model_metrics`) is summed over the round's clients.
    aggregate: `(aggregator_state, weighted_message_sum, weight_sum) -> (state, update)`.
    apply_update: `(optimizer_state, trainable, update) -> (state, trainable, measurements)`.
    advance: `schedule_state -> schedule_state`.
    round_metrics: `(schedule_state, sums, finalizer_measurements) -> metrics`, `sums` being
      the summed `weight`, `counters`, `statistics` and `model_metrics`.
    record_test_loss: `(state, loss) -> state`, or None (see `parts.RoundSchedule`).
  """

  model_fn: ModelFn
  specs: list[tf.TensorSpec]
  num_parameters: int
  stateful: bool
  initial_model_weights: Callable[[], Any]
  initial_server_state: Callable[[Any], Any]
  initial_client_state: Callable[[], Any]
  round_params: Callable[[Any], Any]
  client_work: Callable[..., Any]
  aggregate: Callable[..., Any]
  apply_update: Callable[..., Any]
  advance: Callable[[Any], Any]
  round_metrics: Callable[..., Any]
  record_test_loss: Callable[[Any, Any], Any] | None

  def update_server(self, state, summed):
    """`(state, summed client outputs) -> (new state, finalizer measurements)`.

    The server's round but its metrics (`round_metrics`, which builds Keras metric objects
    and so cannot run inside a `tf.function` traced more than once). Every execution mode
    runs the server this way (`update_server_with_metrics` adds the metrics): the TFF process as one
    computation, the in-process executor as one `tf.function`.
    """
    aggregator_state, update = self.aggregate(state.aggregator, summed['weighted_message'],
                                              summed['weight'])
    return self.apply_and_advance(state, aggregator_state, update)

  def update_server_with_metrics(self, state, summed):
    """`(state, summed client outputs) -> (new state, metrics)`: `update_server`, then
    `round_metrics` (traced once: inside one TFF computation, or run eagerly)."""
    new_state, measurements = self.update_server(state, summed)
    return new_state, self.round_metrics(state.client_work, summed, measurements)

  def apply_and_advance(self, state, aggregator_state, update):
    """`(state, new aggregator state, update) -> (new state, finalizer measurements)`: the
    server optimizer's step on `update` and the schedule's advance (the part of
    `update_server` after the aggregation; after a TFF aggregation factory's, on its own)."""
    optimizer_state, trainable, measurements = self.apply_update(
        state.finalizer, state.global_model_weights.trainable, update)
    new_state = tff.learning.templates.LearningAlgorithmState(
        global_model_weights=tff.learning.models.ModelWeights(
            trainable=trainable, non_trainable=state.global_model_weights.non_trainable),
        distributor=state.distributor,
        client_work=self.advance(state.client_work),
        aggregator=aggregator_state,
        finalizer=optimizer_state)
    return new_state, measurements


def _all_finite(structure) -> tf.Tensor:
  flags = [
      tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(structure) if t.dtype.is_floating
  ]
  return tf.reduce_all(tf.stack(flags)) if flags else tf.constant(True)


def build_round_functions(
    model_fn: ModelFn,
    algorithm: parts_lib.AlgorithmParts,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    server_optimizer: tff.learning.optimizers.Optimizer,
    weigh_messages: bool = True,
    client_weighting: tff.learning.ClientWeighting = (tff.learning.ClientWeighting.UNIFORM)
) -> RoundFunctions:
  """The plain TensorFlow functions of a round of `algorithm` (see `RoundFunctions`).

  `weigh_messages=False` leaves the weighing to a TFF aggregation factory: the summable
  holds the client's `message` in place of `weight * message`. `client_weighting`
  `NUM_EXAMPLES` weighs a client that sets no weight of its own by the examples it trained
  on (the model's `num_examples` metric), as TFF's weighted FedAvg does; `UNIFORM` by 1.
  """
  by_examples = client_weighting == tff.learning.ClientWeighting.NUM_EXAMPLES
  facts = model_facts_lib.model_facts(model_fn)
  specs, num_parameters = list(facts.specs), facts.num_parameters
  # Only its metric constructors are used. TFF's Keras metric finalizers are `tf.function`s
  # that build a Keras metric on every trace, which `tf.function` refuses on a second one:
  # every call of `round_metrics` takes new ones, and eagerly runs their Python bodies.
  metrics_model = facts.metrics_model

  def finalize_model_metrics(unfinalized):
    finalizers = metrics_model.metric_finalizers()
    if tf.executing_eagerly():
      finalizers = {name: f.python_function for name, f in finalizers.items()}
    return collections.OrderedDict(
        (name, finalize(unfinalized[name])) for name, finalize in finalizers.items())

  training, compressor, schedule = algorithm.training, algorithm.compressor, algorithm.schedule
  stateful = compressor.initial_state is not None

  def initial_model_weights():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  def initial_server_state(model_weights):
    return tff.learning.templates.LearningAlgorithmState(
        global_model_weights=model_weights,
        distributor=(),
        client_work=schedule.initial_state(),
        aggregator=compressor.aggregation.initial_state(specs),
        finalizer=server_optimizer.initialize(specs))

  def initial_client_state():
    return compressor.initial_state(specs) if stateful else ()

  def client_work(model, server_weights, params, dataset, client_state, client_input):
    # 1. Local training from the server weights (with the algorithm's penalty, if any).
    if training.dataset is not None:
      dataset = training.dataset(dataset, params)
    penalty = None
    if training.penalty is not None:
      penalty = training.penalty(server_weights, client_state, params)
    trained = local_training.train_locally(model, client_optimizer, server_weights, dataset,
                                           penalty)
    # 2. What the client sends of its delta `w - s`, and keeps.
    output = compressor.compress(local_training.model_delta(trained, server_weights), client_state,
                                 params, client_input, trained.num_examples)
    # 3. Its weight, counters and metrics, under the non-finite policy (the module docstring).
    model_metrics = model.report_local_unfinalized_metrics()
    own_weight = output.weight
    if own_weight is None and by_examples:
      own_weight = tf.add_n([
          tf.cast(tf.reduce_sum(v), tf.float32)
          for v in tf.nest.flatten(model_metrics['num_examples'])
      ])
    weight = (tf.constant(1.0, tf.float32) if own_weight is None else tf.cast(
        own_weight, tf.float32))
    message = list(output.message)
    # The trained model too: a top-k of NaNs, say, can look finite.
    finite = _all_finite((message, output.client_state, output.statistics, weight,
                          [tf.convert_to_tensor(v) for v in model.trainable_variables]))
    weighted = message if own_weight is None or not weigh_messages else [
        weight * m for m in message
    ]
    # A non-finite client sends nothing, keeps its old state and adds nothing to the round's
    # training metrics, as TFF's own client work zeroes them (see the module docstring).
    weighted, weight, statistics, new_state, model_metrics = tf.cond(
        finite, lambda: (weighted, weight, output.statistics, output.client_state, model_metrics),
        lambda: (tf.nest.map_structure(tf.zeros_like, weighted), tf.zeros_like(weight),
                 tf.nest.map_structure(tf.zeros_like, output.statistics), client_state,
                 tf.nest.map_structure(tf.zeros_like, model_metrics)))
    counters = collections.OrderedDict(
        (name, tf.where(finite, tf.cast(value, tf.int64), tf.constant(0, tf.int64)))
        for name, value in output.counters.items())
    # On the wire: a (value, index) list, or the dense float32 tensor when that is smaller.
    counters['bytes_sent'] = tf.minimum(
        sparsification.sparse_encoding_bytes(counters['entries_sent']),
        tf.constant(sparsification.BYTES_PER_VALUE * num_parameters, tf.int64))
    counters['num_clients'] = tf.constant(1, tf.int64)
    counters['nonfinite_clients'] = tf.where(finite, tf.constant(0, tf.int64),
                                             tf.constant(1, tf.int64))
    return collections.OrderedDict(client_state=new_state,
                                   summable=collections.OrderedDict([
                                       ('weighted_message' if weigh_messages else 'message',
                                        weighted), ('weight', weight), ('counters', counters),
                                       ('statistics', statistics), ('model_metrics', model_metrics)
                                   ]))

  def apply_update(optimizer_state, trainable, update):
    """The server step `s <- optimizer(s, -update)`; a non-finite update is not applied."""
    gradient = [-u for u in update]
    new_optimizer_state, new_trainable = server_optimizer.next(optimizer_state, tuple(trainable),
                                                               tuple(gradient))
    non_finite = tf.logical_not(_all_finite(update))
    new_optimizer_state, new_trainable = tf.cond(
        non_finite, lambda: (optimizer_state, tuple(trainable)), lambda:
        (new_optimizer_state, tuple(new_trainable)))
    return new_optimizer_state, list(new_trainable), collections.OrderedDict(
        update_non_finite=tf.cast(non_finite, tf.int32))

  def round_metrics(schedule_state, summed, finalizer_measurements):
    # Namespaced per component, as TFF's composed processes report theirs.
    client_work = collections.OrderedDict(train=finalize_model_metrics(summed['model_metrics']))
    client_work.update(schedule.report(schedule_state))
    aggregator = collections.OrderedDict(
        communication=_communication_metrics(summed['counters'], num_parameters))
    if compressor.server_metrics is not None:
      aggregator.update(compressor.server_metrics(summed['statistics'], summed['weight']))
    return collections.OrderedDict(client_work=client_work,
                                   aggregator=aggregator,
                                   finalizer=finalizer_measurements)

  record: Callable[[Any, Any], Any] | None = None
  if schedule.record_test_loss is not None:
    record_loss = schedule.record_test_loss

    def record(state, loss):
      return state._replace(client_work=record_loss(state.client_work, loss))

  return RoundFunctions(model_fn=model_fn,
                        specs=specs,
                        num_parameters=num_parameters,
                        stateful=stateful,
                        initial_model_weights=initial_model_weights,
                        initial_server_state=initial_server_state,
                        initial_client_state=initial_client_state,
                        round_params=schedule.round_params,
                        client_work=client_work,
                        aggregate=compressor.aggregation.finalize,
                        apply_update=apply_update,
                        advance=schedule.advance,
                        round_metrics=round_metrics,
                        record_test_loss=record)


def default_server_optimizer() -> tff.learning.optimizers.Optimizer:
  """The authors' server step: SGD with learning rate 1 (`s <- s + update`)."""
  return tff.learning.optimizers.build_sgdm(learning_rate=1.0)


def _communication_metrics(counters, num_parameters: int):
  """Server-side communication figures from the summed client counters.

  Returns an `OrderedDict`: every summed counter (`entries_sent`, `bytes_sent`, `num_clients`,
  `nonfinite_clients`, ...) under its own name with a `_total` suffix (`bytes_sent`: per
  client, a float32 value + int32 index per entry, or the dense float32 tensor when smaller),
  plus `entries_sent_per_client` (mean nonzeros a client sent) and `density` (fraction of the
  `num_clients * num_parameters` entries actually sent).
  """
  metrics = collections.OrderedDict((f'{name}_total', value) for name, value in counters.items())
  num_clients = tf.maximum(counters['num_clients'], 1)
  entries = counters['entries_sent']
  metrics['entries_sent_per_client'] = (tf.cast(entries, tf.float64) /
                                        tf.cast(num_clients, tf.float64))
  metrics['density'] = tf.cast(
      entries, tf.float64) / (tf.cast(num_clients, tf.float64) * float(num_parameters))
  return metrics
