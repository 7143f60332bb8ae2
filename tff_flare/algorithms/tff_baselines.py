"""TFF's own FedAvg and FedProx, configured like the paper's runs, for side-by-side comparison.

These are `tff.learning.algorithms` processes, untouched: unweighted (every client counts
the same, as in the authors' mean) and with a server SGD of learning rate 1. They are wrapped
in this project's `AlgorithmProcess` interface (`composer`): `next` takes and returns the
(empty) client states and inputs every process takes, and the metrics carry the same
`client_work/train`, `aggregator/communication` and `finalizer` parts (`communication`
without the nonzero counts, which TFF's processes do not expose). They have no `RoundFunctions`, so they run
on TFF's runtime whatever the execution mode.
"""

import dataclasses
import collections

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import process as process_lib
from tff_flare.algorithms import round_functions
from tff_flare.algorithms import sparsification

TFF_FEDPROX_STRENGTH = hyperparameters.Knob(
    0.01, "TFF FedProx's proximal strength (its mu: mu/2 ||w - s||^2, constant).",
    hyperparameters.check_number('tff_fedprox_strength', 0.0))


@dataclasses.dataclass(frozen=True)
class TffFedProxParams(hyperparameters.Params):
  """TFF FedProx's knob."""

  tff_fedprox_strength: float = TFF_FEDPROX_STRENGTH.field()


@process_lib.records_build
def build_tff_fedavg(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    client_weighting: tff.learning.ClientWeighting = (tff.learning.ClientWeighting.UNIFORM)
) -> process_lib.AlgorithmProcess:
  """`tff.learning.algorithms.build_unweighted_fed_avg` with server SGD(lr=1); with another
  `client_weighting` (`NUM_EXAMPLES`, or a function of the client's metrics),
  `build_weighted_fed_avg` with it."""
  server = round_functions.default_server_optimizer()
  if client_weighting == tff.learning.ClientWeighting.UNIFORM:
    return _adapt(
        tff.learning.algorithms.build_unweighted_fed_avg(model_fn,
                                                         client_optimizer_fn=client_optimizer,
                                                         server_optimizer_fn=server), model_fn)
  return _adapt(
      tff.learning.algorithms.build_weighted_fed_avg(model_fn,
                                                     client_optimizer_fn=client_optimizer,
                                                     server_optimizer_fn=server,
                                                     client_weighting=client_weighting), model_fn)


@process_lib.records_build
def build_tff_fedprox(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    proximal_strength: float,
    client_weighting: tff.learning.ClientWeighting = (tff.learning.ClientWeighting.UNIFORM)
) -> process_lib.AlgorithmProcess:
  """`tff.learning.algorithms.build_unweighted_fed_prox` with server SGD(lr=1) (another
  `client_weighting`: `build_weighted_fed_prox` with it).

  TFF's term is `proximal_strength / 2 * ||w - s||^2` with a constant strength, unlike the
  authors' "FedProx" (no 1/2, a decaying tau, plus error-corrected top-k; see `ec`).
  """
  server = round_functions.default_server_optimizer()
  if client_weighting == tff.learning.ClientWeighting.UNIFORM:
    return _adapt(
        tff.learning.algorithms.build_unweighted_fed_prox(model_fn,
                                                          proximal_strength=proximal_strength,
                                                          client_optimizer_fn=client_optimizer,
                                                          server_optimizer_fn=server), model_fn)
  return _adapt(
      tff.learning.algorithms.build_weighted_fed_prox(model_fn,
                                                      proximal_strength=proximal_strength,
                                                      client_optimizer_fn=client_optimizer,
                                                      server_optimizer_fn=server,
                                                      client_weighting=client_weighting), model_fn)


def _adapt(process: tff.learning.templates.LearningProcess,
           model_fn: model_facts.ModelFn) -> process_lib.AlgorithmProcess:
  """`process` with this project's `next(state, data, client_states, client_inputs)`."""
  num_parameters = model_facts.model_facts(model_fn).num_parameters
  state_type = process.initialize.type_signature.result
  data_type = process.next.type_signature.parameter[1]
  empty = tff.FederatedType(tff.StructType([]), tff.CLIENTS)

  @tff.tensorflow.computation
  def initial_client_state():
    return ()

  @tff.tensorflow.computation(tff.StructType([]))
  def one(_):
    return tf.constant(1, tf.int64)

  @tff.tensorflow.computation(np.int64)
  def communication(num_clients):
    # Each client sends its dense float32 delta: the bytes are known. Its nonzeros are not
    # (TFF's process does not expose the client deltas), so `entries_sent` and `density`,
    # which count nonzeros for every other algorithm, are not reported.
    return collections.OrderedDict(bytes_sent_total=num_clients * num_parameters *
                                   sparsification.BYTES_PER_VALUE,
                                   num_clients_total=num_clients)

  @tff.federated_computation(state_type, data_type, empty, empty)
  def next_fn(state, client_data, client_states, client_inputs):
    output = process.next(state, client_data)
    num_clients = tff.federated_sum(tff.federated_map(one, client_inputs))
    metrics = tff.federated_zip(
        collections.OrderedDict(
            client_work=tff.federated_zip(
                collections.OrderedDict(train=output.metrics.client_work.train)),
            aggregator=tff.federated_zip(
                collections.OrderedDict(
                    communication=tff.federated_map(communication, num_clients))),
            finalizer=output.metrics.finalizer))
    return process_lib.RoundOutput(state=output.state, metrics=metrics, client_states=client_states)

  return process_lib.AlgorithmProcess(process.initialize,
                                      next_fn,
                                      initial_client_state=initial_client_state,
                                      get_model_weights=process.get_model_weights,
                                      set_model_weights=process.set_model_weights,
                                      num_trainable_parameters=num_parameters,
                                      model_fn=model_fn)
