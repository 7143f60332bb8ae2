"""The one composer: an algorithm's parts (`parts.AlgorithmParts`) into a TFF iterative process.

Every process of this project is composed here from the round's TensorFlow
(`round_functions.RoundFunctions`), each piece a `tff.tensorflow.computation`, with
per-client state as in TFF's stateful-clients example (`process`: the interface):

  1. the server's `round_params` and model go to the clients (TFF's broadcast process);
  2. every client runs `client_work` (training, compression, the non-finite policy);
  3. the clients' outputs are summed (`tff.federated_sum`) and the server's round is one
     computation over `RoundFunctions.update_server_with_metrics` (aggregation, server
     optimizer, schedule, metrics), the same functions the in-process executor runs here.

A TFF aggregation factory (`tff.aggregators`: a `MeanFactory`, clipping, differential
privacy, secure summation, ...) can take the place of the weighted mean
(`model_aggregator=`): its `AggregationProcess` then turns the clients' messages into the
update, its state is the server state's `aggregator` part and its measurements the round's
`metrics['aggregator']` (beside `communication`); the rest of the server's round is
`RoundFunctions.apply_and_advance`.
Such a process runs on TFF's runtime only (the factory's computations are TFF's).

The server state is a `tff.learning.templates.LearningAlgorithmState` whose `client_work`
part is the algorithm's round schedule (`parts.RoundSchedule`: the round number, TAU, ...),
`aggregator` the aggregation's state and `finalizer` the server optimizer's.
"""

import collections
import functools
from typing import TypeAlias

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import model_facts as model_facts_lib
from tff_flare.algorithms import parts as parts_lib
from tff_flare.algorithms import process as process_lib
from tff_flare.algorithms import round_functions as round_functions_lib

ModelFn = model_facts_lib.ModelFn
AggregationFactory: TypeAlias = (tff.aggregators.WeightedAggregationFactory |
                                 tff.aggregators.UnweightedAggregationFactory)


def compose(
    model_fn: ModelFn,
    algorithm: parts_lib.AlgorithmParts,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM
) -> process_lib.AlgorithmProcess:
  """Builds the TFF process of `algorithm` (see the module docstring).

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    algorithm: the algorithm's `parts.AlgorithmParts`.
    client_optimizer: the local optimizer, re-initialized by every client every round.
    server_optimizer: applied to the negated update; default SGD with learning rate 1, the
      authors' `s <- s + update`.
    model_aggregator: a `tff.aggregators` factory in place of the weighted mean (as TFF's
      `build_weighted_fed_avg` takes one); a weighted factory gets the clients' weights
      (1 each unless the algorithm weighs; 0 for a non-finite client). An unweighted factory
      gets no weights, so a non-finite client's zero message counts in its mean. None: the
      algorithm's own aggregation.
    client_weighting: `tff.learning.ClientWeighting.UNIFORM` (1 a client, the authors' mean)
      or `NUM_EXAMPLES` (the examples a client trained on, as TFF's weighted FedAvg), for the
      mean and a weighted factory; an algorithm that weighs its clients itself keeps its own.

  Returns:
    A `process.AlgorithmProcess` (with `round_functions` for the in-process executor unless
    `model_aggregator` is given).

  Raises:
    ValueError: `model_aggregator`, or a `client_weighting` other than uniform, for an
      algorithm whose aggregation is its own (EF21); an unknown `client_weighting`.
  """
  _check_options(algorithm, model_aggregator, client_weighting)
  functions = round_functions_lib.build_round_functions(
      model_fn,
      algorithm,
      client_optimizer=client_optimizer,
      server_optimizer=server_optimizer or round_functions_lib.default_server_optimizer(),
      weigh_messages=model_aggregator is None,
      client_weighting=client_weighting)

  @tff.tensorflow.computation
  def initial_server_state():
    return functions.initial_server_state(functions.initial_model_weights())

  clients = _client_side(model_fn, functions, algorithm,
                         initial_server_state.type_signature.result.client_work)
  summable_type = clients.client_work.type_signature.result['summable']
  if model_aggregator is None:
    initialize_fn, server_phase_body = _server_phase(functions, initial_server_state, summable_type)
  else:
    initialize_fn, server_phase_body = _server_phase_with_factory(functions, initial_server_state,
                                                                  summable_type, model_aggregator)
  state_type = initialize_fn.type_signature.result

  @tff.federated_computation(state_type, *clients.federated_types)
  def next_fn(state, client_data, client_states, client_inputs):
    outputs = clients.phase_body(state, client_data, client_states, client_inputs)
    new_state, metrics = server_phase_body(state, outputs.summable)
    # A stateless algorithm's (empty) states pass through: nothing computed before the
    # aggregation reaches a CLIENTS-placed result, so TFF's distributed runtime can run
    # `next` whole (see `RoundPhases`).
    new_client_states = outputs.client_state if functions.stateful else client_states
    return process_lib.RoundOutput(state=new_state,
                                   metrics=metrics,
                                   client_states=new_client_states)

  state_file_rounds = None
  if functions.stateful:
    state_file_rounds = process_lib.StateFileRounds(build=functools.partial(
        _rounds_with_state_files,
        model_fn,
        functions,
        state_type,
        clients,
        server_phase_body,
        plain_sum=model_aggregator is None),
                                                    with_client_sums=model_aggregator is None)
  client_sums = None
  if not functions.stateful and model_aggregator is None:
    client_sums = _client_sums(clients)
  get_model_weights, set_model_weights = build_model_weights_accessors(
      state_type, clients.model_weights_type)
  return process_lib.AlgorithmProcess(
      initialize_fn,
      next_fn,
      initial_client_state=clients.initial_client_state,
      get_model_weights=get_model_weights,
      set_model_weights=set_model_weights,
      num_trainable_parameters=functions.num_parameters,
      model_fn=model_fn,
      client_inputs=algorithm.compressor.client_inputs,
      record_test_loss=_record_test_loss(functions, state_type),
      phases=_round_phases(clients, server_phase_body, state_type, summable_type)
      if functions.stateful else None,
      state_file_rounds=state_file_rounds,
      client_sums=client_sums,
      round_functions=functions if model_aggregator is None else None)


def _check_options(algorithm: parts_lib.AlgorithmParts, model_aggregator: AggregationFactory | None,
                   client_weighting: tff.learning.ClientWeighting) -> None:
  """Refuses what `compose` cannot build (see its Raises); the builders' arguments' types
  are checked before (`process.records_build`)."""
  if not isinstance(client_weighting, tff.learning.ClientWeighting):
    raise ValueError(f'client_weighting must be a tff.learning.ClientWeighting, got '
                     f'{client_weighting!r}.')
  own = algorithm.compressor.aggregation != parts_lib.weighted_mean()
  if model_aggregator is not None and own:
    raise ValueError('model_aggregator replaces the weighted mean; this algorithm aggregates '
                     'its own way (its aggregation is part of the algorithm).')
  if client_weighting != tff.learning.ClientWeighting.UNIFORM and own:
    raise ValueError('client_weighting weighs the mean; this algorithm aggregates its own way '
                     '(its aggregation is part of the algorithm).')


@attrs.frozen
class _ClientSide:
  """The clients' half of a round, the same in every form of `next` (whole, in phases, with
  state files).

  Attributes:
    initial_client_state: `( -> state)`, a new client's state.
    round_params: `(schedule -> params)`, what the server sends the clients this round.
    client_work: `(server weights, params, data, state, input) -> OrderedDict(client_state,
      summable)`, one client's round (`RoundFunctions.client_work`).
    distributor: TFF's broadcast process of the model weights.
    model_weights_type, data_type, client_input_type: the TFF types of the model weights, a
      client's dataset and its input.
    federated_types: `(data, states, inputs)` placed at the clients: `next`'s parameters.
  """

  initial_client_state: tff.Computation
  round_params: tff.Computation
  client_work: tff.Computation
  distributor: tff.templates.MeasuredProcess
  model_weights_type: tff.Type
  data_type: tff.Type
  client_input_type: tff.Type
  federated_types: tuple[tff.FederatedType, ...]

  def phase_body(self, state, client_data, client_states, client_inputs):
    """The clients' outputs @CLIENTS: the server's params and model broadcast, each client's
    `client_work`."""
    params = tff.federated_map(self.round_params, state.client_work)
    # TFF's broadcast process is stateless: its (empty) new state is not carried out.
    weights = self.distributor.next(state.distributor, state.global_model_weights).result
    return tff.federated_map(
        self.client_work,
        (weights, tff.federated_broadcast(params), client_data, client_states, client_inputs))


def _client_side(model_fn: ModelFn, functions: round_functions_lib.RoundFunctions,
                 algorithm: parts_lib.AlgorithmParts, schedule_type: tff.Type) -> _ClientSide:
  """The clients' computations of `functions`, typed for `model_fn`'s model and data."""
  facts = model_facts_lib.model_facts(model_fn)
  model_weights_type = facts.weights_type
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(facts.input_spec))

  @tff.tensorflow.computation
  def initial_client_state():
    return functions.initial_client_state()

  client_state_type = initial_client_state.type_signature.result
  client_inputs = algorithm.compressor.client_inputs
  if client_inputs is None:
    client_input_type = tff.StructType([])
  else:
    client_input_type = tff.types.tensorflow_to_type(client_inputs.spec)

  @tff.tensorflow.computation(schedule_type)
  def round_params(schedule):
    return functions.round_params(schedule)

  @tff.tensorflow.computation(model_weights_type, round_params.type_signature.result, data_type,
                              client_state_type, client_input_type)
  def client_work(server_weights, params, dataset, client_state, client_input):
    model = model_fn()

    @tf.function
    def run(server_weights, params, dataset, client_state, client_input):
      return functions.client_work(model, server_weights, params, dataset, client_state,
                                   client_input)

    return run(server_weights, params, dataset, client_state, client_input)

  return _ClientSide(initial_client_state=initial_client_state,
                     round_params=round_params,
                     client_work=client_work,
                     distributor=tff.learning.templates.build_broadcast_process(model_weights_type),
                     model_weights_type=model_weights_type,
                     data_type=data_type,
                     client_input_type=client_input_type,
                     federated_types=(tff.FederatedType(data_type, tff.CLIENTS),
                                      tff.FederatedType(client_state_type, tff.CLIENTS),
                                      tff.FederatedType(client_input_type, tff.CLIENTS)))


def _round_phases(clients: _ClientSide, server_phase_body, state_type,
                  summable_type) -> process_lib.RoundPhases:
  """`next` cut at the aggregation (`process.RoundPhases`), for a process with client state."""

  @tff.tensorflow.computation(clients.client_work.type_signature.result, np.int32)
  def tag_with_index(output, client_index):
    return collections.OrderedDict(client_index=client_index,
                                   client_state=output['client_state'],
                                   summable=output['summable'])

  @tff.federated_computation(state_type, *clients.federated_types,
                             tff.FederatedType(np.int32, tff.CLIENTS))
  def client_phase(state, client_data, client_states, client_inputs, client_indices):
    outputs = clients.phase_body(state, client_data, client_states, client_inputs)
    return tff.federated_map(tag_with_index, (outputs, client_indices))

  @tff.federated_computation(state_type, tff.FederatedType(summable_type, tff.CLIENTS))
  def server_phase(state, summable):
    return server_phase_body(state, summable)

  return process_lib.RoundPhases(client_phase=client_phase, server_phase=server_phase)


def _record_test_loss(functions: round_functions_lib.RoundFunctions,
                      state_type) -> tff.Computation | None:
  """`(state, loss) -> state` of an algorithm that adapts to the test loss, else None."""
  if functions.record_test_loss is None:
    return None

  @tff.tensorflow.computation(state_type.member, np.float32)
  def record_test_loss(state, loss):
    return functions.record_test_loss(state, loss)

  return record_test_loss


def read_state_files(prefix: tf.Tensor, initial_state):
  """A client's state from the files `<prefix><i>.tensor` (leaf i, `tf.io.serialize_tensor`),
  or `initial_state` when `prefix` is empty (a client never trained): TF ops, so the client
  computation that runs them reads the state where it runs."""
  leaves = tf.nest.flatten(initial_state)

  def read():
    return [
        tf.ensure_shape(tf.io.parse_tensor(tf.io.read_file(prefix + f'{i}.tensor'), leaf.dtype),
                        leaf.shape) for i, leaf in enumerate(leaves)
    ]

  return tf.nest.pack_sequence_as(initial_state, tf.cond(tf.equal(prefix, ''), lambda: leaves,
                                                         read))


def write_state_files(prefix: tf.Tensor, state) -> None:
  """Writes a client's state as the files `<prefix><i>.tensor` (inside a `tf.function`, whose
  automatic control dependencies run the writes)."""
  for i, leaf in enumerate(tf.nest.flatten(state)):
    tf.io.write_file(prefix + f'{i}.tensor', tf.io.serialize_tensor(leaf))


def _rounds_with_state_files(model_fn: ModelFn, functions: round_functions_lib.RoundFunctions,
                             state_type, clients: _ClientSide, server_phase_body,
                             plain_sum: bool) -> tuple[tff.Computation, tff.Computation | None]:
  """`(next_with_state_files, client_sums_with_state_files)` (see
  `process.AlgorithmProcess`): `compose`'s round with the client work wrapped in the reading
  and writing of its state, whole and up to the clients' sum. The second is None unless `plain_sum` (the server's
  round is `federated_sum` and `update_server`: no TFF aggregation factory)."""

  model_weights_type, data_type = clients.model_weights_type, clients.data_type
  client_input_type, round_params = clients.client_input_type, clients.round_params

  @tff.tensorflow.computation(model_weights_type, round_params.type_signature.result, data_type,
                              np.str_, np.str_, client_input_type)
  def client_work_with_files(server_weights, params, dataset, read_prefix, write_prefix,
                             client_input):
    model = model_fn()

    @tf.function
    def run(server_weights, params, dataset, read_prefix, write_prefix, client_input):
      client_state = read_state_files(read_prefix, functions.initial_client_state())
      output = functions.client_work(model, server_weights, params, dataset, client_state,
                                     client_input)
      write_state_files(write_prefix, output['client_state'])
      return output['summable']

    return run(server_weights, params, dataset, read_prefix, write_prefix, client_input)

  prefix_type = tff.FederatedType(np.str_, tff.CLIENTS)
  clients_types = (tff.FederatedType(data_type, tff.CLIENTS), prefix_type, prefix_type,
                   tff.FederatedType(client_input_type, tff.CLIENTS))

  @tff.federated_computation(state_type, *clients_types)
  def next_with_state_files(state, client_data, read_prefixes, write_prefixes, client_inputs):
    params = tff.federated_map(round_params, state.client_work)
    weights = clients.distributor.next(state.distributor, state.global_model_weights).result
    summable = tff.federated_map(client_work_with_files,
                                 (weights, tff.federated_broadcast(params), client_data,
                                  read_prefixes, write_prefixes, client_inputs))
    return server_phase_body(state, summable)

  if not plain_sum:
    return next_with_state_files, None

  @tff.federated_computation(tff.FederatedType(model_weights_type, tff.SERVER),
                             tff.FederatedType(round_params.type_signature.result, tff.SERVER),
                             *clients_types)
  def client_sums_with_state_files(weights, params, client_data, read_prefixes, write_prefixes,
                                   client_inputs):
    # TFF's broadcast process (`distributor`) is a stateless `federated_broadcast`.
    summable = tff.federated_map(client_work_with_files,
                                 (tff.federated_broadcast(weights), tff.federated_broadcast(params),
                                  client_data, read_prefixes, write_prefixes, client_inputs))
    return tff.federated_sum(summable)

  return next_with_state_files, client_sums_with_state_files


def _client_sums(clients: _ClientSide) -> tff.Computation:
  """The clients' part of a stateless process's `next`, for a driver that runs the server's
  round itself (`process.AlgorithmProcess.client_sums`)."""

  @tff.federated_computation(tff.FederatedType(clients.model_weights_type, tff.SERVER),
                             tff.FederatedType(clients.round_params.type_signature.result,
                                               tff.SERVER), *clients.federated_types)
  def client_sums(weights, params, client_data, client_states, client_inputs):
    # TFF's broadcast process (`distributor`) is a stateless `federated_broadcast`.
    outputs = tff.federated_map(clients.client_work,
                                (tff.federated_broadcast(weights), tff.federated_broadcast(params),
                                 client_data, client_states, client_inputs))
    return tff.federated_sum(outputs.summable)

  return client_sums


def _server_phase(functions: round_functions_lib.RoundFunctions, initial_server_state,
                  summable_type):
  """`(initialize_fn, server_phase_body)`: the server's round as one computation over
  `RoundFunctions.update_server_with_metrics`, on the clients' summed outputs."""
  state_type = initial_server_state.type_signature.result

  @tff.tensorflow.computation(state_type, summable_type)
  def update_server(state, summed):
    return functions.update_server_with_metrics(state, summed)

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_eval(initial_server_state, tff.SERVER)

  def server_phase_body(state, summable):
    output = tff.federated_map(update_server, (state, tff.federated_sum(summable)))
    return output[0], output[1]

  return initialize_fn, server_phase_body


def _server_phase_with_factory(functions: round_functions_lib.RoundFunctions, initial_server_state,
                               summable_type, model_aggregator: AggregationFactory):
  """`(initialize_fn, server_phase_body)` with `model_aggregator`'s process in place of the
  weighted mean (see the module docstring)."""
  message_type = summable_type['message']
  if isinstance(model_aggregator, tff.aggregators.WeightedAggregationFactory):
    aggregator = model_aggregator.create(message_type, summable_type['weight'])
    aggregate = lambda state, summable: aggregator.next(state, summable.message, summable.weight)
  elif isinstance(model_aggregator, tff.aggregators.UnweightedAggregationFactory):
    aggregator = model_aggregator.create(message_type)
    aggregate = lambda state, summable: aggregator.next(state, summable.message)
  else:
    raise TypeError(f'model_aggregator must be a tff.aggregators factory, got '
                    f'{type(model_aggregator).__name__}.')
  base_state_type = initial_server_state.type_signature.result
  aggregator_state_type = aggregator.initialize.type_signature.result.member

  @tff.tensorflow.computation(base_state_type, aggregator_state_type)
  def with_aggregator_state(state, aggregator_state):
    return state._replace(aggregator=aggregator_state)

  @tff.federated_computation
  def initialize_fn():
    return tff.federated_map(
        with_aggregator_state,
        (tff.federated_eval(initial_server_state, tff.SERVER), aggregator.initialize()))

  state_type = initialize_fn.type_signature.result.member
  sums_type = tff.StructWithPythonType([
      (name, summable_type[name]) for name in ('weight', 'counters', 'statistics', 'model_metrics')
  ], collections.OrderedDict)
  measurements_type = aggregator.next.type_signature.result.measurements.member

  @tff.tensorflow.computation(state_type, aggregator_state_type, message_type, sums_type,
                              measurements_type)
  def apply_update_and_report(state, aggregator_state, update, sums, aggregator_measurements):
    new_state, measurements = functions.apply_and_advance(state, aggregator_state, update)
    metrics = functions.round_metrics(state.client_work, sums, measurements)
    metrics['aggregator'].update(aggregator_measurements)
    return new_state, metrics

  def server_phase_body(state, summable):
    aggregated = aggregate(state.aggregator, summable)
    sums = tff.federated_sum(
        collections.OrderedDict((name, summable[name])
                                for name in ('weight', 'counters', 'statistics', 'model_metrics')))
    output = tff.federated_map(
        apply_update_and_report,
        (state, aggregated.state, aggregated.result, sums, aggregated.measurements))
    return output[0], output[1]

  return initialize_fn, server_phase_body


def build_model_weights_accessors(state_type, model_weights_type):
  """`(get_model_weights, set_model_weights)` computations on a `LearningAlgorithmState`."""

  @tff.tensorflow.computation(state_type.member)
  def get_model_weights(state):
    return state.global_model_weights

  @tff.tensorflow.computation(state_type.member, model_weights_type)
  def set_model_weights(state, model_weights):
    return tff.learning.templates.LearningAlgorithmState(global_model_weights=model_weights,
                                                         distributor=state.distributor,
                                                         client_work=state.client_work,
                                                         aggregator=state.aggregator,
                                                         finalizer=state.finalizer)

  return get_model_weights, set_model_weights
