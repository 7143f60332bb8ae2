"""Federated averaging, composed like the compressed algorithms.

Client: train from `s` to get `d_i = w_i - s` and send it densely. Server: `s <- s + mean_i d_i`
(SGD, lr 1; the authors compute `mean_i w_i`, equal up to rounding; `docs/faithfulness.md`
R2). It keeps no client state. It equals EC with R = 100 under the exact-k rule, and TFF's
`build_unweighted_fed_avg` with the same client optimizer and server SGD(lr=1).
"""

import collections
from typing import Optional

import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import local_training
from tff_flare.algorithms import parts
from tff_flare.algorithms import sparsification


def _fedavg_client_update(model, optimizer, server_weights, params, dataset, client_state,
                          client_input):
  del params, client_state, client_input  # FedAvg has no penalty, state or input.
  result = local_training.train_locally(model, optimizer, server_weights, dataset)
  delta = local_training.model_delta(result, server_weights)
  return parts.ClientOutput(
      message=delta,
      counters=collections.OrderedDict(entries_sent=sparsification.count_nonzero(delta)))


def build_fedavg(
    model_fn: composer.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    server_optimizer: Optional[tff.learning.optimizers.Optimizer] = None,
) -> composer.AlgorithmProcess:
  """Builds FedAvg with an unweighted mean (its clients keep no state)."""
  return composer.compose(model_fn, parts.AlgorithmParts(client_update=_fedavg_client_update),
                          client_optimizer=client_optimizer, server_optimizer=server_optimizer)
