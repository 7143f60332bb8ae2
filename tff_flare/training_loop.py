"""Simulation driver: runs several processes side by side on the same sampled clients.

Each round, the clients are drawn once with `tff.simulation.build_uniform_sampling_fn`
(seeded, a pure function of the round number) and every algorithm trains on the same clients
and data, each with its own client-state store (`client_state.ClientStateStore`). TFF's
`tff.simulation.run_training_process` cannot be used as is: it calls `next(state, data)`, and
the processes with client state need `next(state, data, client_states)` and return new states.
"""

import collections
from collections.abc import Callable, Mapping, Sequence
import time
from typing import Any, Optional

import tensorflow as tf
import tensorflow_federated as tff

from tff_flare import client_state
from tff_flare import masking
from tff_flare import remote
from tff_flare import stateful_process

# evaluate_fn(model_weights: tff.learning.models.ModelWeights) -> {metric name: float}
EvaluateFn = Callable[[Any], Mapping[str, float]]


class AlgorithmRun:
  """One process, its server state and (if it has one) its client-state store.

  Args:
    name: the algorithm's name in histories and tables.
    process: one of our processes or a `tff.learning` process.
    initial_weights: optional `ModelWeights` to start from instead of the process's own
      initialization, so that several algorithms share one initial model.
    client_state_dir: keep the client states in files under this directory
      (`client_state.DiskClientStateStore`) instead of in memory.
  """

  def __init__(self, name: str, process, initial_weights=None,
               client_state_dir: Optional[str] = None):
    self.name = name
    self.process = process
    self.state = process.initialize()
    if initial_weights is not None:
      self.state = process.set_model_weights(self.state, initial_weights)
    has_client_state = isinstance(process, stateful_process.StatefulClientsProcess) and (
        process.has_client_state)
    if not has_client_state:
      self.store = None
    elif client_state_dir is None:
      self.store = client_state.ClientStateStore(process.initial_client_state)
    else:
      self.store = client_state.DiskClientStateStore(process.initial_client_state,
                                                     client_state_dir)

  def run_round(self, client_ids: Sequence[str], datasets: Sequence[tf.data.Dataset]):
    """Runs one round on the given clients; returns the round's metrics."""
    if isinstance(self.process, masking.MaskingProcess):
      keys = [masking.client_key(cid) for cid in client_ids]
      output = self.process.next(self.state, list(datasets), keys)
    elif self.store is None:
      output = self.process.next(self.state, list(datasets))
    else:
      states = self.store.get_many(client_ids)
      if remote.is_remote():  # Each client trains once (see `stateful_process.RoundPhases`).
        output = stateful_process.next_in_phases(self.process, self.state, list(datasets),
                                                 states)
      else:
        output = self.process.next(self.state, list(datasets), states)
      self.store.update(client_ids, output.client_states)
    self.state = output.state
    return output.metrics

  def model_weights(self):
    return self.process.get_model_weights(self.state)


def build_client_sampler(client_ids: Sequence[str], clients_per_round: int, seed: int):
  """`round_num -> list of client ids`, sampled without replacement, seeded per round."""
  if not 1 <= clients_per_round <= len(client_ids):
    raise ValueError(f'clients_per_round must be in [1, {len(client_ids)}] (the number of '
                     f'clients), got {clients_per_round}.')
  if clients_per_round == len(client_ids):
    return lambda round_num: list(client_ids)
  sample = tff.simulation.build_uniform_sampling_fn(
      list(client_ids), replace=False, random_seed=seed)
  return lambda round_num: sample(round_num, clients_per_round)


def run_side_by_side(
    runs: Sequence[AlgorithmRun],
    client_data: tff.simulation.datasets.ClientData,
    *,
    num_rounds: int,
    clients_per_round: int,
    seed: int = 0,
    evaluate_fn: Optional[EvaluateFn] = None,
    evaluate_every: int = 1,
    start_round: int = 0,
    on_round_end: Optional[Callable[[int, dict], None]] = None,
) -> list[dict]:
  """Trains every run for `num_rounds` rounds on the same clients; returns one row a round.

  Evaluation follows the authors' schedule (spec §5.4): at the start of a round, before its
  training, when `round_num % evaluate_every == 0`, and once more after the last round.

  Returns:
    A list of rows `{'round': r, 'clients': [...], name: {'train': ..., 'eval': ...}}`.
  """
  sampler = build_client_sampler(client_data.client_ids, clients_per_round, seed)
  history = []
  for round_num in range(start_round, start_round + num_rounds):
    client_ids = sampler(round_num)
    datasets = [client_data.create_tf_dataset_for_client(cid) for cid in client_ids]
    row: dict[str, Any] = collections.OrderedDict(round=round_num, clients=client_ids)
    for run in runs:
      entry = collections.OrderedDict()
      if evaluate_fn is not None and round_num % evaluate_every == 0:
        entry['eval'] = dict(evaluate_fn(run.model_weights()))
      start = time.perf_counter()
      entry['train'] = run.run_round(client_ids, datasets)
      entry['round_seconds'] = time.perf_counter() - start
      row[run.name] = entry
    history.append(row)
    if on_round_end is not None:
      on_round_end(round_num, row)
  if evaluate_fn is not None:
    final = collections.OrderedDict(round=start_round + num_rounds, clients=[])
    for run in runs:
      final[run.name] = {'eval': dict(evaluate_fn(run.model_weights()))}
    history.append(final)
  return history
