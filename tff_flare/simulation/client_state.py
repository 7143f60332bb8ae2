"""The driver-side store of per-client state (accumulators, EF21 states), keyed by client id.

As in TFF's stateful-clients example, a process's `next` receives the states of the round's
clients as a CLIENTS-placed list and returns their new states; the simulation driver keeps
them here between rounds. A client that is not sampled keeps its state untouched; a client
never seen before starts from the process's `initial_client_state()` (zeros).

Three stores with one interface: `ClientStateStore` keeps every state in RAM;
`DiskClientStateStore` keeps them as `.npy` files and reads them memory-mapped, so the
driver's memory holds only the round's clients (the FC's 100 accumulators are 14.5 GB);
`TensorFileClientStateStore` keeps them as files the client computations read and write
themselves where they run (TFF's workers), so no state crosses the driver.
"""

import collections
import collections.abc
import hashlib
import json
import os
import pathlib
import re
import shutil
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tff_flare.simulation import files


class ClientStateMismatchError(ValueError):
  """A client state does not have the structure, shapes or dtypes the process expects."""


def _signature(state) -> list[tuple[tuple[int, ...], np.dtype]]:
  return [(np.shape(t), np.asarray(t).dtype) for t in tf.nest.flatten(state)]


class StateView(collections.abc.Sequence):
  """Clients' states read from a store when indexed (`ClientStateStore.view`): a round
  reads a client's state when the client starts, so a disk store loads only those in
  training, and a state replaced mid-round is not kept alive by the round."""

  def __init__(self, store: 'ClientStateStore', client_ids: list[Hashable]):
    self._store = store
    self._client_ids = client_ids

  def __len__(self) -> int:
    return len(self._client_ids)

  def __getitem__(self, index):
    if isinstance(index, slice):
      return [self._store.get(cid) for cid in self._client_ids[index]]
    return self._store.get(self._client_ids[index])


class ClientStateStore:
  """Per-client states held in memory as nests of numpy arrays or tensors (as given).

  Args:
    initial_state_fn: no-arg callable returning a new client's state (e.g. a process's
      `initial_client_state` computation); called once, its result is the template that
      every stored state must match.
  """

  def __init__(self, initial_state_fn: Callable[[], Any]):
    self._initial_state = tf.nest.map_structure(np.asarray, initial_state_fn())
    self._signature = _signature(self._initial_state)
    self._states: dict[Hashable, Any] = {}

  @property
  def initial_state(self):
    return self._initial_state

  def __len__(self) -> int:
    return len(self._states)

  def __contains__(self, client_id: Hashable) -> bool:
    return client_id in self._states

  def client_ids(self) -> list[Hashable]:
    """Ids of clients with a stored (non-initial) state, in insertion order."""
    return list(self._states)

  def get(self, client_id: Hashable):
    """The client's state; the initial state for a client never updated."""
    return self._states.get(client_id, self._initial_state)

  def view(self, client_ids: Sequence[Hashable]) -> 'StateView':
    """The states of `client_ids` as a sequence that reads each one when it is indexed."""
    return StateView(self, list(client_ids))

  def validate(self, state, client_id: Hashable = None) -> Any:
    """Returns `state` (its leaves as given: numpy arrays, or tensors, which are not copied)
    or raises `ClientStateMismatchError`."""
    try:
      tf.nest.assert_same_structure(self._initial_state, state, check_types=False)
    except (ValueError, TypeError) as e:
      raise ClientStateMismatchError(
          f'Client state of {client_id!r} does not have the structure of the process\'s '
          f'client state: {e}') from e
    state = tf.nest.map_structure(lambda t: t if tf.is_tensor(t) else np.asarray(t), state)
    signature = _signature(state)
    if signature != self._signature:
      raise ClientStateMismatchError(
          f'Client state of {client_id!r} has (shape, dtype) {signature}, expected '
          f'{self._signature}.')
    return state

  def update(self, client_ids: Sequence[Hashable], states: Sequence[Any]) -> None:
    """Stores the new states of `client_ids` (same order); validates every one first."""
    if len(client_ids) != len(states):
      raise ClientStateMismatchError(f'{len(client_ids)} client ids but {len(states)} states.')
    validated = [self.validate(s, cid) for cid, s in zip(client_ids, states)]
    self._store(client_ids, validated)

  def _store(self, client_ids: Sequence[Hashable], states: Sequence[Any]) -> None:
    """Keeps already validated states."""
    for cid, state in zip(client_ids, states):
      self._states[cid] = state

  def as_dict(self) -> dict[Hashable, Any]:
    """All stored states."""
    return {cid: self.get(cid) for cid in self.client_ids()}

  def load_dict(self, states: dict[Hashable, Any]) -> None:
    """Replaces the stored states; validates every one first (nothing changes if one fails)."""
    ids = list(states)
    validated = [self.validate(states[cid], cid) for cid in ids]
    self._clear()
    self._store(ids, validated)

  def _clear(self) -> None:
    self._states = {}

  def checkpoint_arrays(self, client_ids: Sequence[Hashable]) -> list[np.ndarray]:
    """What a checkpoint saves: every leaf of every client's state, in `client_ids` order."""
    return [np.asarray(t) for cid in client_ids for t in tf.nest.flatten(self.get(cid))]

  def restore_checkpoint_arrays(self, client_ids: Sequence[Hashable],
                                arrays: Sequence[np.ndarray]) -> None:
    """Inverse of `checkpoint_arrays`."""
    size = len(self._signature)
    if not self._holds_states(arrays, len(client_ids)) and _is_disk_index(arrays, len(client_ids)):
      raise ClientStateMismatchError(
          'The checkpoint holds a disk store\'s index, not the states: they are in the run\'s '
          'client_states/ folder (resume with client_state_storage=disk).')
    if len(arrays) != size * len(client_ids):
      raise ClientStateMismatchError(
          f'The checkpoint holds {len(arrays)} client-state arrays, expected {size} for each '
          f'of {len(client_ids)} clients.')
    self.load_dict({
        cid: tf.nest.pack_sequence_as(self._initial_state, list(arrays[i * size:(i + 1) * size]))
        for i, cid in enumerate(client_ids)
    })

  def _holds_states(self, arrays: Sequence[np.ndarray], num_clients: int) -> bool:
    """Whether checkpoint `arrays` are `num_clients` states of this store's signature."""
    return ([(np.shape(a), np.asarray(a).dtype) for a in arrays
            ] == [(tuple(shape), dtype) for shape, dtype in self._signature] * num_clients)

  def commit(self, version: int, retained_versions: Sequence[int]) -> None:
    """Called once checkpoint `version` holds the current states (nothing to do in memory).

    Args:
      version: the checkpoint just written.
      retained_versions: every checkpoint still kept (`version` among them).
    """


# The disk store's names: index files, client folders (the id's hex), generation files.
_INDEX_FILE = re.compile(r'index_(\d+)\.json')
_CLIENT_DIR = re.compile(r'[0-9a-f]+|x[0-9a-f]{64}')
_MAX_HEX_NAME = 200  # Folder names of hex ids up to this long; file names may be 255 bytes.
_GENERATION_FILE = re.compile(r'g(\d{9})_\d+\.(?:npy|tensor)')


def _is_disk_index(arrays: Sequence[np.ndarray], num_clients: int) -> bool:
  """Whether checkpoint `arrays` are a disk store's index (`checkpoint_arrays`)."""
  return (len(arrays) == 2 and np.shape(arrays[0]) == (num_clients,) and
          np.shape(arrays[1]) == (1,) and all(np.asarray(a).dtype == np.int64 for a in arrays))


def client_folder(directory: pathlib.Path, client_id: Hashable) -> pathlib.Path:
  """A client's folder under `directory`: its id's UTF-8 bytes in hex, any id a name of its
  own (no path separator, no `..`); an empty id, or one whose hex would be longer than a file
  name may be, is `x` and its SHA-256 instead (`x` is no hex digit: the two never meet).

  Raises:
    TypeError: a client id that is not a string (0 and '0' would share a folder).
  """
  if not isinstance(client_id, str):
    raise TypeError(f'Client ids are strings, got {client_id!r} ({type(client_id).__name__}).')
  name = client_id.encode().hex()
  if not name or len(name) > _MAX_HEX_NAME:
    name = 'x' + hashlib.sha256(client_id.encode()).hexdigest()
  return pathlib.Path(directory) / name


class DiskClientStateStore(ClientStateStore):
  """Per-client states as `.npy` files under `directory`, read back memory-mapped.

  Every `update` writes a new generation of files (`<client>/g<generation>_<leaf>.npy`,
  written to a temporary name and renamed) and never overwrites the files a checkpoint may
  refer to; a checkpoint saves only which generation each client is at
  (`checkpoint_arrays`). `commit(version, retained_versions)` (after checkpoint `version` is
  written) records that index in `index_<version>.json` and deletes the generations that
  neither the current index nor any retained checkpoint refers to, so every kept checkpoint
  can be restored. After a crash, `restore_checkpoint_arrays` returns every client to the
  generation of the checkpoint restored.

  Args:
    initial_state_fn: as for `ClientStateStore`.
    directory: where the files go (created; one directory per store).
  """

  def __init__(self, initial_state_fn: Callable[[], Any], directory: str | os.PathLike):
    super().__init__(initial_state_fn)
    self._directory = pathlib.Path(directory)
    self._directory.mkdir(parents=True, exist_ok=True)
    self._generation = 0
    self._index: dict[Hashable, int] = {}

  def __len__(self) -> int:
    return len(self._index)

  def __contains__(self, client_id: Hashable) -> bool:
    return client_id in self._index

  def client_ids(self) -> list[Hashable]:
    return list(self._index)

  def _client_dir(self, client_id: Hashable) -> pathlib.Path:
    return client_folder(self._directory, client_id)

  _SUFFIX = '.npy'

  def _path(self, client_id: Hashable, generation: int, leaf: int) -> pathlib.Path:
    return self._client_dir(client_id) / f'g{generation:09d}_{leaf}{self._SUFFIX}'

  def _read_leaf(self, path: pathlib.Path, shape, dtype):
    """One leaf of a state, memory-mapped (a file of no entries is read whole)."""
    del dtype  # The file says it.
    return np.load(path, mmap_mode='r' if np.prod(shape) else None)

  def _write_leaf(self, path: pathlib.Path, array) -> None:
    """One leaf, written to a temporary name and renamed."""
    temporary = path.with_suffix('.tmp.npy')
    np.save(temporary, array)
    os.replace(temporary, path)

  def get(self, client_id: Hashable):
    generation = self._index.get(client_id)
    if generation is None:
      return self._initial_state
    leaves = []
    for leaf, (shape, dtype) in enumerate(self._signature):
      path = self._path(client_id, generation, leaf)
      try:
        leaves.append(self._read_leaf(path, shape, dtype))
      except (OSError, ValueError, tf.errors.OpError) as e:
        raise ClientStateMismatchError(
            f'State file {path} of client {client_id!r} cannot be read: {e}') from e
    return tf.nest.pack_sequence_as(self._initial_state, leaves)

  def _store(self, client_ids: Sequence[Hashable], states: Sequence[Any]) -> None:
    """Writes the states as the next generation of files."""
    self._generation += 1
    for cid, state in zip(client_ids, states):
      leaves = tf.nest.flatten(state)
      if leaves:
        self._client_dir(cid).mkdir(exist_ok=True)
      for leaf, array in enumerate(leaves):
        self._write_leaf(self._path(cid, self._generation, leaf), array)
      self._index[cid] = self._generation

  def _clear(self) -> None:
    self._index = {}

  def checkpoint_arrays(self, client_ids: Sequence[Hashable]) -> list[np.ndarray]:
    """`[generation of each client (-1: initial state), the store's generation]`."""
    return [
        np.array([self._index.get(cid, -1) for cid in client_ids], np.int64),
        np.array([self._generation], np.int64)
    ]

  def restore_checkpoint_arrays(self, client_ids: Sequence[Hashable],
                                arrays: Sequence[np.ndarray]) -> None:
    """Inverse of `checkpoint_arrays`; a checkpoint written with the states in memory (every
    client's arrays) is written out as a generation of files (a run may move its client
    states to disk when it resumes)."""
    # New generations never reuse a number whose files a later checkpoint may refer to.
    on_disk = [
        int(match.group(1))
        for p in self._directory.glob(f'*/g*_*{self._SUFFIX}')
        if (match := _GENERATION_FILE.fullmatch(p.name))
    ]
    if self._holds_states(arrays, len(client_ids)):
      self._generation = max([0] + on_disk)
      super().restore_checkpoint_arrays(client_ids, arrays)
      return
    if not _is_disk_index(arrays, len(client_ids)):
      raise ClientStateMismatchError(
          f'The checkpoint holds neither a disk store\'s index nor {len(client_ids)} client '
          'states of this algorithm.')
    self._index = {cid: int(g) for cid, g in zip(client_ids, arrays[0]) if g >= 0}
    self._generation = max([int(arrays[1][0])] + on_disk)
    for cid in self._index:
      self.get(cid)  # Opens every file: a missing one fails here, not rounds later.

  def _index_path(self, version: int) -> pathlib.Path:
    return self._directory / f'index_{version}.json'

  def commit(self, version: int, retained_versions: Sequence[int]) -> None:
    """Records checkpoint `version`'s index; deletes files no kept checkpoint refers to."""
    index = {self._client_dir(cid).name: g for cid, g in self._index.items()}
    files.write_file(self._index_path(version), json.dumps(index))
    keep = collections.defaultdict(set)
    for name, generation in index.items():
      keep[name].add(generation)
    for kept in retained_versions:
      try:
        kept_index = json.loads(files.read_text(self._index_path(kept)))
      except FileNotFoundError:
        continue
      except (OSError, ValueError):
        kept_index = None
      if not isinstance(kept_index, dict) or not all(
          isinstance(g, int) and not isinstance(g, bool) for g in kept_index.values()):
        return  # A kept checkpoint's index damaged: which files it needs is unknown, so
        # none is deleted (its restore names the damage; the next commit collects).
      for name, generation in kept_index.items():
        keep[name].add(generation)
    for entry in self._directory.iterdir():
      found = _INDEX_FILE.fullmatch(entry.name)
      if found:
        if int(found.group(1)) not in retained_versions:
          entry.unlink(missing_ok=True)
        continue
      if not _CLIENT_DIR.fullmatch(entry.name) or not entry.is_dir() or entry.is_symlink():
        continue  # Not the store's (a copy someone left): neither read nor removed.
      generations = keep.get(entry.name)
      if generations is None:
        shutil.rmtree(entry, ignore_errors=True)
        continue
      prefixes = tuple(f'g{g:09d}_' for g in generations)
      for path in entry.iterdir():
        if not path.name.startswith(prefixes) or path.name.endswith(('.tmp.npy', '.tmp')):
          path.unlink(missing_ok=True)


class TensorFileClientStateStore(DiskClientStateStore):
  """The disk store's generations, indexes and checkpoints, with states as files that the
  client computations read and write themselves where they run
  (`AlgorithmProcess.next_with_state_files`), so no client state crosses the driver.

  Generation g of a client's leaf i is `<client folder>/g<g, 9 digits>_<i>.tensor`
  (`tf.io.serialize_tensor`). A round on TFF's runtime: `read, write = store.prefixes(ids)`
  (read: each client's current generation, '' for a client never trained; write: the next
  generation), the process's `next_with_state_files`, then `store.written(ids)`; a round that
  fails leaves every client at its generation. Where the round runs in this process (the
  in-process executor), `get` and `update` read and write the same files here. The directory
  must be the same path on the driver and on every worker (one machine, or storage every
  worker mounts there).
  """

  _SUFFIX = '.tensor'

  def _prefix(self, client_id: Hashable, generation: int) -> str:
    return str(self._client_dir(client_id) / f'g{generation:09d}_')

  def prefixes(self, client_ids: Sequence[Hashable]) -> tuple[list[str], list[str]]:
    """`(read prefixes, write prefixes)` of the clients for the next round (their folders
    made)."""
    for cid in client_ids:
      self._client_dir(cid).mkdir(exist_ok=True)
    return ([
        self._prefix(cid, self._index[cid]) if cid in self._index else '' for cid in client_ids
    ], [self._prefix(cid, self._generation + 1) for cid in client_ids])

  def written(self, client_ids: Sequence[Hashable]) -> None:
    """The round that got `prefixes(client_ids)` has written their new states."""
    self._generation += 1
    for cid in client_ids:
      self._index[cid] = self._generation

  def _read_leaf(self, path: pathlib.Path, shape, dtype):
    leaf = tf.io.parse_tensor(tf.io.read_file(str(path)), dtype).numpy()
    if leaf.shape != tuple(shape):
      raise ValueError(f'shape {leaf.shape}, expected {tuple(shape)}')
    return leaf

  def _write_leaf(self, path: pathlib.Path, array) -> None:
    temporary = path.with_name(path.name + '.tmp')
    tf.io.write_file(str(temporary), tf.io.serialize_tensor(array))
    os.replace(temporary, path)
