"""TFF's own FedAvg and FedProx, configured like the paper's runs, for side-by-side comparison.

These are `tff.learning.algorithms` processes, untouched: unweighted (every client counts
the same, as in the authors' mean) and with a server SGD of learning rate 1.
"""

import tensorflow_federated as tff

from tff_flare import ec
from tff_flare import stateful_process


def build_tff_fedavg(model_fn: stateful_process.ModelFn, *,
                     client_optimizer: tff.learning.optimizers.Optimizer
                     ) -> tff.learning.templates.LearningProcess:
  """`tff.learning.algorithms.build_unweighted_fed_avg` with server SGD(lr=1)."""
  return tff.learning.algorithms.build_unweighted_fed_avg(
      model_fn, client_optimizer_fn=client_optimizer,
      server_optimizer_fn=ec.default_server_optimizer())


def build_tff_fedprox(model_fn: stateful_process.ModelFn, *,
                      client_optimizer: tff.learning.optimizers.Optimizer,
                      proximal_strength: float) -> tff.learning.templates.LearningProcess:
  """`tff.learning.algorithms.build_unweighted_fed_prox` with server SGD(lr=1).

  TFF's term is `proximal_strength / 2 * ||w - s||^2` with a constant strength, unlike the
  authors' "FedProx" (no 1/2, a decaying tau, plus error-corrected top-k; see `ec`).
  """
  return tff.learning.algorithms.build_unweighted_fed_prox(
      model_fn, proximal_strength=proximal_strength, client_optimizer_fn=client_optimizer,
      server_optimizer_fn=ec.default_server_optimizer())
