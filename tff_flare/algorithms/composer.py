"""The one composer: an algorithm's parts (`parts.AlgorithmParts`) into a TFF iterative process.

Every process of this project is composed here, the way `tff.learning.algorithms` composes
theirs, from a distributor (TFF's broadcast), a client work, an aggregator and a finalizer,
with per-client state as in TFF's stateful-clients example: the states of the round's clients
enter `next` as a CLIENTS-placed value and leave it as one, and the driver keeps them between
rounds (`tff_flare.simulation.client_state`). Every process has the same `next`:

  next(state, client_data, client_states, client_inputs)
      -> RoundOutput(state, metrics, client_states)

`client_states` and `client_inputs` hold one value per client: a state (`()` for an algorithm
whose clients keep none) and an input such as a mask key (`()` when the algorithm takes none).
The server state is a `tff.learning.templates.LearningAlgorithmState` whose `client_work` part
is the algorithm's round schedule (`parts.RoundSchedule`: the round number, TAU, ...).

The TensorFlow of a round is a `RoundFunctions`, built once from the parts; the TFF process
wraps each function in a `tff.tensorflow.computation`, and the in-process executor
(`tff_flare.execution.inprocess`) calls the same functions directly, so the two cannot drift.

Non-finite results (one policy for every algorithm, `docs/faithfulness.md` "Non-finite
values"):
  * a client whose trained model, message, new state, statistics or weight holds a NaN or
    an Inf sends nothing: its weighted message, weight, statistics and training metrics are
    zero (it leaves the mean's denominator and the round's training loss, as in TFF's
    FedAvg) and it keeps its old state;
    `metrics['communication']['nonfinite_clients_total']` counts it;
  * an update that is still non-finite is not applied: the server model and optimizer state
    stay as they were, and `metrics['finalizer']['update_non_finite']` is 1 (TFF's
    finalizer rule);
  * a round in which every client was non-finite stops a run (`tff_flare.simulation.loop`),
    unless the run is told to go on.
"""

import collections
from collections.abc import Callable, Sequence
from typing import Any, Optional

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import parts as parts_lib
from tff_flare.algorithms import sparsification

ModelFn = Callable[[], tff.learning.models.VariableModel]


@attrs.frozen
class RoundOutput:
  """What `next` returns: the new server state, the round's metrics, the new client states."""

  state: Any
  metrics: Any
  client_states: Any


@attrs.frozen
class RoundPhases:
  """`next`, cut in two at the aggregation, for TFF's distributed runtime.

  TFF's mergeable execution context splits a computation's clients over workers and merges at
  the aggregation; a value computed before the aggregation reaches a CLIENTS-placed result
  only by being computed again after it, so `next` run as one computation would train every
  client twice to return the new client states. Run as these two, each client trains once.
  Both are built from the same bodies as `next`.

  Attributes:
    client_phase: `(state, client_data, client_states, client_inputs, client_indices)` ->
      CLIENTS-placed `OrderedDict(client_index, client_state, summable)`; no aggregation.
    server_phase: `(state, summable @CLIENTS) -> (new state, metrics)` @SERVER.
  """

  client_phase: tff.Computation
  server_phase: tff.Computation


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
      `summable` is summed over the round's clients.
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
  record_test_loss: Optional[Callable[[Any, Any], Any]]

  def server_step(self, state, summed):
    """`(state, summed client outputs) -> (new state, finalizer measurements)`.

    The server's round but its metrics (`round_metrics`, which builds Keras metric objects
    and so cannot run inside a `tf.function` traced more than once).
    """
    aggregator_state, update = self.aggregate(state.aggregator, summed['weighted_message'],
                                              summed['weight'])
    optimizer_state, trainable, measurements = self.apply_update(
        state.finalizer, state.global_model_weights.trainable, update)
    new_state = tff.learning.templates.LearningAlgorithmState(
        global_model_weights=tff.learning.models.ModelWeights(
            trainable=trainable, non_trainable=state.global_model_weights.non_trainable),
        distributor=state.distributor, client_work=self.advance(state.client_work),
        aggregator=aggregator_state, finalizer=optimizer_state)
    return new_state, measurements


class AlgorithmProcess(tff.templates.IterativeProcess):
  """An iterative process with this project's `next` (see the module docstring).

  Attributes:
    initial_client_state: `tff.Computation`, no argument, a new client's state.
    get_model_weights / set_model_weights: `tff.Computation`s, as in TFF's
      `LearningProcess`.
    record_test_loss: `tff.Computation` `(state, loss) -> state`, or None when the algorithm
      does not adapt to the test loss.
    num_trainable_parameters: Python int.
    phases: `RoundPhases` for distributed runs, or None when `next` can run whole there.
    round_functions: the `RoundFunctions` the process wraps, or None for a process that runs
      only on TFF's runtime (TFF's own algorithms).
    runs_only_on_tff: True when `round_functions` is None.
  """

  def __init__(self, initialize_fn, next_fn, *, initial_client_state, get_model_weights,
               set_model_weights, num_trainable_parameters: int,
               client_inputs: Optional[parts_lib.ClientInputs] = None,
               record_test_loss=None, phases: Optional[RoundPhases] = None,
               round_functions: Optional[RoundFunctions] = None):
    super().__init__(initialize_fn, next_fn)
    self.initial_client_state = initial_client_state
    self.get_model_weights = get_model_weights
    self.set_model_weights = set_model_weights
    self.num_trainable_parameters = num_trainable_parameters
    self.record_test_loss = record_test_loss
    self.phases = phases
    self.round_functions = round_functions
    self._client_inputs = client_inputs

  @property
  def runs_only_on_tff(self) -> bool:
    return self.round_functions is None

  @property
  def client_input_spec(self) -> Optional[tf.TensorSpec]:
    """The spec of one client's input, or None when the algorithm takes none."""
    return None if self._client_inputs is None else self._client_inputs.spec

  @property
  def uses_test_loss(self) -> bool:
    return self.record_test_loss is not None

  def client_inputs(self, client_ids: Sequence[str]) -> list:
    """The per-client inputs of these clients (`()` each when the algorithm takes none)."""
    if self._client_inputs is None:
      return [()] * len(client_ids)
    return list(self._client_inputs.from_client_ids(list(client_ids)))


def next_in_phases(process: AlgorithmProcess, state, client_data, client_states,
                   client_inputs) -> RoundOutput:
  """`process.next(...)`, run as its two `RoundPhases`.

  TFF 0.87's mergeable context returns the CLIENTS-placed results of its subrounds in the
  order the subrounds finish, not in client order: each output carries its client's position
  and is put back in place here.
  """
  num_clients = len(client_data)
  outputs = process.phases.client_phase(state, client_data, client_states, client_inputs,
                                        list(range(num_clients)))
  outputs = sorted(outputs, key=lambda o: int(o['client_index']))
  indices = [int(o['client_index']) for o in outputs]
  if indices != list(range(num_clients)):
    raise RuntimeError(f'The client phase returned outputs of clients {indices}, expected '
                       f'each of 0..{num_clients - 1} once.')
  new_state, metrics = process.phases.server_phase(state, [o['summable'] for o in outputs])
  return RoundOutput(state=new_state, metrics=metrics,
                     client_states=[o['client_state'] for o in outputs])


def trainable_specs(model_fn: ModelFn) -> list[tf.TensorSpec]:
  """Shapes and dtypes of the model's trainable weights, in order."""
  with tf.Graph().as_default():
    model = model_fn()
    return [tf.TensorSpec(v.shape, v.dtype) for v in model.trainable_variables]


def trainable_names(model_fn: ModelFn) -> list[str]:
  """Names of the model's trainable variables, in order (e.g. 'dense/kernel:0')."""
  with tf.Graph().as_default():
    return [v.name for v in model_fn().trainable_variables]


def _all_finite(structure) -> tf.Tensor:
  flags = [tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(structure)
           if t.dtype.is_floating]
  return tf.reduce_all(tf.stack(flags)) if flags else tf.constant(True)


def build_round_functions(model_fn: ModelFn, algorithm: parts_lib.AlgorithmParts, *,
                          client_optimizer: tff.learning.optimizers.Optimizer,
                          server_optimizer: tff.learning.optimizers.Optimizer
                          ) -> RoundFunctions:
  """The plain TensorFlow functions of a round of `algorithm` (see `RoundFunctions`)."""
  specs = trainable_specs(model_fn)
  num_parameters = sum(int(s.shape.num_elements()) for s in specs)
  with tf.Graph().as_default():
    # Only its metric constructors are used. TFF's Keras metric finalizers are `tf.function`s
    # that build a Keras metric on every trace, which `tf.function` refuses on a second one:
    # every call of `round_metrics` takes new ones, and eagerly runs their Python bodies.
    metrics_model = model_fn()

  def finalize_model_metrics(unfinalized):
    finalizers = metrics_model.metric_finalizers()
    if tf.executing_eagerly():
      finalizers = {name: f.python_function for name, f in finalizers.items()}
    return collections.OrderedDict(
        (name, finalize(unfinalized[name])) for name, finalize in finalizers.items())
  schedule = algorithm.schedule
  stateful = algorithm.initial_client_state is not None

  def initial_model_weights():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  def initial_server_state(model_weights):
    return tff.learning.templates.LearningAlgorithmState(
        global_model_weights=model_weights, distributor=(),
        client_work=schedule.initial_state(),
        aggregator=algorithm.aggregation.initial_state(specs),
        finalizer=server_optimizer.initialize(specs))

  def initial_client_state():
    return algorithm.initial_client_state(specs) if stateful else ()

  def client_work(model, server_weights, params, dataset, client_state, client_input):
    output = algorithm.client_update(model, client_optimizer, server_weights, params, dataset,
                                     client_state, client_input)
    weight = (tf.constant(1.0, tf.float32) if output.weight is None else
              tf.cast(output.weight, tf.float32))
    message = list(output.message)
    # The trained model too: a top-k of NaNs, say, can look finite.
    finite = _all_finite((message, output.client_state, output.statistics, weight,
                          [tf.convert_to_tensor(v) for v in model.trainable_variables]))
    weighted = message if output.weight is None else [weight * m for m in message]
    model_metrics = model.report_local_unfinalized_metrics()
    # A non-finite client sends nothing, keeps its old state and adds nothing to the round's
    # training metrics, as TFF's own client work zeroes them (see the module docstring).
    weighted, weight, statistics, new_state, model_metrics = tf.cond(
        finite, lambda: (weighted, weight, output.statistics, output.client_state,
                         model_metrics),
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
    return collections.OrderedDict(
        client_state=new_state,
        summable=collections.OrderedDict(
            weighted_message=weighted, weight=weight, counters=counters,
            statistics=statistics, model_metrics=model_metrics))

  def apply_update(optimizer_state, trainable, update):
    """The server step `s <- optimizer(s, -update)`; a non-finite update is not applied."""
    gradient = [-u for u in update]
    new_optimizer_state, new_trainable = server_optimizer.next(
        optimizer_state, tuple(trainable), tuple(gradient))
    non_finite = tf.logical_not(_all_finite(update))
    new_optimizer_state, new_trainable = tf.cond(
        non_finite, lambda: (optimizer_state, tuple(trainable)),
        lambda: (new_optimizer_state, tuple(new_trainable)))
    return new_optimizer_state, list(new_trainable), collections.OrderedDict(
        update_non_finite=tf.cast(non_finite, tf.int32))

  def round_metrics(schedule_state, summed, finalizer_measurements):
    metrics = collections.OrderedDict(
        train=finalize_model_metrics(summed['model_metrics']),
        communication=_communication_metrics(summed['counters'], num_parameters))
    metrics.update(schedule.report(schedule_state))
    if algorithm.server_metrics is not None:
      metrics.update(algorithm.server_metrics(summed['statistics'], summed['weight']))
    metrics['finalizer'] = finalizer_measurements
    return metrics

  record = None
  if schedule.record_test_loss is not None:

    def record(state, loss):
      return state._replace(client_work=schedule.record_test_loss(state.client_work, loss))

  return RoundFunctions(
      model_fn=model_fn, specs=specs, num_parameters=num_parameters, stateful=stateful,
      initial_model_weights=initial_model_weights, initial_server_state=initial_server_state,
      initial_client_state=initial_client_state, round_params=schedule.round_params,
      client_work=client_work, aggregate=algorithm.aggregation.finalize,
      apply_update=apply_update, advance=schedule.advance, round_metrics=round_metrics,
      record_test_loss=record)


def compose(model_fn: ModelFn, algorithm: parts_lib.AlgorithmParts, *,
            client_optimizer: tff.learning.optimizers.Optimizer,
            server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None
            ) -> AlgorithmProcess:
  """Builds the TFF process of `algorithm` (see the module docstring).

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    algorithm: the algorithm's `parts.AlgorithmParts`.
    client_optimizer: the local optimizer, re-initialized by every client every round.
    server_optimizer: applied to the negated update; default SGD with learning rate 1, the
      authors' `s <- s + update`.

  Returns:
    An `AlgorithmProcess`.
  """
  server_optimizer = server_optimizer or default_server_optimizer()
  functions = build_round_functions(model_fn, algorithm, client_optimizer=client_optimizer,
                                    server_optimizer=server_optimizer)
  specs, stateful = functions.specs, functions.stateful
  model_weights_type = tff.learning.models.weights_type_from_model(model_fn)
  with tf.Graph().as_default():
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model_fn().input_spec))

  @tff.tensorflow.computation
  def initial_client_state():
    return functions.initial_client_state()

  client_state_type = initial_client_state.type_signature.result
  if algorithm.client_inputs is None:
    client_input_type = tff.StructType([])
  else:
    client_input_type = tff.types.tensorflow_to_type(algorithm.client_inputs.spec)

  @tff.tensorflow.computation
  def initial_model_weights():
    return functions.initial_model_weights()

  @tff.tensorflow.computation
  def initial_schedule():
    return algorithm.schedule.initial_state()

  @tff.tensorflow.computation
  def initial_aggregator_state():
    return algorithm.aggregation.initial_state(specs)

  @tff.tensorflow.computation
  def initial_optimizer_state():
    return server_optimizer.initialize(specs)

  schedule_type = initial_schedule.type_signature.result

  @tff.tensorflow.computation(schedule_type)
  def round_params(schedule):
    return functions.round_params(schedule)

  @tff.tensorflow.computation(schedule_type)
  def advance(schedule):
    return functions.advance(schedule)

  @tff.tensorflow.computation(model_weights_type, round_params.type_signature.result,
                              data_type, client_state_type, client_input_type)
  def client_work(server_weights, params, dataset, client_state, client_input):
    model = model_fn()

    @tf.function
    def run(server_weights, params, dataset, client_state, client_input):
      return functions.client_work(model, server_weights, params, dataset, client_state,
                                   client_input)

    return run(server_weights, params, dataset, client_state, client_input)

  summable_type = client_work.type_signature.result['summable']
  distributor = tff.learning.templates.build_broadcast_process(model_weights_type)
  aggregator = _aggregation_process(functions.aggregate, initial_aggregator_state,
                                    summable_type)
  finalizer = _finalizer_process(functions.apply_update, initial_optimizer_state,
                                 model_weights_type)
  sums_type = tff.StructWithPythonType(
      [(name, summable_type[name]) for name in ('weight', 'counters', 'statistics',
                                                'model_metrics')], collections.OrderedDict)

  @tff.tensorflow.computation(schedule_type, sums_type,
                              finalizer.next.type_signature.result.measurements.member)
  def round_metrics(schedule, sums, measurements):
    return functions.round_metrics(schedule, sums, measurements)

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_zip(tff.learning.templates.LearningAlgorithmState(
        global_model_weights=tff.federated_eval(initial_model_weights, tff.SERVER),
        distributor=distributor.initialize(),
        client_work=tff.federated_eval(initial_schedule, tff.SERVER),
        aggregator=aggregator.initialize(), finalizer=finalizer.initialize()))

  state_type = initialize_fn.type_signature.result

  def client_phase_body(state, client_data, client_states, client_inputs):
    params = tff.federated_map(round_params, state.client_work)
    # TFF's broadcast process is stateless: its (empty) new state is not carried out.
    weights = distributor.next(state.distributor, state.global_model_weights).result
    return tff.federated_map(client_work, (weights, tff.federated_broadcast(params),
                                           client_data, client_states, client_inputs))

  def server_phase_body(state, summable):
    aggregator_output = aggregator.next(state.aggregator, summable.weighted_message,
                                        summable.weight)
    finalizer_output = finalizer.next(state.finalizer, state.global_model_weights,
                                      aggregator_output.result)
    sums = tff.federated_sum(collections.OrderedDict(
        weight=summable.weight, counters=summable.counters, statistics=summable.statistics,
        model_metrics=summable.model_metrics))
    metrics = tff.federated_map(round_metrics,
                                (state.client_work, sums, finalizer_output.measurements))
    new_state = tff.federated_zip(tff.learning.templates.LearningAlgorithmState(
        global_model_weights=finalizer_output.result, distributor=state.distributor,
        client_work=tff.federated_map(advance, state.client_work),
        aggregator=aggregator_output.state, finalizer=finalizer_output.state))
    return new_state, metrics

  client_types = (tff.FederatedType(data_type, tff.CLIENTS),
                  tff.FederatedType(client_state_type, tff.CLIENTS),
                  tff.FederatedType(client_input_type, tff.CLIENTS))

  @tff.federated_computation(state_type, *client_types)
  def next_fn(state, client_data, client_states, client_inputs):
    outputs = client_phase_body(state, client_data, client_states, client_inputs)
    new_state, metrics = server_phase_body(state, outputs.summable)
    # A stateless algorithm's (empty) states pass through: nothing computed before the
    # aggregation reaches a CLIENTS-placed result, so TFF's distributed runtime can run
    # `next` whole (see `RoundPhases`).
    new_client_states = outputs.client_state if stateful else client_states
    return RoundOutput(state=new_state, metrics=metrics, client_states=new_client_states)

  phases = None
  if stateful:
    client_output_type = client_work.type_signature.result

    @tff.tensorflow.computation(client_output_type, np.int32)
    def tag_with_index(output, client_index):
      return collections.OrderedDict(client_index=client_index,
                                     client_state=output['client_state'],
                                     summable=output['summable'])

    @tff.federated_computation(state_type, *client_types,
                               tff.FederatedType(np.int32, tff.CLIENTS))
    def client_phase(state, client_data, client_states, client_inputs, client_indices):
      outputs = client_phase_body(state, client_data, client_states, client_inputs)
      return tff.federated_map(tag_with_index, (outputs, client_indices))

    @tff.federated_computation(state_type, tff.FederatedType(summable_type, tff.CLIENTS))
    def server_phase(state, summable):
      return server_phase_body(state, summable)

    phases = RoundPhases(client_phase=client_phase, server_phase=server_phase)

  record_test_loss = None
  if functions.record_test_loss is not None:

    @tff.tensorflow.computation(state_type.member, np.float32)
    def record_test_loss(state, loss):
      return functions.record_test_loss(state, loss)

  get_model_weights, set_model_weights = build_model_weights_accessors(state_type,
                                                                       model_weights_type)
  return AlgorithmProcess(
      initialize_fn, next_fn, initial_client_state=initial_client_state,
      get_model_weights=get_model_weights, set_model_weights=set_model_weights,
      num_trainable_parameters=functions.num_parameters, client_inputs=algorithm.client_inputs,
      record_test_loss=record_test_loss, phases=phases, round_functions=functions)


def default_server_optimizer() -> tff.learning.optimizers.Optimizer:
  """The authors' server step: SGD with learning rate 1 (`s <- s + update`)."""
  return tff.learning.optimizers.build_sgdm(learning_rate=1.0)


def _aggregation_process(aggregate, initial_state, summable_type
                         ) -> tff.templates.AggregationProcess:
  """`aggregate` (`parts.Aggregation.finalize`) as a TFF `AggregationProcess(state,
  weighted_messages, weights)` that sums the clients' values first."""
  state_type = initial_state.type_signature.result
  message_type = summable_type['weighted_message']

  @tff.tensorflow.computation(state_type, message_type, np.float32)
  def finalize(state, weighted_sum, weight_sum):
    return aggregate(state, weighted_sum, weight_sum)

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_eval(initial_state, tff.SERVER)

  @tff.federated_computation(initialize_fn.type_signature.result,
                             tff.FederatedType(message_type, tff.CLIENTS),
                             tff.FederatedType(np.float32, tff.CLIENTS))
  def next_fn(state, weighted_messages, weights):
    new_state, update = tff.federated_map(
        finalize, (state, tff.federated_sum(weighted_messages), tff.federated_sum(weights)))
    return tff.templates.MeasuredProcessOutput(
        state=new_state, result=update, measurements=tff.federated_value((), tff.SERVER))

  return tff.templates.AggregationProcess(initialize_fn, next_fn)


def _finalizer_process(apply_update, initial_optimizer_state, model_weights_type
                       ) -> tff.learning.templates.FinalizerProcess:
  """The server step as a TFF `FinalizerProcess` (as `build_apply_optimizer_finalizer`)."""
  optimizer_state_type = initial_optimizer_state.type_signature.result

  @tff.tensorflow.computation(optimizer_state_type, model_weights_type.trainable,
                              model_weights_type.trainable)
  def apply(optimizer_state, trainable, update):
    return apply_update(optimizer_state, trainable, update)

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_eval(initial_optimizer_state, tff.SERVER)

  @tff.federated_computation(initialize_fn.type_signature.result,
                             tff.FederatedType(model_weights_type, tff.SERVER),
                             tff.FederatedType(model_weights_type.trainable, tff.SERVER))
  def next_fn(state, weights, update):
    new_state, trainable, measurements = tff.federated_map(
        apply, (state, weights.trainable, update))
    new_weights = tff.federated_zip(
        tff.learning.models.ModelWeights(trainable, weights.non_trainable))
    return tff.templates.MeasuredProcessOutput(state=new_state, result=new_weights,
                                               measurements=measurements)

  return tff.learning.templates.FinalizerProcess(initialize_fn, next_fn)


def build_model_weights_accessors(state_type, model_weights_type):
  """`(get_model_weights, set_model_weights)` computations on a `LearningAlgorithmState`."""

  @tff.tensorflow.computation(state_type.member)
  def get_model_weights(state):
    return state.global_model_weights

  @tff.tensorflow.computation(state_type.member, model_weights_type)
  def set_model_weights(state, model_weights):
    return tff.learning.templates.LearningAlgorithmState(
        global_model_weights=model_weights, distributor=state.distributor,
        client_work=state.client_work, aggregator=state.aggregator, finalizer=state.finalizer)

  return get_model_weights, set_model_weights


def _communication_metrics(counters, num_parameters: int):
  """Server-side communication figures from the summed client counters.

  Returns an `OrderedDict`: every summed counter (`entries_sent`, `bytes_sent`, `num_clients`,
  `nonfinite_clients`, ...) under its own name with a `_total` suffix (`bytes_sent`: per
  client, a float32 value + int32 index per entry, or the dense float32 tensor when smaller),
  plus `entries_sent_per_client` (mean nonzeros a client sent) and `density` (fraction of the
  `num_clients * num_parameters` entries actually sent).
  """
  metrics = collections.OrderedDict(
      (f'{name}_total', value) for name, value in counters.items())
  num_clients = tf.maximum(counters['num_clients'], 1)
  entries = counters['entries_sent']
  metrics['entries_sent_per_client'] = (
      tf.cast(entries, tf.float64) / tf.cast(num_clients, tf.float64))
  metrics['density'] = tf.cast(entries, tf.float64) / (
      tf.cast(num_clients, tf.float64) * float(num_parameters))
  return metrics
