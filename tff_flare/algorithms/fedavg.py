"""Federated averaging, composed like the compressed algorithms.

Client: train from `s` to get `d_i = w_i - s` and send it densely. Server: `s <- s + mean_i d_i`
(SGD, lr 1; the authors compute `mean_i w_i`, equal up to rounding; `docs/faithfulness.md`
R2). It keeps no client state. It equals EC with R = 100 under the exact-k rule, and TFF's
`build_unweighted_fed_avg` with the same client optimizer and server SGD(lr=1).
"""

import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import model_facts
from tff_flare.algorithms import parts
from tff_flare.algorithms import process


@process.records_build
def build_fedavg(
    model_fn: model_facts.ModelFn,
    *,
    client_optimizer: tff.learning.optimizers.Optimizer,
    server_optimizer: tff.learning.optimizers.Optimizer | None = None,
    model_aggregator: composer.AggregationFactory | None = None,
    client_weighting: tff.learning.ClientWeighting = tff.learning.ClientWeighting.UNIFORM,
) -> process.AlgorithmProcess:
  """Builds FedAvg with an unweighted mean (its clients keep no state); `model_aggregator`,
  a `tff.aggregators` factory, takes the mean's place (`composer.compose`)."""
  return composer.compose(model_fn,
                          parts.AlgorithmParts(),
                          client_optimizer=client_optimizer,
                          server_optimizer=server_optimizer,
                          model_aggregator=model_aggregator,
                          client_weighting=client_weighting)
