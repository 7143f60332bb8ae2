"""Which clients take part in each round: a pure function of the round number.

Two samplers, both without replacement within a round and shared by every algorithm of a run:

* `uniform` (default): TFF's `tff.simulation.build_uniform_sampling_fn`, seeded per round.
* `python_random`: the authors' client-unavailability stream (`docs/faithfulness.md` R13):
  one `random.Random(seed)` for the whole run and, each round, `rng.sample(range(N), k)`;
  client `i` is the `i`-th client of the population. Round `r`'s clients are found by
  replaying the stream from round 0, so a resumed run draws what an uninterrupted one does.

When every client takes part, both return the whole population in order.
"""

import random
from collections.abc import Callable, Sequence

import tensorflow_federated as tff

from tff_flare.algorithms import hyperparameters

SAMPLERS = ('uniform', 'python_random')

Sampler = Callable[[int], list[str]]


def validate_sampler(kind: str, num_clients: int, clients_per_round: int) -> None:
  """Raises `ValueError` for an unknown sampler or `clients_per_round` outside [1, N]."""
  if kind not in SAMPLERS:
    raise ValueError(f'Unknown client sampling {kind!r}; known: {", ".join(SAMPLERS)}.')
  if (not hyperparameters.is_int(clients_per_round) or not 1 <= clients_per_round <= num_clients):
    raise ValueError(f'clients_per_round must be in [1, {num_clients}] (the number of '
                     f'clients), got {clients_per_round}.')


def build_client_sampler(client_ids: Sequence[str],
                         clients_per_round: int,
                         seed: int,
                         kind: str = 'uniform') -> Sampler:
  """`round_num -> list of client ids` (see the module docstring).

  Args:
    client_ids: the population, in partition order (client `i` is `client_ids[i]`).
    clients_per_round: how many clients take part in a round.
    seed: the sampler's seed.
    kind: one of `SAMPLERS`.

  Raises:
    ValueError: see `validate_sampler`.
  """
  client_ids = list(client_ids)
  validate_sampler(kind, len(client_ids), clients_per_round)
  if clients_per_round == len(client_ids):
    return lambda round_num: list(client_ids)
  if kind == 'uniform':
    sample = tff.simulation.build_uniform_sampling_fn(client_ids, replace=False, random_seed=seed)
    return lambda round_num: sample(round_num, clients_per_round)
  return _PythonRandomStream(client_ids, clients_per_round, seed)


class _PythonRandomStream:
  """The authors' stream: `random.Random(seed)`, then `sample(range(N), k)` every round."""

  def __init__(self, client_ids: list[str], clients_per_round: int, seed: int):
    self._client_ids = client_ids
    self._clients_per_round = clients_per_round
    self._seed = seed
    self._rounds: list[list[int]] = []
    self._rng = random.Random(seed)

  def __call__(self, round_num: int) -> list[str]:
    if round_num < 0:
      raise ValueError(f'round_num must be >= 0, got {round_num}.')
    while len(self._rounds) <= round_num:
      self._rounds.append(self._rng.sample(range(len(self._client_ids)), self._clients_per_round))
    return [self._client_ids[i] for i in self._rounds[round_num]]
