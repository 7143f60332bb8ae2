"""Federated averaging built with the same machinery as the compressed algorithms.

Client: train from `s` to get `d_i = w_i - s` and send it densely. Server: `s <- s + mean_i d_i`
(SGD, lr 1; the authors compute `mean_i w_i`, equal up to rounding; spec §3.1). It keeps no
client state. It equals EC with R = 100 under the exact-k rule, and TFF's
`build_unweighted_fed_avg` with the same client optimizer and server SGD(lr=1).
"""

import collections
from typing import Optional

import tensorflow_federated as tff

from tff_flare import ec
from tff_flare import local_training
from tff_flare import sparsification
from tff_flare import stateful_process


def _fedavg_client_update(model, optimizer, server_weights, tau, dataset, client_state):
  del tau, client_state  # FedAvg has no penalty and no client state.
  result = local_training.train_locally(model, optimizer, server_weights, dataset)
  delta = ec.local_delta(result, server_weights)
  return stateful_process.ClientOutput(
      message=delta, client_state=(),
      counters=collections.OrderedDict(entries_sent=sparsification.count_nonzero(delta)))


def build_fedavg(
    model_fn: stateful_process.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None,
    model_aggregator: Optional[tff.aggregators.UnweightedAggregationFactory] = None,
) -> stateful_process.StatefulClientsProcess:
  """Builds FedAvg with an unweighted mean; `next(state, client_data)` (no client state)."""
  return stateful_process.build_stateful_clients_process(
      model_fn,
      client_update_fn=_fedavg_client_update,
      client_state_fn=None,
      client_optimizer=client_optimizer,
      server_optimizer=server_optimizer or ec.default_server_optimizer(),
      model_aggregator=model_aggregator or tff.aggregators.UnweightedMeanFactory())
