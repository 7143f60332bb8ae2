"""A run's memory: what it will need (estimated before it starts), what it may use, what it used.

A machine without swap that runs out of memory loses everything on it, so a run estimates its
peak before the first round (`estimate_run`) from what it trains: each algorithm's server and
client states (read off the TFF process's types, so any model counts), the clients a round and
the threads that train them, where the clients' states are kept, and TFF's runtime for the
algorithms that run there. `check_fits` compares it with what the run may use
(`available_bytes`: its cgroup's limit, else the machine's available memory) and refuses, in
one line naming the settings that would fit, a run that would not. `PeakSampler` measures
what the run used (this process and its TFF workers), for `summary.json` and the progress
lines.

The estimate's terms (bytes; `M` a model's trainable weights, `S` a client's state):

  base       the interpreter with TensorFlow and TFF loaded, and the data (measured when the
             estimate is made: the process's resident memory then);
  resident   per algorithm in this process: its server state, and with states in memory
             every client's `S` (a disk store keeps them in files); the client models, one
             per thread, shared by the algorithms of one model (`inprocess`), and the
             evaluation's model;
  round      the largest algorithm's round: each thread's client at work (`WORKING_MODELS`
             model-sized tensors, and a step's activations: the tensors of the model's
             forward pass on one batch of the run's data, which the backward pass keeps,
             `forward_tensors`; the evaluation's on one test batch where
             that is larger), and
             up to threads + 1 finished clients' message and new state waiting to be added,
             and the sum; and, where TensorFlow's CPU allocator pools (`allocator_pools`),
             what it keeps of the other in-process algorithms' rounds
             (`KEPT_MODELS_PER_ALGORITHM_AND_THREAD` models each and a thread);
  TFF        an algorithm on TFF's runtime (TFF's own FedAvg): the `worker_binary`'s copies
             of the model for every client of the round (`TFF_MODELS_PER_CLIENT`): TFF's
             local runtime holds a round's clients at once, whatever its concurrency; in
             subrounds (`tff_subrounds`) a subround's, and the mergeable context's own
             values (`SUBROUND_MODELS`, `DRIVER_STATES_PER_SUBROUND`). A pooling allocator
             keeps the in-process rounds' memory while TFF's round runs, so the two add up;
             the system allocator gives it back, so the larger of the two counts.

The sum is scaled by a margin for what it does not see (`estimate_margin`): none where
TensorFlow allocates from the C library and glibc's malloc gives back what is freed
(`SYSTEM_ALLOCATOR`), else `MARGIN`.

The constants are fitted to the peaks `python -m benchmarks.memory` measures
(`docs/performance.md`, "Memory").
"""

import dataclasses
import math
import os
import pathlib
import threading
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.execution import cleanup

GIB = 2**30

# Model-sized tensors a client at work holds besides the shared model, with or without a
# client state (fitted; see above): the gradient, the optimizer's state and its step's new
# values; a stateful client's state and the top-k's split are counted with the finished
# clients. Fitted to the FC's cells of `benchmarks.memory` (docs/performance.md: 0.86-1.23 of
# the peaks), after the in-process engine stopped folding constants: a traced client work
# had kept its model-sized zeros materialized (`inprocess.fixed_graph_rewrites`), one more.
WORKING_MODELS = 3.0
# A step's activations per thread: this many times its forward pass's tensors (fitted on the
# MNIST CNN at batch 600 and the VGG11 at batch 500, where they outweigh the model).
ACTIVATIONS_PER_FORWARD = 1.0
# Ops whose outputs are no new memory of a step: the weights read, names and constants.
_NOT_ACTIVATIONS = frozenset(
    ('ReadVariableOp', 'Const', 'VarHandleOp', 'Placeholder', 'Identity', 'IdentityN'))
# Model-sized values TFF's worker holds per client of a round (fitted).
TFF_MODELS_PER_CLIENT = 4.0
# TensorFlow's pooling CPU allocator (BFC, which the programs opt in to, or oneDNN's own)
# keeps the memory of a round for good, and the next algorithms' rounds of a run, whose
# tensors come in other sizes, add to it rather than reuse all of it: model-sized tensors kept
# per algorithm after the first and per client thread (fitted on the FC, states on disk,
# 2026-12-08: FLARE alone 3.50 GiB with 2 threads, FLARE, EC and FedAvg 3.96, about 0.85
# models an algorithm and thread; the authors' whole preset with 1 thread and TFF's round in
# 5 subrounds 7.21 GiB. Before the in-process engine stopped folding constants, each traced
# client work kept its zeros too, and this was 2).
KEPT_MODELS_PER_ALGORITHM_AND_THREAD = 0.75
# TFF's round in subrounds (`tff_subrounds`, TFF's mergeable context over its one worker),
# fitted on TFF's FedAvg on the FC, 10 clients, two rounds (docs/performance.md): server
# states the driver holds per subround (each subround's arguments and partial aggregate, in
# Python), and model-sized values of the mergeable context besides its clients' (the worker
# held about 8 more than 4 a client of its call, the driver about 5 more before the round).
DRIVER_STATES_PER_SUBROUND = 1.5
SUBROUND_MODELS = 14.0
# TFF's worker at rest: the runtime and its compiled computations (fitted).
TFF_WORKER_BASE = int(0.7 * GIB)
# What a refusal says (`plan`): a scheduler of runs (`reproduce`) recognizes it.
REFUSAL_MARK = 'it would not finish'
# The estimate's margin for what the arithmetic does not see (allocator slack, Keras).
MARGIN = 1.1
# ... and on the C library's allocator set to return what it frees (`RETURNING_MALLOC`), where
# there is no slack to see (fitted: the authors' FC preset with states in memory measured 11.77
# and 11.81 GiB against 11.86 estimated without a margin, FLARE and EC alone 5.13 against 5.08).
RETURNING_MARGIN = 1.0

# glibc's malloc keeps freed blocks below its mmap threshold in its heap for reuse, and raises
# that threshold (up to 32 MiB) as large blocks are freed; with these it maps every block of
# 1 MiB or more (given back when freed) and trims its heap's free top at once. Read when a
# process starts: set in the environment, not by a running program.
RETURNING_MALLOC = {'MALLOC_MMAP_THRESHOLD_': str(2**20), 'MALLOC_TRIM_THRESHOLD_': '0'}
# The environment that gives TensorFlow the C library's allocator, which returns what a round
# freed (TensorFlow reads it when it is imported): its rounds are slower (FLARE on the FC 1.7x).
SYSTEM_ALLOCATOR = {
    'TF_ENABLE_ONEDNN_OPTS': '0',
    'TF_CPU_ALLOCATOR_USE_BFC': 'false',
    **RETURNING_MALLOC
}
SYSTEM_ALLOCATOR_ENV = ' '.join(f'{name}={value}' for name, value in SYSTEM_ALLOCATOR.items())


def allocator_pools(environ: Mapping[str, str] = os.environ) -> bool:
  """Whether TensorFlow's CPU allocator keeps the memory a round freed (a pool) in a process
  with `environ`: BFC (`TF_CPU_ALLOCATOR_USE_BFC`), or, without it, oneDNN's allocator, which
  TensorFlow uses while its oneDNN ops are on (`TF_ENABLE_ONEDNN_OPTS`, on by default on x86
  Linux). Only with both off does it allocate from the C library, which gives it back."""

  def flag(name: str, default: bool) -> bool:  # As TensorFlow reads it: else its default.
    value = environ.get(name, '').lower()
    return {'1': True, 'true': True, '0': False, 'false': False}.get(value, default)

  return flag('TF_CPU_ALLOCATOR_USE_BFC', False) or flag('TF_ENABLE_ONEDNN_OPTS', True)


def start_environment() -> Mapping[str, str]:
  """The environment this process started with (`/proc/self/environ`), which is what glibc
  read; `os.environ` where there is none. A variable set since is not in it."""
  try:
    raw = pathlib.Path('/proc/self/environ').read_bytes()
  except OSError:
    return os.environ
  pairs = (entry.split(b'=', 1) for entry in raw.split(b'\0') if b'=' in entry)
  return {name.decode(errors='replace'): value.decode(errors='replace') for name, value in pairs}


def malloc_returns(environ: Mapping[str, str] | None = None) -> bool:
  """Whether the C library's malloc in a process with `environ` (default: this one's, as it
  started, `start_environment`) gives freed memory back as `RETURNING_MALLOC` sets it (both
  thresholds set, at most theirs)."""
  environ = start_environment() if environ is None else environ

  def at_most(name: str) -> bool:
    value = environ.get(name, '').strip()
    return value.isdigit() and int(value) <= int(RETURNING_MALLOC[name])

  return all(at_most(name) for name in RETURNING_MALLOC)


def estimate_margin(environ: Mapping[str, str] | None = None) -> float:
  """The estimate's margin in a process with `environ` (default: this one's): `RETURNING_MARGIN`
  where TensorFlow allocates from the C library and it returns what is freed, else `MARGIN`."""
  pools = allocator_pools() if environ is None else allocator_pools(environ)
  return RETURNING_MARGIN if not pools and malloc_returns(environ) else MARGIN


def allocator_name(environ: Mapping[str, str] | None = None) -> str:
  """TensorFlow's CPU allocator in a process with `environ` (default: this one's), as a run's
  first lines name it."""
  if allocator_pools() if environ is None else allocator_pools(environ):
    return "TensorFlow's pooling allocator"
  return "TensorFlow's system allocator" + (', malloc returning what it frees'
                                            if malloc_returns(environ) else '')


def gib(num_bytes: float) -> str:
  """`num_bytes` in GiB as a message prints it: one decimal, two significant digits below
  0.1 GiB (a budget of 0.05 GiB is not '0.0')."""
  return f'{num_bytes / GIB:.1f}' if num_bytes >= 0.095 * GIB else f'{num_bytes / GIB:.2g}'


def tff_type_bytes(type_spec) -> int:
  """Bytes of the tensors of a TFF type (a placed type counts its member once; a sequence or
  a tensor of unknown shape counts 0)."""
  if isinstance(type_spec, tff.types.FederatedType):
    return tff_type_bytes(type_spec.member)
  if isinstance(type_spec, tff.types.StructType):
    return sum(tff_type_bytes(element) for element in type_spec)
  if isinstance(type_spec, tff.types.TensorType):
    shape = type_spec.shape
    if shape is None or any(d is None for d in shape):
      return 0
    return int(np.prod(shape, dtype=np.int64)) * np.dtype(type_spec.dtype).itemsize
  return 0


@dataclasses.dataclass(frozen=True)
class ProcessSizes:
  """What one algorithm's process keeps, in bytes.

  Attributes:
    model: the trainable weights (`M`).
    server_state: the server state (the model, optimizer and aggregator states).
    client_state: one client's state (`S`; 0 for a stateless algorithm).
    on_tff: whether it runs on TFF's runtime (TFF's own algorithms).
    forward: the tensors of the model's forward pass on one batch (`ForwardPass.total`; 0
      where not known).
    largest_activation: the largest of them (`ForwardPass.largest`; 0 where not known).
  """

  model: int
  server_state: int
  client_state: int
  on_tff: bool
  forward: int = 0
  largest_activation: int = 0


@dataclasses.dataclass(frozen=True)
class ForwardPass:
  """The float tensors a model's forward pass makes on one batch, in bytes.

  Attributes:
    total: all of them: what a training step's backward pass may keep (the estimate).
    largest: the largest one: what a step cannot be computed without (the floor).
  """

  total: int = 0
  largest: int = 0


def forward_tensors(model_fn, batch) -> ForwardPass:
  """The tensors a `tff.learning` model's forward pass makes on one batch: every float
  output of a fully known shape of the ops it adds to a graph (and of the functions those
  call; a loop's body counted once), besides the weights it reads.

  Args:
    model_fn: a no-argument function returning a `tff.learning.models.VariableModel`.
    batch: a nest of `tf.TensorSpec`s (or tensors) of one batch, its batch size known.

  Returns zeros for a model that cannot take such a batch (the run's first round reports it).
  """
  largest = 0

  def walk(graph, start: int = 0) -> int:
    nonlocal largest
    total = 0
    for op in graph.get_operations()[start:]:
      if op.type in _NOT_ACTIVATIONS:
        continue
      for attr in ('f', 'body', 'then_branch', 'else_branch'):
        try:
          called = graph._get_function(op.get_attr(attr).name)  # pylint: disable=protected-access
        except (ValueError, AttributeError):
          continue
        if getattr(called, 'graph', None) is not None:
          total += walk(called.graph)
      sizes = [
          t.shape.num_elements() * t.dtype.size
          for t in op.outputs
          if t.dtype.is_floating and t.shape.is_fully_defined()
      ]
      total += sum(sizes)
      largest = max([largest] + sizes)
    return total

  with tf.Graph().as_default() as graph:
    model = model_fn()
    inputs = tf.nest.map_structure(lambda s: tf.compat.v1.placeholder(s.dtype, s.shape), batch)
    start = len(graph.get_operations())
    try:
      model.forward_pass(inputs, training=True)
    except (TypeError, ValueError):  # A model that cannot take the data: the round says so.
      return ForwardPass()
    total = walk(graph, start)
  return ForwardPass(total=total, largest=largest)


def batch_spec(dataset: tf.data.Dataset):
  """The specs of a dataset's first batch (its batch size read off the batch itself where
  the dataset's spec leaves it open), or None for an empty dataset."""
  spec = dataset.element_spec
  if all(s.shape.is_fully_defined() for s in tf.nest.flatten(spec)):
    return spec
  for first in dataset.take(1):
    return tf.nest.map_structure(lambda t: tf.TensorSpec(t.shape, t.dtype), first)
  return None


def process_sizes(process, forward: ForwardPass | None = None) -> ProcessSizes:
  """Sizes of an `AlgorithmProcess` (or a TFF learning process) from its types; `forward`:
  its model's forward pass on one batch (`forward_tensors`, zeros where not known)."""
  server = tff_type_bytes(process.initialize.type_signature.result)
  initial_client_state = getattr(process, 'initial_client_state', None)
  client = (tff_type_bytes(initial_client_state.type_signature.result)
            if initial_client_state is not None else 0)
  weights_type = process.get_model_weights.type_signature.result
  model = tff_type_bytes(
      weights_type.trainable if hasattr(weights_type, 'trainable') else weights_type[0])
  return ProcessSizes(model=model,
                      server_state=server,
                      client_state=client,
                      on_tff=getattr(process, 'runs_only_on_tff', True),
                      forward=forward.total if forward is not None else 0,
                      largest_activation=forward.largest if forward is not None else 0)


@dataclasses.dataclass(frozen=True)
class Estimate:
  """A run's estimated peak (bytes) and its terms (see the module docstring).

  `floor` is what no implementation can do without: `base`, the server states, the states
  kept in memory, and for the largest algorithm each thread's client its weights, gradient,
  state and the largest tensor of a step's forward pass (backpropagation may keep all of
  them, an implementation that recomputes them needs one at least), and the round's sum.
  """

  base: int
  resident: int
  round: int
  tff: int
  floor: int
  margin: float = MARGIN

  @property
  def total(self) -> int:
    return int(self.margin * (self.base + self.resident + self.round + self.tff))

  def describe(self) -> str:
    return (f'{gib(self.total)} GiB (base {gib(self.base)}, states and models '
            f'{gib(self.resident)}, a round {gib(self.round)}' +
            (f", TFF's runtime {gib(self.tff)}" if self.tff else '') + ')')


def estimate_run(sizes: Mapping[str, ProcessSizes],
                 *,
                 clients_with_state: int,
                 clients_per_round: int,
                 threads: int,
                 storage: str,
                 execution: str,
                 base: int,
                 evaluates: bool = True,
                 evaluation_forward: int = 0,
                 tff_subrounds: int = 1,
                 pooling: bool = True,
                 margin: float = MARGIN) -> Estimate:
  """The peak of a run training `sizes`' algorithms side by side.

  Args:
    sizes: `{algorithm: process_sizes(process)}`.
    clients_with_state: clients whose states a run keeps (the population).
    clients_per_round: clients trained a round.
    threads: clients trained at once in this process (`client_threads`).
    storage: 'memory', 'disk' or 'files' (`client_state_storage`).
    execution: 'inprocess', 'local' or 'remote'.
    base: bytes of the process when the estimate is made (`resident_bytes()`).
    evaluates: whether the run evaluates (one more model).
    evaluation_forward: the evaluation's forward pass on one test batch (`forward_tensors`),
      which may be larger than a training step's (the image tasks evaluate in batches of at
      least 500): the allocator's pool holds the larger of the two.
    tff_subrounds: subrounds of a round on TFF's local runtime (`tff_subrounds`).
    pooling: whether TensorFlow's CPU allocator keeps what a round freed
      (`allocator_pools()`): then the in-process algorithms' rounds add to each other and
      to TFF's round; else each round's memory is given back before the next.
    margin: the factor on the sum for what it does not see (`estimate_margin`).
  """
  here = [s for s in sizes.values() if not s.on_tff and execution == 'inprocess']
  on_tff = [s for s in sizes.values() if s.on_tff or execution != 'inprocess']
  threads = max(1, min(threads, clients_per_round))
  resident = 0
  models = {s.model for s in here}
  # Client models: one per thread for each model size (processes of one model share them).
  resident += sum(models) * threads + (max(models, default=0) if evaluates else 0)
  for s in sizes.values():
    resident += s.server_state
    if storage == 'memory':
      resident += s.client_state * clients_with_state
  round_bytes = max([
      threads * (ACTIVATIONS_PER_FORWARD * s.forward + s.model * WORKING_MODELS) + (threads + 1) *
      (s.model + s.client_state) + s.model for s in here
  ] + [0])
  if evaluates:  # The evaluation's activations, where they outgrow the training steps'.
    round_bytes += max(
        0, evaluation_forward -
        max([threads * ACTIVATIONS_PER_FORWARD * s.forward for s in here] + [0]))
  if here and pooling:  # What the pool keeps of the rounds of the algorithms after the largest.
    round_bytes += threads * KEPT_MODELS_PER_ALGORITHM_AND_THREAD * (sum(s.model for s in here) -
                                                                     max(s.model for s in here))
  tff_bytes: float = 0
  if on_tff and execution != 'remote':
    # TFF's runtime holds every client's values of a call at once, whatever its concurrency
    # (--max_concurrent_computation_calls); its local runtime runs a round as one call.
    per_call = math.ceil(clients_per_round / tff_subrounds)
    tff_bytes = TFF_WORKER_BASE + max(
        per_call * (TFF_MODELS_PER_CLIENT * s.model + s.client_state) for s in on_tff)
    # The driver also holds what it sends and receives: the server state and the states
    # (with 'files', the clients' computations read and write their states themselves).
    moved = 0 if storage == 'files' else 2 * clients_per_round
    sent = max(2 * s.server_state + moved * s.client_state for s in on_tff)
    subrounds_bytes = 0.0
    if tff_subrounds > 1:  # TFF's mergeable context: each subround's arguments, in Python.
      subrounds_bytes = tff_subrounds * DRIVER_STATES_PER_SUBROUND * max(
          s.server_state for s in on_tff)
      tff_bytes += SUBROUND_MODELS * max(s.model for s in on_tff)
    if pooling:  # The pool holds the in-process rounds' memory through TFF's round.
      round_bytes = max(round_bytes, sent) + subrounds_bytes
    else:  # Given back before TFF's round: the larger of the two ('round' is then what this
      # process adds beside TFF's runtime).
      round_bytes = max(round_bytes - tff_bytes, sent + subrounds_bytes)
  floor = sum(s.server_state + (s.client_state * clients_with_state if storage == 'memory' else 0)
              for s in sizes.values())
  floor += max(threads * (2 * s.model + s.client_state + s.largest_activation) + s.model
               for s in sizes.values())
  return Estimate(base=int(base),
                  resident=int(resident),
                  round=int(round_bytes),
                  tff=int(tff_bytes),
                  floor=int(base + floor),
                  margin=margin)


def resident_bytes(pid: int | None = None) -> int:
  """The memory a process (this one by default) holds of its own, in bytes: its anonymous
  and shared-memory pages. The pages of files it maps (TensorFlow's libraries, a disk
  store's states) are the kernel's page cache, which it can reclaim, and are left out, as a
  memory cgroup charges them to whoever read them first."""
  return _status_bytes(pid, 'RssAnon') + _status_bytes(pid, 'RssShmem')


def _status_bytes(pid: int | None, field: str) -> int:
  path = f'/proc/{pid or "self"}/status'
  try:
    for line in pathlib.Path(path).read_text().splitlines():
      if line.startswith(field + ':'):
        return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return 0


class PeakSampler:
  """Measures a run's peak memory: this process's and its TFF workers' together.

  A thread adds the memory of this process and of its workers (`resident_bytes`: their
  own pages, not the files they map) every `interval_s`: a peak shorter than that can be
  missed. (The processes' own high-water marks would count TensorFlow's libraries and add
  peaks of different moments.) A context manager: the thread runs inside `with` only.
  """

  def __init__(self, interval_s: float = 0.05):
    self._interval_s = interval_s
    self._peak = 0
    self._stop = threading.Event()
    self._thread: threading.Thread | None = None

  def __enter__(self) -> 'PeakSampler':
    self._stop.clear()
    self._thread = threading.Thread(target=self._sample, name='tff_flare_memory', daemon=True)
    self._thread.start()
    return self

  def __exit__(self, *exc) -> None:
    self._stop.set()
    if self._thread is not None:
      self._thread.join()

  def _sample(self) -> None:
    workers, found = [], 0.0
    while not self._stop.is_set():
      if time.monotonic() - found > 1.0:  # Workers start and stop rarely.
        workers, found = cleanup.local_worker_pids(), time.monotonic()
      total = resident_bytes() + sum(resident_bytes(pid) for pid in workers)
      self._peak = max(self._peak, total)
      self._stop.wait(self._interval_s)

  def peak_bytes(self) -> int:
    """The peak so far, in bytes."""
    return self._peak


def _cgroup_limit() -> int | None:
  """What this process may hold under its memory cgroups' limits (theirs and their parents'):
  a limit less what the cgroup's other members use (its usage beyond this process's resident
  memory and the page cache, which the kernel reclaims before it kills: `_reclaimable`), or
  None without a limit."""
  own = resident_bytes()
  try:
    lines = pathlib.Path('/proc/self/cgroup').read_text().splitlines()
  except OSError:
    return None
  room: int | None = None
  for line in lines:
    number, controllers, path = line.split(':', 2)
    if number == '0' and not controllers:  # cgroup v2
      root, limit_file, usage_file = pathlib.Path('/sys/fs/cgroup'), 'memory.max', 'memory.current'
      cache_keys = ('file', 'shmem')
    elif 'memory' in controllers.split(','):  # cgroup v1
      root = pathlib.Path('/sys/fs/cgroup/memory')
      limit_file, usage_file = 'memory.limit_in_bytes', 'memory.usage_in_bytes'
      cache_keys = ('total_cache', 'total_shmem')
    else:
      continue
    folder = root / path.lstrip('/')
    while True:
      try:
        limit = (folder / limit_file).read_text().strip()
        usage = int((folder / usage_file).read_text().strip())
        usage -= _reclaimable(folder / 'memory.stat', *cache_keys)
        if limit != 'max' and int(limit) < 2**60:
          left = int(limit) - max(0, usage - own)
          room = left if room is None else min(room, left)
      except (OSError, ValueError):
        pass
      if folder == root or folder.parent == folder:
        break
      folder = folder.parent
  return room


def _reclaimable(stat_file: pathlib.Path, cache_key: str, shmem_key: str) -> int:
  """Bytes of a cgroup's page cache the kernel can take back (`memory.stat`: the cached file
  pages less shared memory, which without swap it cannot); 0 where not known. A run that
  wrote gigabytes of checkpoints leaves them in the cache, charged to its cgroup."""
  try:
    stat = dict(line.split() for line in stat_file.read_text().splitlines())
    return max(0, int(stat.get(cache_key, 0)) - int(stat.get(shmem_key, 0)))
  except (OSError, ValueError):
    return 0


def _machine_available() -> int | None:
  try:
    for line in pathlib.Path('/proc/meminfo').read_text().splitlines():
      if line.startswith('MemAvailable:'):
        return int(line.split()[1]) * 1024
  except (OSError, ValueError, IndexError):
    pass
  return None


def available_bytes() -> int | None:
  """What this process may hold in all: its cgroup's limit (`_cgroup_limit`), or without one
  what it holds now plus the machine's available memory; None where neither is known."""
  limit = _cgroup_limit()
  if limit is not None:
    return limit
  machine = _machine_available()
  return None if machine is None else resident_bytes() + machine


# Lighter settings a refusal tries (the estimate's arguments), and their names as settings.
_LIGHTER_SETTINGS: tuple[dict[str, Any], ...] = (dict(storage='disk'), dict(threads=1),
                                                 dict(storage='disk', threads=1))
_SETTING_NAMES = dict(storage='client_state_storage', threads='client_threads')


def plan(sizes: Mapping[str, ProcessSizes],
         *,
         clients_with_state: int,
         clients_per_round: int,
         threads: int,
         storage: str,
         execution: str,
         evaluates: bool,
         evaluation_forward: int = 0,
         tff_subrounds: int = 1,
         budget: int | None = None,
         pooling: bool | None = None,
         margin: float | None = None) -> tuple[Estimate, int | None, str | None]:
  """The run's estimate, what it may use (`budget`, else `available_bytes()`), and, when the
  estimate is larger, the one-line refusal naming the settings that would fit (None when it
  fits, or when what it may use is unknown). `pooling`: the allocator's kind (default: this
  process's, `allocator_pools()`); `margin`: the estimate's (default: this process's,
  `estimate_margin()`)."""
  pooling = allocator_pools() if pooling is None else pooling
  margin = estimate_margin() if margin is None else margin
  common: dict[str, Any] = dict(clients_with_state=clients_with_state,
                                clients_per_round=clients_per_round,
                                evaluates=evaluates,
                                evaluation_forward=evaluation_forward,
                                execution=execution,
                                base=resident_bytes())
  asked: dict[str, Any] = dict(threads=threads,
                               storage=storage,
                               tff_subrounds=tff_subrounds,
                               pooling=pooling,
                               margin=margin)

  def total(**changes) -> int:
    return estimate_run(sizes, **{**common, **asked, **changes}).total

  estimate = estimate_run(sizes, **common, **asked)
  available = budget if budget is not None else available_bytes()
  if available is None or estimate.total <= available:
    return estimate, available, None
  fits = []
  variants: dict[str, dict[str, Any]] = {}  # {label: the settings it changes}
  for lighter in _LIGHTER_SETTINGS:
    changed = {k: v for k, v in lighter.items() if asked[k] != v}
    if changed:
      variants[', '.join(f'{_SETTING_NAMES[k]}={v}' for k, v in changed.items())] = changed
  for label, changes in variants.items():
    if total(**changes) <= available:
      fits.append(f'{label} ({gib(total(**changes))} GiB)')
  subrounds = range(tff_subrounds + 1, clients_per_round + 1) if estimate.tff else ()
  for k in subrounds:  # The fewest subrounds of TFF's round that fit.
    if total(tff_subrounds=k) <= available:
      fits.append(f'tff_subrounds={k} ({gib(total(tff_subrounds=k))} GiB)')
      break
  if len(sizes) > 1:
    alone = {name: estimate_run({name: s}, **common, **asked).total for name, s in sizes.items()}
    if min(alone.values()) <= available:
      fits.append('fewer algorithms at once (alone: ' +
                  ', '.join(f'{name} {gib(t)}' for name, t in alone.items()) + ' GiB)')
  system = dict(pooling=False, margin=estimate_margin(SYSTEM_ALLOCATOR))
  if pooling or margin > system['margin']:  # SYSTEM_ALLOCATOR, with the fewest other changes.

    for label, changes in [('', {}), *variants.items()]:
      fitting = [
          k for k in (tff_subrounds, *subrounds)
          if total(**changes, tff_subrounds=k, **system) <= available
      ]
      if fitting:
        k = fitting[0]
        settings = [label] if label else []
        if k != tff_subrounds:
          settings.append(f'tff_subrounds={k}')
        fits.append(f'the system allocator ({SYSTEM_ALLOCATOR_ENV} in the environment; slower '
                    'rounds)' + (f' with {", ".join(settings)}' if settings else '') +
                    f' ({gib(total(**changes, tff_subrounds=k, **system))} GiB)')
        break
  return estimate, available, (
      f'This run needs about {estimate.describe()} at its peak, more than the '
      f'{gib(available)} GiB it may use; {REFUSAL_MARK}. What fits: ' +
      ('; '.join(fits) if fits else 'nothing of these settings: a larger machine') + '.')
