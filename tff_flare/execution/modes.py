"""Where a run's rounds execute: one choice for the whole run, made here.

  local      TFF's local runtime: the C++ `worker_binary` in a subprocess of this one,
             started with a parent-death signal and stopped when the run ends; if it dies
             during a round the run ends with `remote.WorkerUnavailableError` (exit 3).
  inprocess  this Python process, no TFF runtime (`inprocess`): the same `RoundFunctions`
             as `tf.function`s, on the GPU when TensorFlow sees one. TFF's own algorithms
             and processes with a TFF aggregation factory (`model_aggregators`; no
             `RoundFunctions`) still run on TFF's local runtime, which is then started too,
             and `Execution.where(process)` says so.
  remote     TFF workers on other machines (`remote`): TFF's mergeable context over them;
             processes with client state run their round as two phases; processes without
             client state, or with the states in files the clients read and write, as the
             workers' sums of their clients' outputs and the server's round run here
             (`_ServerOnDriver`).

An `Execution` is a context manager; inside it, `bind(process)` gives the process's methods
as this mode runs them (`BoundProcess`), so the loop calls the same methods whatever the
mode, and never looks at TFF's global context.

  with modes.build_execution('inprocess') as execution:
    bound = execution.bind(process)
    state = bound.initialize()
    output = bound.next(state, datasets, client_states, client_inputs)
"""

import contextlib
from collections.abc import Sequence
from typing import Any, Protocol

import attrs
import numpy as np
import tensorflow as tf

from tff_flare.algorithms import hyperparameters
from tff_flare.algorithms import process as process_lib
from tff_flare.execution import inprocess
from tff_flare.execution import remote
from tff_flare.execution import workers

EXECUTIONS = ('local', 'inprocess', 'remote')


class BoundProcess(Protocol):
  """A process's methods, as one execution mode runs them."""

  def initialize(self) -> Any:
    ...

  def next(self,
           state,
           client_data,
           client_states,
           client_inputs,
           *,
           client_state_sink: inprocess.ClientStateSink | None = None) -> process_lib.RoundOutput:
    """A round; with `client_state_sink`, each new client state goes there (in-process: as
    its client finishes) and the output's `client_states` is None."""

  def get_model_weights(self, state) -> Any:
    ...

  def set_model_weights(self, state, model_weights) -> Any:
    ...

  def initial_client_state(self) -> Any:
    ...

  def record_test_loss(self, state, loss: float) -> Any:
    ...


def next_in_phases(process: process_lib.AlgorithmProcess, state, client_data, client_states,
                   client_inputs) -> process_lib.RoundOutput:
  """`process.next(...)`, run as its two `RoundPhases`.

  TFF 0.87's mergeable context returns the CLIENTS-placed results of its subrounds in the
  order the subrounds finish, not in client order: each output carries its client's position
  and is put back in place here.
  """
  phases = process.phases
  if phases is None:
    raise TypeError('next_in_phases runs a process with `phases` (one with client state).')
  num_clients = len(client_data)
  outputs = phases.client_phase(state, client_data, client_states, client_inputs,
                                list(range(num_clients)))
  outputs = sorted(outputs, key=lambda o: int(o['client_index']))
  indices = [int(o['client_index']) for o in outputs]
  if indices != list(range(num_clients)):
    raise RuntimeError(f'The client phase returned outputs of clients {indices}, expected '
                       f'each of 0..{num_clients - 1} once.')
  new_state, metrics = phases.server_phase(state, [o['summable'] for o in outputs])
  return process_lib.RoundOutput(state=new_state,
                                 metrics=metrics,
                                 client_states=[o['client_state'] for o in outputs])


def _to_sink(output: process_lib.RoundOutput,
             client_state_sink: inprocess.ClientStateSink | None) -> process_lib.RoundOutput:
  """`output`, its client states given to `client_state_sink` (then None) when there is one."""
  if client_state_sink is None:
    return output
  for index, client_state in enumerate(output.client_states):
    client_state_sink(index, client_state)
  return attrs.evolve(output, client_states=None)


class _OnTff:
  """A process on the installed TFF context (its `next`, or its two phases)."""

  def __init__(self, process: process_lib.AlgorithmProcess, use_phases: bool):
    self._process = process
    self._use_phases = use_phases and process.phases is not None

  def initialize(self):
    return self._process.initialize()

  def next(self,
           state,
           client_data,
           client_states,
           client_inputs,
           *,
           client_state_sink: inprocess.ClientStateSink | None = None) -> process_lib.RoundOutput:
    # TFF's runtime takes and returns the round's client states all at once.
    if self._use_phases:  # Each client trains once (see `process.RoundPhases`).
      output = next_in_phases(self._process, state, list(client_data), list(client_states),
                              list(client_inputs))
    else:
      output = self._process.next(state, list(client_data), list(client_states),
                                  list(client_inputs))
    return _to_sink(output, client_state_sink)

  def next_with_state_files(self, state, client_data, read_prefixes, write_prefixes,
                            client_inputs) -> process_lib.RoundOutput:
    """A round whose clients read and write their own state files
    (`AlgorithmProcess.next_with_state_files`, one computation: TFF's distributed runtime
    runs it whole); the output's `client_states` is None."""
    next_with_state_files = self._process.next_with_state_files
    if next_with_state_files is None:
      raise TypeError('next_with_state_files runs a process with client state.')
    new_state, metrics = next_with_state_files(state, list(client_data), list(read_prefixes),
                                               list(write_prefixes), list(client_inputs))
    return process_lib.RoundOutput(state=new_state, metrics=metrics, client_states=None)

  def get_model_weights(self, state):
    return self._process.get_model_weights(state)

  def set_model_weights(self, state, model_weights):
    return self._process.set_model_weights(state, model_weights)

  def initial_client_state(self):
    return self._process.initial_client_state()

  def record_test_loss(self, state, loss: float):
    return self._process.record_test_loss(state, loss)


class _ServerOnDriver(_OnTff):
  """On TFF workers, a process whose clients keep no state, or keep it as files: the workers
  train the round's clients and sum their outputs; this process runs the server's round.

  TFF's mergeable context runs a whole round (`next`, `next_with_state_files`) as three kinds
  of call: each worker's share up to the aggregation (the state out, a partial sum back), a
  merge of two partial sums on a worker (two in, one back), and the part after the merge on
  one worker with the first share's argument again (the state and the merged sum in, the new
  state back): five model-sized transfers a round on one worker, ten on two. Here each worker
  gets the model and the round's params with its share of the clients and returns its share's
  sum (`client_sums`, `client_sums_with_state_files`): two a worker. The sums are added in
  worker order and the server's round runs as in-process
  (`inprocess.InProcessProcess.server_round`), the same functions TFF's computation wraps.
  Rounds with client states held by the driver (`memory`, `disk`) run as `_OnTff`'s two
  phases.
  """

  def __init__(self, process: process_lib.AlgorithmProcess, workers: remote.RemoteExecution):
    super().__init__(process, use_phases=True)
    self._workers = workers
    self._server = inprocess.InProcessProcess(process, num_threads=1)

  def next(self,
           state,
           client_data,
           client_states,
           client_inputs,
           *,
           client_state_sink: inprocess.ClientStateSink | None = None) -> process_lib.RoundOutput:
    if self._process.client_sums is None:
      return super().next(state,
                          client_data,
                          client_states,
                          client_inputs,
                          client_state_sink=client_state_sink)
    client_states = list(client_states)  # Empty: they pass through.
    output = self._split_round(self._process.client_sums, state,
                               (list(client_data), client_states, list(client_inputs)))
    return _to_sink(attrs.evolve(output, client_states=client_states), client_state_sink)

  def next_with_state_files(self, state, client_data, read_prefixes, write_prefixes,
                            client_inputs) -> process_lib.RoundOutput:
    return self._split_round(
        self._process.client_sums_with_state_files, state,
        (list(client_data), list(read_prefixes), list(write_prefixes), list(client_inputs)))

  def _split_round(self, client_sums, state, per_client) -> process_lib.RoundOutput:
    params = inprocess.to_numpy(self._server.round_params(state))
    sums = self._workers.invoke_in_shares(client_sums, (state.global_model_weights, params),
                                          per_client)
    summed = sums[0]
    for share in sums[1:]:
      summed = tf.nest.map_structure(np.add, summed, share)
    new_state, metrics = self._server.server_round(state, summed)
    return process_lib.RoundOutput(state=inprocess.to_numpy(new_state),
                                   metrics=metrics,
                                   client_states=None)


class Execution:
  """Base of the three modes: a context manager that binds processes."""

  name = ''

  def __init__(self):
    self._stack = contextlib.ExitStack()
    self.stats: remote.ExecutionStats | None = None

  def __enter__(self) -> 'Execution':
    return self

  def __exit__(self, *exc) -> None:
    self._stack.close()

  def bind(self, process: process_lib.AlgorithmProcess) -> BoundProcess:
    raise NotImplementedError

  def where(self, process: process_lib.AlgorithmProcess) -> str:
    """Where this mode runs `process`, in words (for logs and summaries)."""
    raise NotImplementedError


class LocalExecution(Execution):
  """TFF's local runtime, over one `worker_binary` this execution starts and stops."""

  name = 'local'

  def __init__(self, timeout_s: float = 60.0, subrounds: int = 1):
    super().__init__()
    self._timeout_s = timeout_s
    self._subrounds = subrounds

  def __enter__(self) -> 'LocalExecution':
    worker = self._stack.enter_context(workers.LoopbackWorkers(1))
    self.workers = worker
    context = self._stack.enter_context(
        remote.worker_execution(worker.addresses[0],
                                unavailable_timeout_s=self._timeout_s,
                                death=lambda: worker.death(0),
                                num_subrounds=self._subrounds))
    self.stats = context.stats
    return self

  def bind(self, process: process_lib.AlgorithmProcess) -> BoundProcess:
    # In subrounds each client must train once: phases, as on remote workers.
    return _OnTff(process, use_phases=self._subrounds > 1)

  def where(self, process: process_lib.AlgorithmProcess) -> str:
    return "TFF's local runtime" + (f' in {self._subrounds} subrounds'
                                    if self._subrounds > 1 else '')


class RemoteExecution(Execution):
  """TFF's mergeable context over the given workers."""

  name = 'remote'

  def __init__(self, addresses: Sequence[str], timeout_s: float):
    super().__init__()
    self.addresses = remote.parse_workers(addresses)
    self._timeout_s = timeout_s
    self._workers: remote.RemoteExecution | None = None

  def __enter__(self) -> 'RemoteExecution':
    workers_context = self._stack.enter_context(
        remote.remote_execution(self.addresses,
                                connect_timeout_s=self._timeout_s,
                                unavailable_timeout_s=self._timeout_s))
    self._workers = workers_context
    self.stats = workers_context.stats
    return self

  def bind(self, process: process_lib.AlgorithmProcess) -> BoundProcess:
    if self._workers is None:
      raise RuntimeError('Bind processes inside `with RemoteExecution(...)`.')
    if process.client_sums is not None or process.client_sums_with_state_files is not None:
      return _ServerOnDriver(process, self._workers)
    return _OnTff(process, use_phases=True)

  def where(self, process: process_lib.AlgorithmProcess) -> str:
    return f'{len(self.addresses)} TFF workers ({", ".join(self.addresses)})'


class InProcessExecution(Execution):
  """This process; TFF's local runtime only for processes that have no `RoundFunctions`."""

  name = 'inprocess'

  def __init__(self,
               num_threads: int | None = None,
               timeout_s: float = 60.0,
               tff_subrounds: int = 1):
    super().__init__()
    self._num_threads = num_threads
    self._timeout_s = timeout_s
    self._tff_subrounds = tff_subrounds
    self._local: LocalExecution | None = None
    self._bound: list[inprocess.InProcessProcess] = []
    self._model_pools: list[inprocess.ModelPool] = []  # Client models, one pool a model_fn.

  def __exit__(self, *exc) -> None:
    for bound in self._bound:
      bound.close()
    super().__exit__(*exc)

  def bind(self, process: process_lib.AlgorithmProcess) -> BoundProcess:
    functions = process.round_functions
    if functions is None:  # `runs_only_on_tff`.
      if self._local is None:
        self._local = self._stack.enter_context(LocalExecution(self._timeout_s,
                                                               self._tff_subrounds))
      return self._local.bind(process)
    model_fn = functions.model_fn
    pool = next((p for p in self._model_pools if p.model_fn is model_fn), None)
    if pool is None:
      pool = inprocess.ModelPool(model_fn)
      self._model_pools.append(pool)
    bound = inprocess.InProcessProcess(process, self._num_threads, models=pool)
    self._bound.append(bound)
    return bound

  def where(self, process: process_lib.AlgorithmProcess) -> str:
    if process.runs_only_on_tff:
      return ("TFF's local runtime" +
              (f' in {self._tff_subrounds} subrounds' if self._tff_subrounds > 1 else '') +
              " (TFF's own algorithm, or a TFF aggregation factory: it cannot run in-process)")
    return 'in-process'


# The longest worker timeout: a week (threads' waits end in OverflowError past ~9.2e9 s).
MAX_TIMEOUT_S = 7 * 24 * 3600
# TFF's mergeable context makes a list of this many copies of an argument that has no
# CLIENTS-placed value (the model weights' accessors): a larger count would never finish.
MAX_SUBROUNDS = 10_000


def validate_execution(execution: str,
                       worker_addresses: Sequence[str] | str = (),
                       timeout_s: float = 60.0,
                       num_threads: int | None = None,
                       tff_subrounds: int = 1) -> None:
  """Raises `ValueError` for an unknown mode, bad workers, or options the mode does not take."""
  if execution not in EXECUTIONS:
    raise ValueError(f'Unknown execution {execution!r}; known: {", ".join(EXECUTIONS)}.')
  if (not hyperparameters.is_number(timeout_s) or not 0 < timeout_s <= MAX_TIMEOUT_S):
    raise ValueError(f'The worker timeout must be in (0, {MAX_TIMEOUT_S:.0f}] seconds, got '
                     f'{timeout_s!r}.')
  if execution != 'remote' and worker_addresses:
    raise ValueError(f'Workers are given but execution is {execution}; set execution=remote.')
  if execution == 'remote':
    remote.parse_workers(worker_addresses)
  if num_threads is not None and (not hyperparameters.is_int(num_threads) or num_threads < 1):
    raise ValueError(f'The number of client threads must be an int >= 1, got {num_threads!r}.')
  if not hyperparameters.is_int(tff_subrounds) or not 1 <= tff_subrounds <= MAX_SUBROUNDS:
    raise ValueError(f'tff_subrounds must be an int in [1, {MAX_SUBROUNDS}], got '
                     f'{tff_subrounds!r}.')
  if execution == 'remote' and tff_subrounds > 1:
    raise ValueError('tff_subrounds is for TFF\'s local runtime; with execution=remote a '
                     'round has one subround a worker.')


def build_execution(execution: str = 'local',
                    worker_addresses: Sequence[str] | str = (),
                    *,
                    timeout_s: float = 60.0,
                    num_threads: int | None = None,
                    tff_subrounds: int = 1) -> Execution:
  """The execution mode `execution` (see the module docstring); enter it with `with`.

  Args:
    execution: one of `EXECUTIONS`.
    worker_addresses: the workers of 'remote', `host:port` each (empty for the others).
    timeout_s: how long a TFF worker may not answer (at start or during a round; a local
      worker that has died ends the run at once).
    num_threads: clients trained at once in-process (default: the number of CPUs).
    tff_subrounds: rounds on TFF's local runtime run in this many subrounds (TFF's mergeable
      context over its one worker): the worker holds a subround's clients at once.

  Raises:
    ValueError: see `validate_execution`.
  """
  validate_execution(execution, worker_addresses, timeout_s, num_threads, tff_subrounds)
  if execution == 'local':
    return LocalExecution(timeout_s, tff_subrounds)
  if execution == 'inprocess':
    return InProcessExecution(num_threads, timeout_s, tff_subrounds)
  return RemoteExecution(worker_addresses, timeout_s)
