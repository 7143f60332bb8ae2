"""Runs a composed process's rounds in this Python process: no TFF runtime, no serialization.

TFF 0.87 runs every computation in its C++ `worker_binary`, which copies each value through
protobuf and gRPC (a 145 MB model several times a round) and is built without CUDA. Here the
same `RoundFunctions` the TFF process wraps (`tff_flare.algorithms.composer`) run as
`tf.function`s, on the devices TensorFlow places them on (the GPU when TensorFlow sees one):

  * each client's work runs in one of `num_threads` threads, each with its own model
    (several clients at once keep the cores busy, as TFF's runtime does), and the model is
    returned to its freshly built state before every client, as TFF builds a new one per call
    (stateful RNN states and metric variables included). The processes of a run share these
    models (`ModelPool`). The models are built at the first
    round: a Keras model built in eager mode is invalidated by any model built later inside
    a `tf.Graph`, as every TFF process builder does;
  * the clients' summable outputs are added in client order and the server step runs as one
    `tf.function` (the round's metrics are read eagerly after it);
  * every function runs with Grappler's memory optimizer and constant folding off
    (`fixed_graph_rewrites`);
  * FLARE's selections (the mask's median, the top-k cut) run as the compiled kernels of
    `algorithms/kernels` when they are built (`make kernels`; `algorithms.selection`), the
    TensorFlow ops otherwise: the same values either way.

The server state has the structure and the leaves the TFF process's state has (as tensors
here, numpy arrays there), so a checkpoint written in one execution mode resumes in the
other. Results equal TFF's up to
float rounding (the sums are added in another order); `tests/execution/test_inprocess.py`
compares every algorithm.
"""

import collections
import concurrent.futures
import contextlib
import functools
import os
import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context as tf_context

from tff_flare.algorithms import model_facts
from tff_flare.algorithms import process as process_lib
from tff_flare.algorithms import round_functions
from tff_flare.algorithms import selection

# `(client's position in the round, its new state)`: where a round's new client states go.
ClientStateSink = Callable[[int, Any], None]


@contextlib.contextmanager
def fixed_graph_rewrites():
  """In this thread, `tf.function`s are optimized without Grappler's memory optimizer and
  without its constant folding.

  The memory optimizer: on a CPU it rewrites an `AddN` of three or more tensors into an
  `AccumulateNV2` (a `TemporaryVariable` and one `AssignAdd` per input) when the graph's
  static peak exceeds 80 % of the RAM free at the moment the function is instantiated. The
  rewrite (a) depends on the machine's free memory, so the same run is optimized differently
  on different days; (b) adds the inputs in the order they become ready, not a fixed one; and
  (c) names its variable in the eager context's one per-step container, so two clients
  trained at once by the same graph fail with `AlreadyExistsError: Resource
  __per_step_0/.../tmp_var` (the MNIST FC's momentum step `m * a + g + prox`, 145 MB a
  tensor). With it off, an `AddN` stays an `AddN`.

  Constant folding turns every model-sized `tf.zeros` of a client's work (the momentum's
  initial state, FLARE's momentum re-created after its penalized steps, the zeros a
  non-finite client sends) into a `Const` node:
  small in the graph (one value, splatted), but the instantiated function holds each one
  materialized for as long as it lives, and a run keeps one client work per algorithm and
  thread. On the MNIST FC that was 0.15 GiB (FedAvg) to 0.22 GiB (FLARE) a function at rest,
  0.3-0.8 GiB of FLARE's peak, 1.2 GiB of three algorithms' (`docs/performance.md`,
  "Memory"). Off, the zeros are made
  when a call needs them and freed after; the values are the same (folding evaluates the
  same kernels), checked bit for bit on runs of the FC, the CNN and the GRU.

  TF 2.14 has no public switch for the memory optimizer, so the thread's function call
  options (which carry the `ConfigProto` every function call is optimized with) are set here
  and restored on exit.
  """
  eager = tf_context.context()
  previous = eager.function_call_options
  config = config_pb2.ConfigProto()
  if previous.config_proto_serialized:
    config.ParseFromString(previous.config_proto_serialized)
  config.graph_options.rewrite_options.memory_optimization = (
      rewriter_config_pb2.RewriterConfig.NO_MEM_OPT)
  config.graph_options.rewrite_options.constant_folding = rewriter_config_pb2.RewriterConfig.OFF
  eager.function_call_options = tf_context.FunctionCallOptions(executor_type=previous.executor_type,
                                                               config_proto=config)
  try:
    yield
  finally:
    eager.function_call_options = previous


def _fixed_graph_rewrites(method):
  """`method` run inside `fixed_graph_rewrites()`."""

  @functools.wraps(method)
  def wrapped(*args, **kwargs):
    with fixed_graph_rewrites():
      return method(*args, **kwargs)

  return wrapped


def _as_array(value) -> np.ndarray:
  if isinstance(value, (np.ndarray, np.generic)):
    return np.asarray(value)
  # Tensors, variables, and Python numbers with TF's dtypes (float32, int32), as TFF has them.
  return np.asarray(tf.convert_to_tensor(value).numpy())


def to_numpy(structure):
  return tf.nest.map_structure(_as_array, structure)


def _to_tensors(structure):
  """Tensors for a `tf.function` argument (numpy scalars would be traced by value); tensors
  pass as they are, arrays are copied in once."""
  return tf.nest.map_structure(tf.convert_to_tensor, structure)


class ResettableModel:
  """A model built once, returned to its freshly built state by `reset()`.

  TFF builds a new model for every call of a computation; code that keeps one model across
  calls (the in-process client work, evaluation) resets everything but the weights before
  each use: metric totals and an RNN's carried state start as built.

  Attributes:
    model: the `tff.learning.models.VariableModel`.
  """

  def __init__(self, model_fn: model_facts.ModelFn):
    created = []

    def record(next_creator, **kwargs):
      variable = next_creator(**kwargs)
      created.append(variable)
      return variable

    with tf.variable_creator_scope(record):
      self.model = model_fn()
    weights = {id(v) for v in self.model.trainable_variables + self.model.non_trainable_variables}
    self._fresh = [(v, tf.constant(v.numpy())) for v in created if id(v) not in weights]

  def reset(self) -> None:
    """Assigns every variable but the weights its value at construction."""
    for variable, value in self._fresh:
      variable.assign(value)


def _traced(function: Callable, *bound) -> Callable:
  """`tf.function` of `function` with `bound` as its first arguments, a function of its own.

  TF counts the traces of `tf.function`s by their Python code and warns of "retracing" when
  functions of one code (one per process, one per model) are each traced once; a
  `functools.partial` is counted by itself.
  """
  return tf.function(functools.partial(function, *bound))


def _reset_then_client_work(model: ResettableModel, functions: round_functions.RoundFunctions,
                            server_weights, params, dataset, client_state, client_input):
  """The client work on `model`, returned first to its freshly built state."""
  model.reset()
  return functions.client_work(model.model, server_weights, params, dataset, client_state,
                               client_input)


class ClientOrderSum:
  """Sums `count` structures given one at a time in client order, to the same floats as
  `tf.add_n` of all of them at once: TF's CPU AddN adds its first `count % 8` inputs (8 or 9
  where that is 0 or 1) left to right, then each next 8 left to right into a sum of their own
  that it adds to the total. Holds two partial sums, not `count` inputs.

  Args:
    count: how many structures will be added (>= 1).
  """

  def __init__(self, count: int):
    first = count if count <= 1 else {0: 8, 1: 9}.get(count % 8, count % 8)
    self._groups = [first] + [8] * ((count - first) // 8)
    self._left = self._groups.pop(0)
    self._group = None
    self._total = None

  def add(self, structure) -> None:
    if self._left <= 0:
      raise ValueError('More structures added than the count given.')
    self._group = (structure if self._group is None else tf.nest.map_structure(
        tf.add, self._group, structure))
    self._left -= 1
    if self._left == 0:
      self._total = (self._group if self._total is None else tf.nest.map_structure(
          tf.add, self._total, self._group))
      self._group = None
      self._left = self._groups.pop(0) if self._groups else 0

  @property
  def total(self):
    if self._left or self._groups:
      raise ValueError('Fewer structures added than the count given.')
    return self._total


class ModelPool:
  """Client models of one `model_fn`, each used by one thread at a time, shared by the
  processes of a run: the algorithms of a run train one after another, and each client's work
  sets every variable before it trains (`ResettableModel.reset`, then the server weights),
  so one model a thread serves them all (the FC's 145 MB each, not one per algorithm)."""

  def __init__(self, model_fn: model_facts.ModelFn):
    self.model_fn = model_fn
    self._idle: queue.SimpleQueue = queue.SimpleQueue()
    self._lock = threading.Lock()

  def take(self) -> ResettableModel:
    """An idle model, or a new one (built at the first rounds, see the module docstring)."""
    try:
      return self._idle.get_nowait()
    except queue.Empty:
      with self._lock:  # Model construction is not thread-safe in Keras.
        return ResettableModel(self.model_fn)

  def give_back(self, model: ResettableModel) -> None:
    self._idle.put(model)


class InProcessProcess:
  """An `AlgorithmProcess`'s rounds in this process, with the same methods as the process.

  Args:
    process: a composed process (one with `round_functions`).
    num_threads: clients trained at once (default: the number of CPUs).
  """

  def __init__(self,
               process: process_lib.AlgorithmProcess,
               num_threads: int | None = None,
               models: ModelPool | None = None):
    if process.round_functions is None:
      raise ValueError('This process has no RoundFunctions (e.g. TFF\'s own algorithms); it '
                       "runs on TFF's runtime only.")
    self._process = process
    self._functions = process.round_functions
    if models is not None and models.model_fn is not self._functions.model_fn:
      raise ValueError('The model pool holds models of another model_fn.')
    self._models = models or ModelPool(self._functions.model_fn)
    self._num_threads = max(1, num_threads or os.cpu_count() or 1)
    self._client_work: dict[int, Any] = {}  # id of a model -> its traced client work.
    self._lock = threading.Lock()
    self._pool: concurrent.futures.ThreadPoolExecutor | None = None
    functions = self._functions
    # `_traced` gives each process its own functions (each traced once), which TF does not
    # take for retracing of one function.
    self._update_server = _traced(functions.update_server)
    self._round_params = _traced(functions.round_params)
    self._record = None
    if functions.record_test_loss is not None:
      self._record = _traced(functions.record_test_loss)
    spec = process.client_input_spec
    self._input_dtype = None if spec is None else spec.dtype

  @property
  def num_threads(self) -> int:
    return self._num_threads

  @_fixed_graph_rewrites
  def initialize(self):
    return to_numpy(self._functions.initial_server_state(self._functions.initial_model_weights()))

  @_fixed_graph_rewrites
  def initial_client_state(self):
    return to_numpy(self._functions.initial_client_state())

  def get_model_weights(self, state):
    return state.global_model_weights

  def set_model_weights(self, state, model_weights):
    return state._replace(global_model_weights=to_numpy(model_weights))

  @_fixed_graph_rewrites
  def record_test_loss(self, state, loss: float):
    if self._record is None:
      raise ValueError('This process does not use the test loss.')
    return to_numpy(self._record(_to_tensors(state), tf.constant(loss, tf.float32)))

  @_fixed_graph_rewrites
  def next(self,
           state,
           client_data: Sequence[tf.data.Dataset],
           client_states: Sequence[Any],
           client_inputs: Sequence[Any],
           *,
           client_state_sink: ClientStateSink | None = None) -> process_lib.RoundOutput:
    """One round on these clients; the same result as the TFF process's `next`.

    The round holds no more than it needs: a client's state is read (`client_states[i]`; a
    store's lazy view reads it only then) when its client starts, its output is added into
    the round's sums in client order as soon as the clients before it are in, and at most
    `num_threads + 1` clients' outputs wait for that at once. With `client_state_sink`, each
    new client state goes to `client_state_sink(i, state)` there and then (the old one can be
    released) and the output's `client_states` is None; without it, they are returned.
    """
    if not len(client_data) == len(client_states) == len(client_inputs):
      raise ValueError(f'{len(client_data)} datasets, {len(client_states)} client states and '
                       f'{len(client_inputs)} client inputs: one of each per client.')
    state = _to_tensors(state)
    params = self.round_params(state)
    weights = state.global_model_weights

    def work(index):
      model = self._models.take()
      try:
        client_input = client_inputs[index]
        if self._input_dtype is not None:
          client_input = tf.constant(client_input, self._input_dtype)
        # Traced (at its first call) with the compiled selection kernels.
        with selection.native_kernels(), fixed_graph_rewrites():
          return self._client_work_of(model)(weights, params, client_data[index],
                                             _to_tensors(client_states[index]), client_input)
      finally:
        self._models.give_back(model)

    summed = ClientOrderSum(len(client_data))
    new_states = []

    def take(index, output):
      summed.add(output['summable'])
      if client_state_sink is None:
        new_states.append(output['client_state'])
      else:
        client_state_sink(index, output['client_state'])

    if self._num_threads == 1 or len(client_data) == 1:
      for index in range(len(client_data)):
        take(index, work(index))
    else:
      pool = self._thread_pool()
      waiting: collections.deque = collections.deque()
      for index in range(len(client_data)):
        while len(waiting) > self._num_threads:
          done, future = waiting.popleft()
          take(done, future.result())
        waiting.append((index, pool.submit(work, index)))
      while waiting:
        done, future = waiting.popleft()
        take(done, future.result())
    new_state, metrics = self.server_round(state, summed.total)
    return process_lib.RoundOutput(state=new_state,
                                   metrics=metrics,
                                   client_states=None if client_state_sink else new_states)

  @_fixed_graph_rewrites
  def round_params(self, state):
    """What the server sends the round's clients beside the model (`RoundFunctions.round_params`
    of the state's schedule), as tensors."""
    return self._round_params(_to_tensors(state.client_work))

  @_fixed_graph_rewrites
  def server_round(self, state, summed):
    """`(state, the round's summed client outputs) -> (new state, metrics)`: the server's part
    of `next` (the aggregation, the server optimizer, the schedule, the metrics).

    The new state stays tensors: copying 145 MB of FC weights out to numpy and back in would
    cost more than the round's arithmetic on them (`np.asarray` reads a tensor without a copy,
    for checkpoints); the metrics are numpy.
    """
    state = _to_tensors(state)
    summed = _to_tensors(summed)
    new_state, measurements = self._update_server(state, summed)
    metrics = self._functions.round_metrics(state.client_work, summed, measurements)
    return new_state, to_numpy(metrics)

  def _client_work_of(self, model: ResettableModel):
    """This process's client work on `model`, a `tf.function` (one per model)."""
    with self._lock:
      run = self._client_work.get(id(model))
      if run is None:
        run = _traced(_reset_then_client_work, model, self._functions)
        self._client_work[id(model)] = run
    return run

  def _thread_pool(self) -> concurrent.futures.ThreadPoolExecutor:
    if self._pool is None:
      self._pool = concurrent.futures.ThreadPoolExecutor(self._num_threads,
                                                         thread_name_prefix='tff_flare_client')
    return self._pool

  def close(self) -> None:
    """Stops the client threads (also done when the process object is collected)."""
    if self._pool is not None:
      self._pool.shutdown(wait=True)
      self._pool = None
