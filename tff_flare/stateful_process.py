"""Composes a federated algorithm with per-client state into a TFF iterative process.

The algorithms of the FLARE paper differ only in what a client does with its model delta
(compress it, keep a residual, add a penalty) and in how the server combines the messages.
This module wires the parts the way `tff.learning.algorithms` does (a distributor, a client
work, an aggregator, a finalizer), with one addition taken from TFF's stateful-clients
example: the client state (an accumulator, an EF21 state) enters `next` as a CLIENTS-placed
value and leaves it as one, and the simulation driver keeps it between rounds, keyed by
client id (`client_state.ClientStateStore`).

`next(state, client_data, client_states) -> StatefulClientsOutput(state, metrics, client_states)`
reads, round by round:

  1. compute the round's penalty strength `tau_r` at the server and broadcast it with the model;
  2. every client trains, compresses, and returns (message, new client state, counters);
  3. the aggregator combines the messages (an unweighted mean by default, spec §2);
  4. the finalizer applies the aggregate with the server optimizer (SGD, lr 1 by default,
     so `s <- s + mean_i message_i`).

Processes whose clients keep no state (FedAvg) have `next(state, client_data)` and return a
`tff.learning.templates.LearningProcessOutput`.

Non-finite client results: a client whose message or new state has a NaN/Inf sends zeros and
keeps its old state, and `metrics['communication']['nonfinite_clients']` counts it. With the
unweighted mean it then counts as a client that sent nothing (TFF's FedAvg instead gives such
a client weight 0 in a weighted mean).
"""

import collections
from collections.abc import Callable
from typing import Any, Optional

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare import schedules
from tff_flare import sparsification

ModelFn = Callable[[], tff.learning.models.VariableModel]


@attrs.define(frozen=True)
class ClientOutput:
  """What an algorithm's client update returns (inside TensorFlow).

  Attributes:
    message: list of tensors shaped like the trainable weights, sent to the server.
    client_state: the client's new state (an `OrderedDict` of tensor lists), or `()`.
    counters: `OrderedDict` of int64 scalars summed over clients; must hold `entries_sent`,
      the nonzero entries the client puts on the wire.
  """

  message: Any
  client_state: Any
  counters: Any


@attrs.define(frozen=True)
class StatefulClientsOutput:
  """Result of `next` for processes with client state."""

  state: Any
  metrics: Any
  client_states: Any


@attrs.define(frozen=True)
class RoundPhases:
  """`next` of a process with client state, cut in two at the aggregation.

  TFF's distributed runtime (`tff.backends.native.create_mergeable_comp_execution_context`)
  splits a computation's clients over workers and merges at its one aggregation, but a value
  computed before the aggregation reaches a CLIENTS-placed result only by being computed again
  after it: run as one computation, `next` would train every client twice to return the new
  client states. Run as these two computations, each client trains once. `next` is composed
  of the same two bodies, so the phases compute exactly what `next` computes.

  Attributes:
    client_phase: `(state, client_data, client_states, client_indices) -> client outputs
      @CLIENTS`, each an `OrderedDict(client_index, message, client_state, counters,
      model_metrics)` (`client_indices`: int32 @CLIENTS, echoed); no aggregation.
    server_phase: `(state, messages, counters, model_metrics)` (the client outputs' fields,
      @CLIENTS) `-> LearningProcessOutput(state, metrics)`.
  """

  client_phase: tff.Computation
  server_phase: tff.Computation


def next_in_phases(process: 'StatefulClientsProcess', state, client_data, client_states
                   ) -> StatefulClientsOutput:
  """`process.next(state, client_data, client_states)`, run as its two `RoundPhases`.

  Each client output carries its client's position: TFF 0.87's mergeable context returns the
  CLIENTS-placed results of its subrounds in the order the subrounds finish, not in client
  order, so the outputs are put back in client order here.
  """
  outputs = process.phases.client_phase(state, client_data, client_states,
                                        list(range(len(client_data))))
  outputs = sorted(outputs, key=lambda o: int(o['client_index']))
  if [int(o['client_index']) for o in outputs] != list(range(len(client_data))):
    raise RuntimeError(f'The client phase returned outputs of clients '
                       f'{[int(o["client_index"]) for o in outputs]}, expected each of '
                       f'0..{len(client_data) - 1} once.')
  result = process.phases.server_phase(
      state, [o['message'] for o in outputs], [o['counters'] for o in outputs],
      [o['model_metrics'] for o in outputs])
  return StatefulClientsOutput(state=result.state, metrics=result.metrics,
                               client_states=[o['client_state'] for o in outputs])


# client_update_fn(model, optimizer, server_weights, tau, dataset, client_state) -> ClientOutput
ClientUpdateFn = Callable[..., ClientOutput]


class StatefulClientsProcess(tff.templates.IterativeProcess):
  """An iterative process whose `next` takes and returns CLIENTS-placed client states.

  Attributes:
    initial_client_state: a `tff.Computation` with no argument returning a new client's
      state (zeros shaped like the model), or `None` when clients keep no state.
    get_model_weights: a `tff.Computation` mapping the server state to its `ModelWeights`.
    set_model_weights: a `tff.Computation` `(state, ModelWeights) -> state` (as in
      `tff.learning.templates.LearningProcess`), e.g. to start several algorithms from one
      initial model.
    num_trainable_parameters: Python int, entries in the trainable weights.
    phases: `next` cut at the aggregation (`RoundPhases`), for processes with client state;
      `None` otherwise.
  """

  def __init__(self, initialize_fn, next_fn, *, initial_client_state, get_model_weights,
               set_model_weights, num_trainable_parameters: int,
               phases: Optional['RoundPhases'] = None):
    super().__init__(initialize_fn, next_fn)
    self.phases = phases
    self.initial_client_state = initial_client_state
    self.get_model_weights = get_model_weights
    self.set_model_weights = set_model_weights
    self.num_trainable_parameters = num_trainable_parameters

  @property
  def has_client_state(self) -> bool:
    return self.initial_client_state is not None


def _zeros_like_specs(specs):
  return [tf.zeros(s.shape, s.dtype) for s in specs]


def _all_finite(structure) -> tf.Tensor:
  flags = [tf.reduce_all(tf.math.is_finite(t)) for t in tf.nest.flatten(structure)]
  return tf.reduce_all(tf.stack(flags)) if flags else tf.constant(True)


def trainable_specs(model_fn: ModelFn) -> list[tf.TensorSpec]:
  """Shapes and dtypes of the model's trainable weights, in order."""
  with tf.Graph().as_default():
    model = model_fn()
    return [tf.TensorSpec(v.shape, v.dtype) for v in model.trainable_variables]


def trainable_names(model_fn: ModelFn) -> list[str]:
  """Names of the model's trainable variables, in order (e.g. 'dense/kernel:0')."""
  with tf.Graph().as_default():
    return [v.name for v in model_fn().trainable_variables]


def build_stateful_clients_process(
    model_fn: ModelFn,
    *,
    client_update_fn: ClientUpdateFn,
    client_state_fn: Optional[Callable[[list[tf.TensorSpec]], Any]],
    client_optimizer: tff.learning.optimizers.Optimizer,
    server_optimizer: tff.learning.optimizers.Optimizer,
    model_aggregator: tff.aggregators.UnweightedAggregationFactory,
    tau: float = 0.0,
    tau_decay: float = 1.0,
) -> StatefulClientsProcess:
  """Builds the process; the algorithm modules (`flare`, `ec`, `ef21`, `fedavg`) call this.

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    client_update_fn: the algorithm's client step (see `ClientUpdateFn`), called inside a
      `tf.function`; `client_state` is `()` when `client_state_fn` is None.
    client_state_fn: maps the trainable-weight specs to a new client's state (an
      `OrderedDict` of tensor lists), or None for an algorithm without client state.
    client_optimizer: local optimizer, re-initialized by every client every round.
    server_optimizer: applied to the negated aggregate (SGD lr 1 adds the mean message).
    model_aggregator: combines the messages; an unweighted factory (`UnweightedMeanFactory`
      for the authors' plain mean).
    tau: the penalty strength TAU (ignored by algorithms without a penalty).
    tau_decay: the per-round decay c; round r uses `tau / tau_decay**(r + 1)`.

  Returns:
    A `StatefulClientsProcess`.
  """
  if not isinstance(model_aggregator, tff.aggregators.UnweightedAggregationFactory):
    raise TypeError('model_aggregator must be a tff.aggregators.UnweightedAggregationFactory '
                    f'(the authors average messages unweighted), got {model_aggregator!r}.')
  schedules.validate_tau(tau, tau_decay)
  model_weights_type = tff.learning.models.weights_type_from_model(model_fn)
  specs = trainable_specs(model_fn)
  num_parameters = sum(int(s.shape.num_elements()) for s in specs)
  message_type = model_weights_type.trainable
  with tf.Graph().as_default():
    data_type = tff.SequenceType(tff.types.tensorflow_to_type(model_fn().input_spec))
  metric_finalizers = _metric_finalizers(model_fn)

  has_client_state = client_state_fn is not None
  if has_client_state:

    @tff.tensorflow.computation
    def initial_client_state():
      return client_state_fn(specs)

    client_state_type = initial_client_state.type_signature.result
  else:
    initial_client_state = None

  @tff.tensorflow.computation
  def initial_round_schedule():
    return collections.OrderedDict(
        round_num=tf.constant(0, tf.int32),
        tau=tf.constant(tau, tf.float64),
        tau_decay=tf.constant(tau_decay, tf.float64))

  distributor = tff.learning.templates.build_broadcast_process(model_weights_type)
  aggregator = model_aggregator.create(message_type)
  finalizer = tff.learning.templates.build_apply_optimizer_finalizer(
      server_optimizer, model_weights_type)

  initialize_fn = build_initialize_fn(model_fn, distributor, initial_round_schedule, aggregator,
                                      finalizer)
  state_type = initialize_fn.type_signature.result
  round_schedule_type = state_type.member.client_work

  @tff.tensorflow.computation(round_schedule_type)
  def round_tau(schedule):
    return schedules.tau_at_round_tf(schedule['tau'], schedule['tau_decay'],
                                     schedule['round_num'])

  @tff.tensorflow.computation(round_schedule_type)
  def advance_round(schedule):
    return collections.OrderedDict(
        round_num=schedule['round_num'] + 1, tau=schedule['tau'],
        tau_decay=schedule['tau_decay'])

  if has_client_state:

    @tff.tensorflow.computation(model_weights_type, tf.float32, data_type, client_state_type)
    def client_work(server_weights, round_tau_value, dataset, client_state):
      return _run_client_update(model_fn, client_update_fn, client_optimizer, server_weights,
                                round_tau_value, dataset, client_state, num_parameters)
  else:

    @tff.tensorflow.computation(model_weights_type, tf.float32, data_type)
    def client_work(server_weights, round_tau_value, dataset):
      return _run_client_update(model_fn, client_update_fn, client_optimizer, server_weights,
                                round_tau_value, dataset, (), num_parameters)

  @tff.tensorflow.computation(message_type)
  def negate(update):
    return tf.nest.map_structure(tf.negative, update)

  @tff.tensorflow.computation
  def communication_metrics(counters):
    return _communication_metrics(counters, num_parameters)

  aggregate_model_metrics = tff.learning.metrics.sum_then_finalize(metric_finalizers)

  def client_phase_body(state, client_data, client_states=None):
    """Steps 1-2: broadcast, then every client's update; returns CLIENTS-placed outputs."""
    tau_r = tff.federated_map(round_tau, state.client_work)
    # TFF's broadcast process is stateless, so its (empty) new state is not carried out.
    distributor_output = distributor.next(state.distributor, state.global_model_weights)
    client_inputs = [distributor_output.result, tff.federated_broadcast(tau_r), client_data]
    if has_client_state:
      client_inputs.append(client_states)
    return tff.federated_map(client_work, tuple(client_inputs))

  def server_phase_body(state, messages, counters, model_metrics):
    """Steps 3-4: aggregate the messages, apply them; returns (new state, metrics)."""
    aggregator_output = aggregator.next(state.aggregator, messages)
    finalizer_output = finalizer.next(
        state.finalizer, state.global_model_weights,
        tff.federated_map(negate, aggregator_output.result))
    new_state = tff.federated_zip(
        tff.learning.templates.LearningAlgorithmState(
            global_model_weights=finalizer_output.result,
            distributor=state.distributor,
            client_work=tff.federated_map(advance_round, state.client_work),
            aggregator=aggregator_output.state,
            finalizer=finalizer_output.state))
    metrics = tff.federated_zip(
        collections.OrderedDict(
            train=aggregate_model_metrics(model_metrics),
            communication=tff.federated_map(communication_metrics,
                                            tff.federated_sum(counters)),
            tau=tff.federated_map(round_tau, state.client_work),
            aggregator=aggregator_output.measurements,
            finalizer=finalizer_output.measurements))
    return new_state, metrics

  def round_body(state, client_data, client_states=None):
    client_outputs = client_phase_body(state, client_data, client_states)
    new_state, metrics = server_phase_body(state, client_outputs.message,
                                           client_outputs.counters, client_outputs.model_metrics)
    return new_state, metrics, client_outputs.client_state

  data_param_type = tff.FederatedType(data_type, tff.CLIENTS)
  if has_client_state:
    client_states_param_type = tff.FederatedType(client_state_type, tff.CLIENTS)

    @tff.federated_computation(state_type, data_param_type, client_states_param_type)
    def next_fn(state, client_data, client_states):
      new_state, metrics, new_client_states = round_body(state, client_data, client_states)
      return StatefulClientsOutput(state=new_state, metrics=metrics,
                                   client_states=new_client_states)

    client_output_type = client_work.type_signature.result

    @tff.tensorflow.computation(client_output_type, np.int32)
    def tag_with_index(output, client_index):
      return collections.OrderedDict(client_index=client_index, **output)

    @tff.federated_computation(state_type, data_param_type, client_states_param_type,
                               tff.FederatedType(np.int32, tff.CLIENTS))
    def client_phase(state, client_data, client_states, client_indices):
      outputs = client_phase_body(state, client_data, client_states)
      return tff.federated_map(tag_with_index, (outputs, client_indices))

    @tff.federated_computation(
        state_type, tff.FederatedType(client_output_type.message, tff.CLIENTS),
        tff.FederatedType(client_output_type.counters, tff.CLIENTS),
        tff.FederatedType(client_output_type.model_metrics, tff.CLIENTS))
    def server_phase(state, messages, counters, model_metrics):
      new_state, metrics = server_phase_body(state, messages, counters, model_metrics)
      return tff.learning.templates.LearningProcessOutput(state=new_state, metrics=metrics)

    phases = RoundPhases(client_phase=client_phase, server_phase=server_phase)
  else:

    @tff.federated_computation(state_type, data_param_type)
    def next_fn(state, client_data):
      new_state, metrics, _ = round_body(state, client_data)
      return tff.learning.templates.LearningProcessOutput(state=new_state, metrics=metrics)

    phases = None

  get_model_weights, set_model_weights = build_model_weights_accessors(state_type,
                                                                       model_weights_type)
  return StatefulClientsProcess(
      initialize_fn, next_fn, initial_client_state=initial_client_state,
      get_model_weights=get_model_weights, set_model_weights=set_model_weights,
      num_trainable_parameters=num_parameters, phases=phases)


def build_initialize_fn(model_fn: ModelFn, distributor, initial_client_work_state,
                        aggregator, finalizer) -> tff.Computation:
  """The `initialize` of a process composed like `tff.learning` algorithms.

  Args:
    model_fn: builds the initial global model.
    distributor, aggregator, finalizer: the process's TFF components.
    initial_client_work_state: a no-arg `tff.tensorflow.computation`, the client-work part of
      the server state (e.g. the round counter).

  Returns:
    A federated computation returning a SERVER-placed `LearningAlgorithmState`.
  """

  @tff.tensorflow.computation
  def initial_model_weights():
    return tff.learning.models.ModelWeights.from_model(model_fn())

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_zip(
        tff.learning.templates.LearningAlgorithmState(
            global_model_weights=tff.federated_eval(initial_model_weights, tff.SERVER),
            distributor=distributor.initialize(),
            client_work=tff.federated_eval(initial_client_work_state, tff.SERVER),
            aggregator=aggregator.initialize(),
            finalizer=finalizer.initialize()))

  return initialize_fn


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


def _metric_finalizers(model_fn: ModelFn):
  with tf.Graph().as_default():
    return model_fn().metric_finalizers()


def _run_client_update(model_fn, client_update_fn, optimizer, server_weights, tau, dataset,
                       client_state, num_parameters: int):
  """Runs one client's update and guards the server against non-finite results."""
  model = model_fn()

  @tf.function
  def run(server_weights, tau, dataset, client_state):
    output = client_update_fn(model, optimizer, server_weights, tau, dataset, client_state)
    finite = tf.logical_and(_all_finite(output.message), _all_finite(output.client_state))
    message = tf.nest.map_structure(
        lambda m: tf.where(finite, m, tf.zeros_like(m)), output.message)
    new_state = tf.nest.map_structure(
        lambda new, old: tf.where(finite, new, old), output.client_state, client_state)
    counters = collections.OrderedDict(
        (name, tf.where(finite, value, tf.zeros_like(value)))
        for name, value in output.counters.items())
    # On the wire: a (value, index) list, or the dense float32 tensor when that is smaller.
    counters['bytes_sent'] = tf.minimum(
        sparsification.sparse_encoding_bytes(counters['entries_sent']),
        tf.constant(sparsification.BYTES_PER_VALUE * num_parameters, tf.int64))
    counters['num_clients'] = tf.constant(1, tf.int64)
    counters['nonfinite_clients'] = tf.where(finite, tf.constant(0, tf.int64),
                                             tf.constant(1, tf.int64))
    metrics = model.report_local_unfinalized_metrics()
    return message, new_state, counters, metrics

  message, new_state, counters, metrics = run(server_weights, tau, dataset, client_state)
  return collections.OrderedDict(
      message=message, client_state=new_state, counters=counters, model_metrics=metrics)


def _communication_metrics(counters, num_parameters: int):
  """Server-side communication figures from the summed client counters.

  Returns an `OrderedDict`: every summed counter (`entries_sent`, `bytes_sent`, `num_clients`,
  ...) under its own name with a `_total` suffix (`bytes_sent`: per client, a float32 value +
  int32 index per entry, or the dense float32 tensor when smaller), plus
  `entries_sent_per_client` (mean nonzeros a client sent) and `density` (fraction of the
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
