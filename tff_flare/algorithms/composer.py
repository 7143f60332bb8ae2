"""The one composer: an algorithm's parts (`parts.AlgorithmParts`) into a TFF iterative process.

Every process of this project is composed here, the way `tff.learning.algorithms` composes
theirs, from a distributor (TFF's broadcast), a client work, an aggregator and a finalizer,
each a `tff.tensorflow.computation` over the round's TensorFlow (`round_functions`), with
per-client state as in TFF's stateful-clients example (`process`: the interface). The server
state is a `tff.learning.templates.LearningAlgorithmState` whose `client_work` part is the
algorithm's round schedule (`parts.RoundSchedule`: the round number, TAU, ...).
"""

import collections
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import model_facts as model_facts_lib
from tff_flare.algorithms import parts as parts_lib
from tff_flare.algorithms import process as process_lib
from tff_flare.algorithms import round_functions as round_functions_lib

ModelFn = model_facts_lib.ModelFn


def compose(model_fn: ModelFn, algorithm: parts_lib.AlgorithmParts, *,
            client_optimizer: tff.learning.optimizers.Optimizer,
            server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None
            ) -> process_lib.AlgorithmProcess:
  """Builds the TFF process of `algorithm` (see the module docstring).

  Args:
    model_fn: no-arg callable returning a new `tff.learning.models.VariableModel`.
    algorithm: the algorithm's `parts.AlgorithmParts`.
    client_optimizer: the local optimizer, re-initialized by every client every round.
    server_optimizer: applied to the negated update; default SGD with learning rate 1, the
      authors' `s <- s + update`.

  Returns:
    A `process.AlgorithmProcess`.
  """
  server_optimizer = server_optimizer or round_functions_lib.default_server_optimizer()
  functions = round_functions_lib.build_round_functions(
      model_fn, algorithm, client_optimizer=client_optimizer, server_optimizer=server_optimizer)
  specs, stateful = functions.specs, functions.stateful
  facts = model_facts_lib.model_facts(model_fn)
  model_weights_type = facts.weights_type
  data_type = tff.SequenceType(tff.types.tensorflow_to_type(facts.input_spec))

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
    return process_lib.RoundOutput(state=new_state, metrics=metrics,
                                   client_states=new_client_states)

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

    phases = process_lib.RoundPhases(client_phase=client_phase, server_phase=server_phase)

  if functions.record_test_loss is not None:

    @tff.tensorflow.computation(state_type.member, np.float32)
    def record_test_loss(state, loss):
      return functions.record_test_loss(state, loss)
  else:
    record_test_loss = None

  get_model_weights, set_model_weights = build_model_weights_accessors(state_type,
                                                                       model_weights_type)
  return process_lib.AlgorithmProcess(
      initialize_fn, next_fn, initial_client_state=initial_client_state,
      get_model_weights=get_model_weights, set_model_weights=set_model_weights,
      num_trainable_parameters=functions.num_parameters, client_inputs=algorithm.client_inputs,
      record_test_loss=record_test_loss, phases=phases, round_functions=functions)


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
