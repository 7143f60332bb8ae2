"""The driver-side store of per-client state (accumulators, EF21 states), keyed by client id.

As in TFF's stateful-clients example, a process's `next` receives the states of the round's
clients as a CLIENTS-placed list and returns their new states; the simulation driver keeps
them here between rounds. A client that is not sampled keeps its state untouched; a client
never seen before starts from the process's `initial_client_state()` (zeros).
"""

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf


class ClientStateMismatchError(ValueError):
  """A client state does not have the structure, shapes or dtypes the process expects."""


def _signature(state) -> list[tuple[tuple[int, ...], np.dtype]]:
  return [(np.shape(t), np.asarray(t).dtype) for t in tf.nest.flatten(state)]


class ClientStateStore:
  """Per-client states held in memory as numpy nests.

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

  def get_many(self, client_ids: Iterable[Hashable]) -> list[Any]:
    return [self.get(cid) for cid in client_ids]

  def validate(self, state, client_id: Hashable = None) -> Any:
    """Returns `state` as a numpy nest, or raises `ClientStateMismatchError`."""
    try:
      tf.nest.assert_same_structure(self._initial_state, state, check_types=False)
    except (ValueError, TypeError) as e:
      raise ClientStateMismatchError(
          f'Client state of {client_id!r} does not have the structure of the process\'s '
          f'client state: {e}') from e
    state = tf.nest.map_structure(np.asarray, state)
    signature = _signature(state)
    if signature != self._signature:
      raise ClientStateMismatchError(
          f'Client state of {client_id!r} has (shape, dtype) {signature}, expected '
          f'{self._signature}.')
    return state

  def update(self, client_ids: Sequence[Hashable], states: Sequence[Any]) -> None:
    """Stores the new states of `client_ids` (same order); validates every one first."""
    if len(client_ids) != len(states):
      raise ClientStateMismatchError(
          f'{len(client_ids)} client ids but {len(states)} states.')
    validated = [self.validate(s, cid) for cid, s in zip(client_ids, states)]
    for cid, state in zip(client_ids, validated):
      self._states[cid] = state

  def as_dict(self) -> dict[Hashable, Any]:
    """All stored states (for checkpointing)."""
    return dict(self._states)

  def load_dict(self, states: dict[Hashable, Any]) -> None:
    """Replaces the stored states, validating each."""
    validated = {cid: self.validate(s, cid) for cid, s in states.items()}
    self._states = validated
