"""Program state of a run (the round, every algorithm's server state, every client's state).

The round and the server states are saved with `tff.program.FileProgramStateManager`
(`program_state_<round>/`, written to a temporary directory and renamed, so a crash never
leaves half a checkpoint), which keeps the last two: if the latest cannot be read, removing
it resumes from the one before. The clients' states (every client of the population in
client-id order, or a disk store's index) go beside it, one `.npy` file per array in
`client_states_<round>/<algorithm>/`, written before the program state and kept and removed
with it (only for algorithms with client state). They do not go through the program state
manager because it holds a copy of what it saves (measured by `benchmarks.checkpoint_memory`);
written one array at a time, they need no copy. Everything is saved as flat lists
of arrays and packed back with each algorithm's own structure, so a checkpoint written in one
execution mode resumes in another. Checkpoints written before the client states moved out of
the program state (`clients` inside it) still restore.

Each save of the program state manager writes a SavedModel and traces new functions
(`_traced_save`, `_traced_restore`, `__call__`) whose graphs end in reference cycles holding
about one saved server state of memory (`benchmarks/checkpoint_garbage.py`: 153 MiB a save
of the FC's 139 MiB server state). The cycles are made inside TFF and TensorFlow; they outlive
Python's young-generation collections, and its automatic full collection waits until the
long-lived objects have grown by a quarter (~560,000 objects in a one-algorithm FC run), so
the FC's resident memory grew by 23-60 MB a round to ~10 GB. `Checkpoints.save` therefore
ends with a full `gc.collect()` (0.42-0.52 s on the FC), which keeps long runs level.
"""

import asyncio
import collections
from collections.abc import Sequence
import gc
import os
import pathlib
import re
import shutil
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.simulation import loop

KEEP_TOTAL = 2
_CLIENTS_PREFIX = 'client_states_'
_PROGRAM_PREFIX = 'program_state_'  # FileProgramStateManager's directories.


class CheckpointError(ValueError):
  """A checkpoint that cannot be restored."""


class SaveError(OSError):
  """A checkpoint that cannot be written (a full disk, a file size limit); nothing of it is
  left, and the checkpoints before it are intact."""


# What a save that did not finish leaves: FileProgramStateManager's `program_state_<n>_temp<k>`
# and this module's `client_states_<n>.tmp`.
_UNFINISHED = re.compile(rf'({_PROGRAM_PREFIX}\d+_temp\d*|{_CLIENTS_PREFIX}\d+\.tmp)')


def saved_rounds(directory) -> list[int]:
  """The rounds of the checkpoints under `directory` (`program_state_<round>`), oldest first.

  Read from the directory names, without building the runs (to check a resume up front).
  """
  directory = pathlib.Path(directory)
  if not directory.is_dir():
    return []
  return sorted(
      int(p.name[len(_PROGRAM_PREFIX):]) for p in directory.iterdir() if p.is_dir() and
      p.name.startswith(_PROGRAM_PREFIX) and p.name[len(_PROGRAM_PREFIX):].isdigit())


def read_checkpoint(directory, version: int, name: str) -> tuple[list, list[np.ndarray]]:
  """Algorithm `name`'s server state leaves and its clients' arrays in checkpoint `version`,
  read without building its run (for an analysis of a run's state; `Checkpoints.restore`
  resumes one).

  Returns:
    `(server, clients)`: the server state's leaves (the model's trainable weights first, as
    `tf.nest.flatten` orders a `LearningAlgorithmState`), and the clients' arrays in the
    population's order, each client's state leaves in turn (empty for a stateless algorithm).

  Raises:
    CheckpointError: no such checkpoint or algorithm in it.
  """
  directory = pathlib.Path(directory)
  program = directory / f'{_PROGRAM_PREFIX}{version}'
  try:
    saved = tf.saved_model.load(str(program))()
    server = [np.asarray(leaf) for leaf in saved[name]['server']]
  except (OSError, KeyError, TypeError, ValueError) as e:
    raise CheckpointError(f'{program} holds no server state of {name!r} '
                          f'({type(e).__name__}: {" ".join(str(e).split())[:200]}).') from e
  run_dir = directory / f'{_CLIENTS_PREFIX}{version}' / name
  count = len(list(run_dir.glob('*.npy'))) if run_dir.is_dir() else 0
  return server, [np.load(run_dir / f'{i}.npy') for i in range(count)]


class Checkpoints:
  """Saves and restores the program state of `runs` (`loop.AlgorithmRun`s).

  Args:
    directory: where the checkpoints go (`program_state_<round>`, `client_states_<round>`).
    runs: the run's algorithms.
    client_ids: the population, in a fixed order.
  """

  def __init__(self, directory: str, runs: Sequence, client_ids: Sequence[str]):
    self._manager = tff.program.FileProgramStateManager(directory,
                                                        keep_total=KEEP_TOTAL,
                                                        keep_first=False)
    self._directory = pathlib.Path(directory)
    self._runs = runs
    self._client_ids = list(client_ids)

  def _program_state(self, round_num: int, with_clients: bool = False, snapshots=None):
    """The round and the server states; `with_clients`: the clients too (the old layout)."""
    state: collections.OrderedDict[str, Any] = collections.OrderedDict(round=np.int64(round_num))
    for run in self._runs:
      snapshot = (snapshots or {}).get(run.name) or run.snapshot([])
      state[run.name] = collections.OrderedDict(server=list(snapshot.server))
      if with_clients:  # The old layout's placeholder for no client state.
        state[run.name]['clients'] = (run.snapshot(self._client_ids).clients
                                      if run.has_client_state else [np.zeros([0], np.float32)])
    return state

  def _stateful_runs(self) -> list:
    return [run for run in self._runs if run.has_client_state]

  def _clients_dir(self, version: int) -> pathlib.Path:
    return self._directory / f'{_CLIENTS_PREFIX}{version}'

  def _write_clients(self, version: int, snapshots) -> None:
    """Writes every run's client arrays to `client_states_<version>/` (via a temporary)."""
    final = self._clients_dir(version)
    temporary = final.with_name(final.name + '.tmp')
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    for run in self._stateful_runs():
      run_dir = temporary / run.name
      run_dir.mkdir()
      for i, array in enumerate(snapshots[run.name].clients):
        np.save(run_dir / f'{i}.npy', array)
    shutil.rmtree(final, ignore_errors=True)  # Left by a save that did not finish.
    os.replace(temporary, final)

  def _read_clients(self, version: int, run) -> list[np.ndarray]:
    run_dir = self._clients_dir(version) / run.name
    count = len(list(run_dir.glob('*.npy')))
    if not count:
      raise FileNotFoundError(f'no client states in {run_dir}')
    return [np.load(run_dir / f'{i}.npy') for i in range(count)]

  def versions(self) -> list[int]:
    """The rounds of the checkpoints on disk, oldest first."""
    return sorted(asyncio.run(self._manager.get_versions()) or [])

  def remove_unfinished(self) -> None:
    """Removes what saves that did not finish left (a kill or a full disk during a save)."""
    if self._directory.is_dir():
      for entry in self._directory.iterdir():
        if _UNFINISHED.fullmatch(entry.name) and not entry.is_symlink():
          shutil.rmtree(entry, ignore_errors=True)

  def save(self, round_num: int) -> None:
    """Checkpoints the state after `round_num` rounds, then frees the save's cyclic garbage.

    Raises:
      SaveError: the checkpoint could not be written; what was written of it is removed.
    """
    snapshots = {run.name: run.snapshot(self._client_ids) for run in self._runs}
    try:
      self._write_clients(round_num, snapshots)
      asyncio.run(self._manager.save(self._program_state(round_num, snapshots=snapshots),
                                     round_num))
    except (OSError, tf.errors.OpError) as e:
      self.remove_unfinished()
      if round_num not in self.versions():
        shutil.rmtree(self._clients_dir(round_num), ignore_errors=True)
      earlier = self.versions()
      raise SaveError(
          f'The checkpoint after round {round_num - 1} could not be written under '
          f'{self._directory} ({type(e).__name__}: {" ".join(str(e).split())[:200]}): a full '
          'disk or a file size limit? ' +
          (f'Free space and start the same command again to resume from the checkpoint '
           f'after round {earlier[-1] - 1}.'
           if earlier else 'Free space and start the same command again.')) from e
    retained = self.versions()
    for entry in self._directory.glob(f'{_CLIENTS_PREFIX}*'):
      suffix = entry.name[len(_CLIENTS_PREFIX):]
      if not suffix.isdigit() or int(suffix) not in retained:
        shutil.rmtree(entry, ignore_errors=True)
    for run in self._runs:
      run.checkpointed(round_num, retained)
    gc.collect()  # The SavedModel write's reference cycles (the module docstring).

  def _load(self, version: int):
    """The program state of `version` and each run's client arrays, in either layout."""
    try:
      saved = asyncio.run(self._manager.load(version, self._program_state(0)))
    except Exception:  # pylint: disable=broad-except
      if self._clients_dir(version).exists():
        raise
      old = asyncio.run(self._manager.load(version, self._program_state(0, with_clients=True)))
      return old, {run.name: list(old[run.name]['clients']) for run in self._stateful_runs()}
    return saved, {run.name: self._read_clients(version, run) for run in self._stateful_runs()}

  def restore(self, version: int | None = None) -> int:
    """Restores checkpoint `version` (default: the latest) into the runs; returns its round.

    Returns 0, changing nothing, when there is no checkpoint. What unfinished saves left is
    removed first.

    Raises:
      CheckpointError: the checkpoint cannot be restored (the message names it, and the
        previous one where there is one).
    """
    self.remove_unfinished()
    versions = self.versions()
    if not versions:
      return 0
    version = versions[-1] if version is None else version
    try:
      saved, clients = self._load(version)
      for run in self._runs:
        run.restore(
            loop.RunSnapshot(server=list(saved[run.name]['server']),
                             clients=clients.get(run.name, [])), self._client_ids)
      return int(saved['round'])
    except Exception as e:  # pylint: disable=broad-except
      earlier = [v for v in versions if v < version]
      parts = ' and '.join(
          str(p)
          for p in (self._directory / f'{_PROGRAM_PREFIX}{version}', self._clients_dir(version))
          if p.exists())
      fallback = (f'Remove {parts} to resume from the checkpoint after round {earlier[-1] - 1}.'
                  if earlier else f'Remove {parts} to start over.')
      raise CheckpointError(
          f'The checkpoint after round {version - 1} cannot be restored '
          f'({type(e).__name__}: {" ".join(str(e).split())[:300]}). {fallback}') from e
