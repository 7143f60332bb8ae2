"""Program state of a run (the round, every algorithm's server state, every client's state).

Saved with `tff.program.FileProgramStateManager` (written to a temporary directory and
renamed, so a crash never leaves half a checkpoint), which keeps the last two: if the latest
cannot be read, removing it resumes from the one before. The state is
saved as flat lists of arrays (server state; the states of all clients of the population in
client-id order, or a disk store's index) and packed back with each algorithm's own
structure, so a checkpoint written in one execution mode resumes in another.
"""

import asyncio
import collections
from collections.abc import Sequence
from typing import Optional

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

KEEP_TOTAL = 2


class CheckpointError(ValueError):
  """A checkpoint that cannot be restored."""


class Checkpoints:
  """Saves and restores the program state of `runs` (`loop.AlgorithmRun`s).

  Args:
    directory: where the checkpoints go (`program_state_<round>`).
    runs: the run's algorithms.
    client_ids: the population, in a fixed order.
  """

  def __init__(self, directory: str, runs: Sequence, client_ids: Sequence[str]):
    self._manager = tff.program.FileProgramStateManager(directory, keep_total=KEEP_TOTAL,
                                                        keep_first=False)
    self._directory = directory
    self._runs = runs
    self._client_ids = list(client_ids)

  def _flatten(self, round_num: int):
    state = collections.OrderedDict(round=np.int64(round_num))
    for run in self._runs:
      clients = [np.zeros([0], np.float32)]  # A placeholder for clients without state.
      if tf.nest.flatten(run.store.initial_state):
        clients = run.store.checkpoint_arrays(self._client_ids)
      state[run.name] = collections.OrderedDict(
          server=[np.asarray(t) for t in tf.nest.flatten(run.state)], clients=clients)
    return state

  def versions(self) -> list[int]:
    """The rounds of the checkpoints on disk, oldest first."""
    return sorted(asyncio.run(self._manager.get_versions()) or [])

  def save(self, round_num: int) -> None:
    """Checkpoints the state after `round_num` rounds."""
    asyncio.run(self._manager.save(self._flatten(round_num), round_num))
    retained = self.versions()
    for run in self._runs:
      run.store.commit(round_num, retained)

  def restore(self, version: Optional[int] = None) -> int:
    """Restores checkpoint `version` (default: the latest) into the runs; returns its round.

    Returns 0, changing nothing, when there is no checkpoint.

    Raises:
      CheckpointError: the checkpoint cannot be restored (the message names it, and the
        previous one where there is one).
    """
    versions = self.versions()
    if not versions:
      return 0
    version = versions[-1] if version is None else version
    try:
      saved = asyncio.run(self._manager.load(version, self._flatten(0)))
      for run in self._runs:
        entry = saved[run.name]
        run.state = tf.nest.pack_sequence_as(run.state, list(entry['server']))
        if tf.nest.flatten(run.store.initial_state):
          run.store.restore_checkpoint_arrays(self._client_ids, list(entry['clients']))
      return int(saved['round'])
    except Exception as e:  # pylint: disable=broad-except
      earlier = [v for v in versions if v < version]
      fallback = (f'Remove it to resume from the checkpoint after round {earlier[-1]}.'
                  if earlier else 'Remove it to start over.')
      raise CheckpointError(
          f'Checkpoint {version} under {self._directory} cannot be restored '
          f'({type(e).__name__}: {str(e)[:300]}). {fallback}') from e
