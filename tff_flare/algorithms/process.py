"""The process interface every algorithm of this project has (built by `composer.compose`).

Every process has the same `next`, with per-client state as in TFF's stateful-clients
example: the states of the round's clients enter `next` as a CLIENTS-placed value and leave
it as one, and the driver keeps them between rounds (`tff_flare.simulation.client_state`):

  next(state, client_data, client_states, client_inputs)
      -> RoundOutput(state, metrics, client_states)

`client_states` and `client_inputs` hold one value per client: a state (`()` for an algorithm
whose clients keep none) and an input such as a mask key (`()` when the algorithm takes none).
"""

import collections.abc
import enum
import functools
import inspect
from collections.abc import Callable, Sequence
import types
import typing
from typing import Any

import attrs
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import parts as parts_lib
from tff_flare.algorithms import round_functions as round_functions_lib


@attrs.frozen
class RoundOutput:
  """What `next` returns: the new server state, the round's metrics, the new client states."""

  state: Any
  metrics: Any
  client_states: Any


@attrs.frozen
class RoundPhases:
  """`next`, cut in two at the aggregation, for TFF's distributed runtime.

  TFF's mergeable execution context splits a computation's clients over workers and merges at
  the aggregation; a value computed before the aggregation reaches a CLIENTS-placed result
  only by being computed again after it, so `next` run as one computation would train every
  client twice to return the new client states. Run as these two, each client trains once.
  Both are built from the same bodies as `next`.

  Attributes:
    client_phase: `(state, client_data, client_states, client_inputs, client_indices)` ->
      CLIENTS-placed `OrderedDict(client_index, client_state, summable)`; no aggregation.
    server_phase: `(state, summable @CLIENTS) -> (new state, metrics)` @SERVER.
  """

  client_phase: tff.Computation
  server_phase: tff.Computation


@attrs.frozen
class StateFileRounds:
  """How to build a process's rounds whose clients read and write their states as files
  (`AlgorithmProcess.next_with_state_files`, `client_sums_with_state_files`).

  They trace the model and the client work once more (about as long as the rest of the
  build), and only runs whose clients keep their states in files use them, so they are
  built at their first use.

  Attributes:
    build: no-arg callable -> `(next_with_state_files, client_sums_with_state_files or None)`.
    with_client_sums: whether `build` gives a `client_sums_with_state_files`.
  """

  build: Callable[[], tuple[tff.Computation, tff.Computation | None]]
  with_client_sums: bool


def describe(value: Any, depth: int = 0) -> Any:
  """A JSON value that says what an argument of a builder is, the same for equal arguments
  built twice: numbers, strings and None as they are; an enum by name; a sequence item by
  item; a numpy scalar as the Python number it holds; a function by its qualified name;
  another object (an optimizer, an aggregation factory) by its class and the describable
  values of its attributes (TFF's SGD:
  `{'class': '_SGD', '_lr': 0.1, '_momentum': 0.9, ...}`); what holds its settings only in a
  closure is its class alone."""
  if value is None or isinstance(value, (bool, int, float, str)):
    return value
  if isinstance(value, np.generic):  # np.float32(5.0) in a list as 5.0: was its class alone,
    return hyperparameters.as_python(value)  # the same for every value, unseen by a resume.
  if isinstance(value, enum.Enum):
    return f'{type(value).__name__}.{value.name}'
  if isinstance(value, (list, tuple)):
    return [describe(v, depth + 1) for v in value]
  if isinstance(value, dict):
    return {str(k): describe(v, depth + 1) for k, v in value.items()}
  if inspect.isfunction(value) or inspect.ismethod(value) or inspect.isbuiltin(value):
    return f'{value.__module__}.{value.__qualname__}'
  description = {'class': f'{type(value).__module__}.{type(value).__qualname__}'}
  if depth < 3:
    for name, attribute in sorted(getattr(value, '__dict__', {}).items()):
      described = describe(attribute, depth + 1)
      if described is not None and not (isinstance(described, dict) and
                                        set(described) == {'class'} and depth >= 2):
        description[name] = described
  return description


# How `check_argument` names the classes a user passes (TFF's, by their public names).
_PUBLIC_NAMES = {
    tff.learning.optimizers.Optimizer: 'a tff.learning.optimizers.Optimizer (e.g. '
                                       'tff.learning.optimizers.build_sgdm(learning_rate=0.1))',
    tff.aggregators.WeightedAggregationFactory: 'a tff.aggregators factory',
    tff.aggregators.UnweightedAggregationFactory: 'a tff.aggregators factory',
}


def _members(annotation: Any) -> tuple[Any, ...]:
  """The types a parameter's annotation allows (`int | None` -> `(int, NoneType)`)."""
  if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
    return typing.get_args(annotation)
  return (annotation,)


def check_argument(name: str, annotation: Any, value: Any) -> None:
  """Refuses a builder's argument of another type than its annotation says, in one line.

  The type only, for the annotations whose misuse would pass silently or fail deep inside
  TensorFlow: a `bool` flag given a string ('no' is true), an `int` given a float or one
  out of int32's range, a predicate that is not a function, an optimizer that is not TFF's.
  A knob's range is its own check (`hyperparameters.Knob`, the builder's Params); an
  annotation that also allows a string (a rule's name, `'all'`) or an enum is left to the
  builder, which converts it.

  Raises:
    ValueError: naming the argument, what it must be and what it got (the project's one
      error for a bad argument, as its knobs' checks raise).
  """
  members = _members(annotation)
  if value is None and type(None) in members:
    return
  if str in members or any(isinstance(m, type) and issubclass(m, enum.Enum) for m in members):
    return
  got = f'got {value!r}'[:120]
  if hyperparameters.is_flag(annotation):
    hyperparameters.check_flag(name, value)
  if int in members and float not in members:
    if not hyperparameters.is_int(value):
      raise ValueError(f'{name} must be an int, {got}.')
    hyperparameters.check_representable(name, value)
  callables = [m for m in members if typing.get_origin(m) is collections.abc.Callable]
  if callables and not callable(value):
    raise ValueError(f'{name} must be a function (of a trainable variable\'s name, say), {got}.')
  classes = [m for m in members if isinstance(m, type) and m.__module__ != 'builtins']
  if classes and not callables and not isinstance(value, tuple(classes)):
    kinds = ' or '.join(dict.fromkeys(_PUBLIC_NAMES.get(m, m.__name__) for m in classes))
    raise ValueError(f'{name} must be {kinds}' + (' or None' if type(None) in members else '') +
                     f', got {type(value).__name__}.')


def records_build(builder: Callable[..., 'AlgorithmProcess']) -> Callable[..., 'AlgorithmProcess']:
  """`builder`, with its arguments checked against its signature (`check_argument`: the one
  place a builder's options are checked; its knobs are its Params'), whose process records
  how it was built (`AlgorithmProcess.build`): `{'builder': <its name>, 'arguments': {name:
  describe(value)}}` of every argument but the model function (the model is compared by its
  variables). `simulate` records it and refuses a resume with a process built otherwise.
  Numpy scalar arguments are passed on as Python numbers."""
  signature = inspect.signature(builder)

  @functools.wraps(builder)
  def build(*args, **kwargs):
    # A numpy scalar argument (np.float32(5.0), an np.arange's np.int64) as the Python number
    # it holds: the builders' checks take Python numbers (were "must be a number, got 5.0").
    args = tuple(hyperparameters.as_python(a) for a in args)
    kwargs = {k: hyperparameters.as_python(v) for k, v in kwargs.items()}
    try:
      bound = signature.bind(*args, **kwargs)
    except TypeError as e:  # An unknown keyword, a missing one: Python's message, one line.
      raise TypeError(f'{builder.__name__}: {e}') from None
    for name, value in bound.arguments.items():
      if name != 'model_fn':
        check_argument(name, signature.parameters[name].annotation, value)
    built = builder(*args, **kwargs)
    bound.apply_defaults()
    built.build = dict(
        builder=builder.__name__,
        arguments={
            name: describe(value) for name, value in bound.arguments.items() if name != 'model_fn'
        })
    return built

  return build


class AlgorithmProcess(tff.templates.IterativeProcess):
  """An iterative process with this project's `next` (see the module docstring).

  Attributes:
    initial_client_state: `tff.Computation`, no argument, a new client's state.
    get_model_weights / set_model_weights: `tff.Computation`s, as in TFF's
      `LearningProcess`.
    record_test_loss: `tff.Computation` `(state, loss) -> state`, or None when the algorithm
      does not adapt to the test loss.
    num_trainable_parameters: Python int.
    phases: `RoundPhases` for distributed runs, or None when `next` can run whole there.
    next_with_state_files: for an algorithm with client state, `next` whose clients read
      their states from files and write their new ones, so no client state crosses the
      driver: `(state, client_data, read_prefixes, write_prefixes, client_inputs)` (prefixes
      CLIENTS-placed strings; a client's state leaf i is the file `<prefix><i>.tensor`, TF's
      serialized tensor; an empty read prefix is a new client) -> `(new state, metrics)`
      @SERVER. With no CLIENTS-placed result, TFF's distributed runtime runs it whole, each
      worker training its clients and summing their outputs. None without client state.
      Built at its first use (`StateFileRounds`).
    client_sums_with_state_files: the clients' part of `next_with_state_files`, for a driver
      that runs the server's round itself (`modes.RemoteExecution`): `(model weights @SERVER,
      round params @SERVER, client_data, read_prefixes, write_prefixes, client_inputs)` ->
      the sum of the clients' `summable` outputs @SERVER (`RoundFunctions.client_work`).
      None without client state or with a TFF aggregation factory. Built at its first use.
    client_sums: the same for a process without client state: `(model weights @SERVER,
      round params @SERVER, client_data, client_states, client_inputs)` -> the clients'
      summed outputs @SERVER (the (empty) client states pass through `next`). None with client
      state or with a TFF aggregation factory.
    round_functions: the `RoundFunctions` the process wraps, or None for a process that runs
      only on TFF's runtime (TFF's own algorithms).
    runs_only_on_tff: True when `round_functions` is None.
    model_fn: the model function it was built with (evaluation builds its models).
    build: how a builder of this project made it (`records_build`), or None.
  """

  build: dict | None = None

  def __init__(self,
               initialize_fn,
               next_fn,
               *,
               initial_client_state,
               get_model_weights,
               set_model_weights,
               num_trainable_parameters: int,
               model_fn,
               client_inputs: parts_lib.ClientInputs | None = None,
               record_test_loss=None,
               phases: RoundPhases | None = None,
               state_file_rounds: StateFileRounds | None = None,
               client_sums: tff.Computation | None = None,
               round_functions: round_functions_lib.RoundFunctions | None = None):
    super().__init__(initialize_fn, next_fn)
    self.initial_client_state = initial_client_state
    self.get_model_weights = get_model_weights
    self.set_model_weights = set_model_weights
    self.num_trainable_parameters = num_trainable_parameters
    self.model_fn = model_fn
    self.record_test_loss = record_test_loss
    self.phases = phases
    self._state_file_rounds = state_file_rounds
    self._built_state_file_rounds: tuple[tff.Computation, tff.Computation | None] | None = None
    self.client_sums = client_sums
    self.round_functions = round_functions
    self._client_inputs = client_inputs

  def _state_file_round(self, which: int) -> tff.Computation | None:
    if self._state_file_rounds is None or (which == 1 and
                                           not self._state_file_rounds.with_client_sums):
      return None
    if self._built_state_file_rounds is None:  # Traced at the first use, not at the build.
      self._built_state_file_rounds = self._state_file_rounds.build()
    return self._built_state_file_rounds[which]

  @property
  def next_with_state_files(self) -> tff.Computation | None:
    return self._state_file_round(0)

  @property
  def client_sums_with_state_files(self) -> tff.Computation | None:
    return self._state_file_round(1)

  @property
  def runs_only_on_tff(self) -> bool:
    return self.round_functions is None

  @property
  def client_input_spec(self) -> tf.TensorSpec | None:
    """The spec of one client's input, or None when the algorithm takes none."""
    return None if self._client_inputs is None else self._client_inputs.spec

  @property
  def uses_test_loss(self) -> bool:
    return self.record_test_loss is not None

  def client_inputs(self, client_ids: Sequence[str]) -> list:
    """The per-client inputs of these clients (`()` each when the algorithm takes none)."""
    if self._client_inputs is None:
      return [()] * len(client_ids)
    return list(self._client_inputs.from_client_ids(list(client_ids)))
