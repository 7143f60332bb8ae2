"""Every algorithm by name: one line each, from one set of hyperparameters.

  process = registry.build('flare', model_fn, registry.Hyperparameters(client_optimizer=...))

A new algorithm is a module (its `AlgorithmParts` and builder, see `composer`) plus one line
in `ALGORITHMS`.
"""

from collections.abc import Callable
import dataclasses
from typing import Any, Optional, Union

import tensorflow_federated as tff

from tff_flare.algorithms import composer
from tff_flare.algorithms import ec
from tff_flare.algorithms import ec_ffl
from tff_flare.algorithms import ef21
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import flare
from tff_flare.algorithms import masking
from tff_flare.algorithms import tff_baselines


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
  """The hyperparameters any algorithm may take; each algorithm reads the ones it needs.

  Attributes:
    client_optimizer: the local optimizer (re-initialized by every client every round).
    keep_percent: R, percent of each tensor's entries a client sends.
    tau, tau_decay: TAU and c of FLARE's pull and EC+FedProx's proximal term.
    mask_percentile: t, FLARE's mask percentile.
    reg_steps: p, FLARE's regularized local steps (int, or 'all').
    local_epochs: E, the local epochs the client datasets hold (EC-FFL adapts it).
    total_clients: N, the population EF21's server mean covers.
    is_regularized: predicate on a variable name (FLARE, EC+FedProx); None: every tensor.
    tff_fedprox_strength: TFF FedProx's proximal strength.
    keep_probability, mask_weighting, num_mask_draws, seed: update masking's q, weights,
      empirical draws and base seed.
  """

  client_optimizer: tff.learning.optimizers.Optimizer
  keep_percent: float = 0.001
  tau: float = 0.05
  tau_decay: float = 1.1
  mask_percentile: float = 50.0
  reg_steps: Union[int, str] = 1
  local_epochs: int = 1
  total_clients: int = 10
  is_regularized: Optional[Callable[[str], bool]] = None
  tff_fedprox_strength: float = 0.01
  keep_probability: float = 0.5
  mask_weighting: str = 'uniform'
  num_mask_draws: int = 0
  seed: int = 0

  def pick(self, *names: str) -> dict[str, Any]:
    return {name: getattr(self, name) for name in names}


Builder = Callable[[composer.ModelFn, Hyperparameters], composer.AlgorithmProcess]
_EC = ('keep_percent', 'client_optimizer')
_PROX = _EC + ('tau', 'tau_decay', 'is_regularized')
_MASK = ('client_optimizer', 'keep_probability', 'num_mask_draws', 'seed')

ALGORITHMS: dict[str, Builder] = {
    'flare': lambda m, h: flare.build_flare(m, **h.pick(*_PROX, 'mask_percentile', 'reg_steps')),
    'ec': lambda m, h: ec.build_ec(m, **h.pick(*_EC)),
    'ec_fedprox': lambda m, h: ec.build_ec_fedprox(m, **h.pick(*_PROX)),
    'ec_ffl': lambda m, h: ec_ffl.build_ec_ffl(m, **h.pick(*_EC, 'local_epochs')),
    'ef21': lambda m, h: ef21.build_ef21(m, **h.pick(*_EC, 'total_clients')),
    'ef21_dense': lambda m, h: ef21.build_ef21(m, dense_state_shortcut=True, **h.pick(*_EC)),
    'fedavg': lambda m, h: fedavg.build_fedavg(m, **h.pick('client_optimizer')),
    'mask_none': lambda m, h: masking.build_masked_fedavg(
        m, mask_mode='none', weighting=h.mask_weighting, **h.pick(*_MASK)),
    'mask_independent': lambda m, h: masking.build_masked_fedavg(
        m, mask_mode='independent', weighting=h.mask_weighting, **h.pick(*_MASK)),
    'mask_synchronized': lambda m, h: masking.build_masked_fedavg(
        m, mask_mode='synchronized', weighting=h.mask_weighting, **h.pick(*_MASK)),
    'tff_fedavg': lambda m, h: tff_baselines.build_tff_fedavg(m, **h.pick('client_optimizer')),
    'tff_fedprox': lambda m, h: tff_baselines.build_tff_fedprox(
        m, proximal_strength=h.tff_fedprox_strength, **h.pick('client_optimizer')),
}
NAMES = tuple(ALGORITHMS)


def build(name: str, model_fn: composer.ModelFn,
          hyperparameters: Hyperparameters) -> composer.AlgorithmProcess:
  """The process of algorithm `name`.

  Raises:
    ValueError: an unknown name (listing the known ones) or a bad hyperparameter.
  """
  if name not in ALGORITHMS:
    raise ValueError(f'Unknown algorithm {name!r}; known: {", ".join(NAMES)}.')
  return ALGORITHMS[name](model_fn, hyperparameters)
