"""The one round loop: every algorithm of a run trains side by side on the same clients.

Every run of the project (the experiment binary, the masking grid, the demo, the tests) goes
through `run_rounds`. Each round the sampler picks the clients (a pure function of the round
number), each algorithm trains on the same clients and data with its own client states, and
the round's row (metrics of every algorithm) goes through the hooks: evaluation,
releases, checkpoints, progress lines are hooks (`hooks`), not part of the loop. The loop
calls the same methods on every algorithm (`AlgorithmRun`), whatever the process and wherever
it runs (`tff_flare.execution.modes`).

TFF's `tff.simulation.run_training_process` cannot be used as is: it calls `next(state,
data)`, and these processes take and return the round's client states.

A round's row is a `RoundRow`: the round, its clients and an `AlgorithmRow` per algorithm
(`row['flare'].eval['accuracy']`, `row['flare'].train['aggregator']['communication']`).
"""

from collections.abc import Callable, Mapping, Sequence
import time
from typing import Any

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import process as process_lib
from tff_flare.execution import modes
from tff_flare.execution import remote
from tff_flare.simulation import client_state

# evaluate(model_weights) -> {'loss': float, 'accuracy': float, ...}
EvaluateFn = Callable[[Any], Mapping[str, float]]


@attrs.define
class AlgorithmRow:
  """One algorithm's part of a round's row (None: not measured this round).

  Attributes:
    eval: the test metrics of its model before the round's training (`{'loss', 'accuracy',
      ...}`, floats), on an evaluation round (`hooks.Evaluation`).
    round_seconds: the wall time of its round, seconds.
    bytes_driver_workers: the bytes its round moved to and from TFF's worker(s), when the
      execution counts them.
    bytes_uploaded: the bytes its clients sent (`bytes_sent_total`).
    train: the process's round metrics, namespaced per component (`client_work`,
      `aggregator`, `finalizer`).
    extra: anything else a hook adds (`{name: value or nest}`), released with the rest.
  """

  eval: dict[str, float] | None = None
  round_seconds: float | None = None
  bytes_driver_workers: int | None = None
  bytes_uploaded: int | None = None
  train: Mapping[str, Any] | None = None
  extra: dict[str, Any] = attrs.field(factory=dict)

  def released(self) -> dict[str, Any]:
    """The values measured, as the nest the release managers take (`{'eval': ..., 'train':
    ...}`; `metrics.csv` flattens it to `<algorithm>/eval/accuracy`, ...)."""
    values = {
        name: value
        for name, value in attrs.asdict(self, recurse=False).items()
        if name != 'extra' and value is not None
    }
    values.update(self.extra)
    return values


@attrs.define
class RoundRow:
  """A round's row: what every algorithm measured in round `round_num` (`row[name]`).

  Attributes:
    round_num: the round (the end of the run for the final row).
    client_ids: the round's clients (none in the final row).
    algorithms: `{name: AlgorithmRow}`, in the run's order.
  """

  round_num: int
  client_ids: list[str]
  algorithms: dict[str, AlgorithmRow]

  @classmethod
  def empty(cls, round_num: int, client_ids: Sequence[str], names: Sequence[str]) -> 'RoundRow':
    return cls(round_num, list(client_ids), {name: AlgorithmRow() for name in names})

  def __getitem__(self, name: str) -> AlgorithmRow:
    return self.algorithms[name]

  def released(self) -> dict[str, Any]:
    """`{name: AlgorithmRow.released()}`: the row as the release managers take it."""
    return {name: entry.released() for name, entry in self.algorithms.items()}


@attrs.frozen
class RunSnapshot:
  """An `AlgorithmRun`'s state as arrays: the server state's leaves, and the clients' arrays
  (`client_state` stores' checkpoint form: every client's arrays, or a disk store's index)."""

  server: list
  clients: list


class AlgorithmRun:
  """One algorithm of a run: its process as the execution runs it, its state, its clients.

  Args:
    name: the algorithm's name in rows and tables.
    process: the `AlgorithmProcess`.
    execution: the (entered) execution mode that runs it.
    client_state_dir: keep the clients' states in files under this directory
      (`client_state.DiskClientStateStore`) instead of in memory.
    states_written_by_clients: with `client_state_dir`, the files are the ones the client
      computations read and write themselves where TFF runs them
      (`client_state.TensorFileClientStateStore`, `next_with_state_files`); in this process
      (the in-process executor) the store reads and writes them.
    initial_weights: `ModelWeights` to start from instead of the process's own, so that the
      algorithms of a run share one initial model.

  An algorithm that adapts to the test loss (EC-FFL) gets it through `record_test_loss`
  (the hook `hooks.TestLossFeedback`, which reuses the round's evaluation).
  """

  def __init__(self,
               name: str,
               process: process_lib.AlgorithmProcess,
               execution: modes.Execution,
               *,
               client_state_dir=None,
               states_written_by_clients: bool = False,
               initial_weights=None):
    self.name = name
    self.process = process
    self.where = execution.where(process)
    self.bound = execution.bind(process)
    if client_state_dir is None:
      self.store = client_state.ClientStateStore(self.bound.initial_client_state)
    else:
      store = (client_state.TensorFileClientStateStore
               if states_written_by_clients else client_state.DiskClientStateStore)
      self.store = store(self.bound.initial_client_state, client_state_dir)
    self.state = self.bound.initialize()
    if initial_weights is not None:
      self.state = self.bound.set_model_weights(self.state, initial_weights)

  def run_round(self, client_ids: Sequence[str], datasets: Sequence[Any]):
    """Trains one round on these clients; returns the round's metrics."""
    if len(set(client_ids)) != len(client_ids):
      raise ValueError(f'A round trains each client once; got {list(client_ids)}.')
    next_with_state_files = getattr(self.bound, 'next_with_state_files', None)
    if (isinstance(self.store, client_state.TensorFileClientStateStore) and
        next_with_state_files is not None and self.process.next_with_state_files is not None):
      # The clients read and write their own states: only file names cross the driver.
      read, write = self.store.prefixes(client_ids)
      output = next_with_state_files(self.state, list(datasets), read, write,
                                     self.process.client_inputs(client_ids))
      self.store.written(client_ids)
      self.state = output.state
      return output.metrics
    # Each client's state is read when it starts and replaced when it ends: the round holds
    # the states of the clients in training, not two of every client's.
    output = self.bound.next(
        self.state,
        list(datasets),
        self.store.view(client_ids),
        self.process.client_inputs(client_ids),
        client_state_sink=lambda index, state: self.store.update([client_ids[index]], [state]))
    self.state = output.state
    return output.metrics

  def model_weights(self):
    return self.bound.get_model_weights(self.state)

  def record_test_loss(self, loss: float) -> None:
    """Gives an algorithm that adapts to the test loss (EC-FFL) its current model's loss."""
    self.state = self.bound.record_test_loss(self.state, loss)

  @property
  def has_client_state(self) -> bool:
    return bool(tf.nest.flatten(self.store.initial_state))

  def snapshot(self, client_ids: Sequence[str]) -> RunSnapshot:
    """The run's state as arrays (for a checkpoint): the server's, and every client's of
    `client_ids` (empty for an algorithm without client state)."""
    return RunSnapshot(
        server=[np.asarray(t) for t in tf.nest.flatten(self.state)],
        clients=self.store.checkpoint_arrays(client_ids) if self.has_client_state else [])

  def restore(self, snapshot: RunSnapshot, client_ids: Sequence[str]) -> None:
    """The run's state from a `snapshot` (of this algorithm, in any execution mode)."""
    self.state = tf.nest.pack_sequence_as(self.state, list(snapshot.server))
    if self.has_client_state:
      self.store.restore_checkpoint_arrays(client_ids, list(snapshot.clients))

  def checkpointed(self, round_num: int, retained: Sequence[int]) -> None:
    """A checkpoint after `round_num` is written; `retained` are the rounds still kept."""
    self.store.commit(round_num, retained)


class Hook:
  """What a loop calls around its rounds; every method is optional (these do nothing).

  `row` is the round's `RoundRow`: `before_round` may fill `row[name]` before the
  algorithms train (its `eval`, or `extra` values), `after_round` reads it.
  `after_last_round` gets the row of the end of the run (`round_num` the end, no clients,
  nothing measured yet), e.g. for a final evaluation.

  `after_round` returning True ends the run after that round (an early stop, as pfl's
  callbacks return `should_stop`): the hooks after it still see the round, then every hook's
  `after_last_round` runs with `end` the round after it.
  """

  def before_round(self, round_num: int, runs: Sequence[AlgorithmRun], row: RoundRow) -> None:
    pass

  def after_round(self, round_num: int, runs: Sequence[AlgorithmRun], row: RoundRow) -> bool | None:
    pass

  def after_last_round(self, end_round: int, runs: Sequence[AlgorithmRun], row: RoundRow) -> None:
    pass


ClientDatasetsFn = Callable[[Sequence[str], int], list[Any]]


def datasets_of(client_data: tff.simulation.datasets.ClientData) -> ClientDatasetsFn:
  """`client_datasets` for data that is the same every round."""
  return lambda client_ids, round_num: [
      client_data.create_tf_dataset_for_client(cid) for cid in client_ids
  ]


def run_rounds(runs: Sequence[AlgorithmRun],
               client_datasets: ClientDatasetsFn,
               sampler: Callable[[int], list[str]],
               *,
               start_round: int,
               end_round: int,
               hooks: Sequence[Hook] = (),
               execution_stats: remote.ExecutionStats | None = None) -> None:
  """Trains every run for rounds `start_round .. end_round - 1` (see the module docstring).

  Args:
    runs: the algorithms, trained in this order every round.
    client_datasets: `(client ids, round_num) -> their datasets` (`Task.client_datasets`, or
      `datasets_of(client_data)`), as TFF's simulation loops take a selection function of
      the round.
    sampler: `round_num -> client ids` (`sampling.build_client_sampler`).
    start_round, end_round: the rounds to train (`start_round` > 0 when resuming).
    hooks: called in order around every round, and at the end.
    execution_stats: the execution's traffic counter, if it has one: each algorithm's row
      then has `bytes_driver_workers`, the bytes its round moved to and from TFF's worker(s).
  """
  adapting = [run.name for run in runs if run.process.uses_test_loss]
  if adapting and not any(getattr(hook, 'feeds_test_loss', False) for hook in hooks):
    raise ValueError(f'{", ".join(adapting)} adapt to the test loss: add a '
                     'hooks.TestLossFeedback hook to the loop.')
  for round_num in range(start_round, end_round):
    client_ids = sampler(round_num)
    datasets = client_datasets(client_ids, round_num)
    row = RoundRow.empty(round_num, client_ids, [run.name for run in runs])
    for hook in hooks:
      hook.before_round(round_num, runs, row)
    for run in runs:
      entry = row[run.name]
      if execution_stats is not None:
        execution_stats.reset()
      start = time.perf_counter()
      metrics = run.run_round(client_ids, datasets)
      entry.round_seconds = time.perf_counter() - start
      if execution_stats is not None:
        entry.bytes_driver_workers = execution_stats.total_bytes()
      entry.bytes_uploaded = int(metrics['aggregator']['communication']['bytes_sent_total'])
      entry.train = metrics
    stop = False
    for hook in hooks:
      stop = bool(hook.after_round(round_num, runs, row)) or stop
    if stop:
      end_round = round_num + 1
      break
  final = RoundRow.empty(end_round, [], [run.name for run in runs])
  for hook in hooks:
    hook.after_last_round(end_round, runs, final)
