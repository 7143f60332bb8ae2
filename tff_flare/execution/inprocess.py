"""Runs a composed process's rounds in this Python process: no TFF runtime, no serialization.

TFF 0.87 runs every computation in its C++ `worker_binary`, which copies each value through
protobuf and gRPC (a 145 MB model several times a round) and is built without CUDA. Here the
same `RoundFunctions` the TFF process wraps (`tff_flare.algorithms.composer`) run as
`tf.function`s, on the devices TensorFlow places them on (the GPU when TensorFlow sees one):

  * each client's work runs in one of `num_threads` threads, each with its own model
    (several clients at once keep the cores busy, as TFF's runtime does), and the model is
    returned to its freshly built state before every client, as TFF builds a new one per call
    (stateful RNN states and metric variables included). The models are built at the first
    round: a Keras model built in eager mode is invalidated by any model built later inside
    a `tf.Graph`, as every TFF process builder does;
  * the clients' summable outputs are added in client order and the server step runs as one
    `tf.function` (the round's metrics are read eagerly after it);
  * FLARE's selections (the mask's median, the top-k cut) run as the compiled kernels of
    `algorithms/kernels` when they are built (`make kernels`; `algorithms.selection`), the
    TensorFlow ops otherwise: the same values either way.

The server state has the structure and the leaves the TFF process's state has (as tensors
here, numpy arrays there), so a checkpoint written in one execution mode resumes in the
other. Results equal TFF's up to
float rounding (the sums are added in another order); `tests/execution/test_inprocess.py`
compares every algorithm.
"""

import concurrent.futures
import os
import queue
import threading
from collections.abc import Sequence
from typing import Any, Optional

import numpy as np
import tensorflow as tf

from tff_flare.algorithms import model_facts
from tff_flare.algorithms import process as process_lib
from tff_flare.algorithms import round_functions
from tff_flare.algorithms import selection


def _as_array(value) -> np.ndarray:
  if isinstance(value, (np.ndarray, np.generic)):
    return np.asarray(value)
  # Tensors, variables, and Python numbers with TF's dtypes (float32, int32), as TFF has them.
  return np.asarray(tf.convert_to_tensor(value).numpy())


def _to_numpy(structure):
  return tf.nest.map_structure(_as_array, structure)


def _to_tensors(structure):
  """Tensors for a `tf.function` argument (numpy scalars would be traced by value); tensors
  pass as they are, arrays are copied in once."""
  return tf.nest.map_structure(tf.convert_to_tensor, structure)


def _add(*values):
  return values[0] if len(values) == 1 else tf.add_n(list(values))


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
    weights = {id(v) for v in self.model.trainable_variables +
               self.model.non_trainable_variables}
    self._fresh = [(v, tf.constant(v.numpy())) for v in created if id(v) not in weights]

  def reset(self) -> None:
    """Assigns every variable but the weights its value at construction."""
    for variable, value in self._fresh:
      variable.assign(value)


class _ClientWorker:
  """One thread's model and compiled client work."""

  def __init__(self, functions: round_functions.RoundFunctions):
    model = ResettableModel(functions.model_fn)

    @tf.function
    def run(server_weights, params, dataset, client_state, client_input):
      model.reset()
      return functions.client_work(model.model, server_weights, params, dataset,
                                   client_state, client_input)

    self._run = run

  def run(self, *args):
    """The client work; traced (at the first call) with the compiled selection kernels."""
    with selection.native_kernels():
      return self._run(*args)


class InProcessProcess:
  """An `AlgorithmProcess`'s rounds in this process, with the same methods as the process.

  Args:
    process: a composed process (one with `round_functions`).
    num_threads: clients trained at once (default: the number of CPUs).
  """

  def __init__(self, process: process_lib.AlgorithmProcess, num_threads: Optional[int] = None):
    if process.round_functions is None:
      raise ValueError('This process has no RoundFunctions (e.g. TFF\'s own algorithms); it '
                       "runs on TFF's runtime only.")
    self._process = process
    self._functions = process.round_functions
    self._num_threads = max(1, num_threads or os.cpu_count() or 1)
    self._workers: queue.SimpleQueue = queue.SimpleQueue()
    self._lock = threading.Lock()
    self._pool = None
    functions = self._functions
    # A new Python function for each process: `tf.function` counts traces per function.
    self._server_step = tf.function(lambda state, summed: functions.server_step(state, summed))
    self._round_params = tf.function(lambda schedule: functions.round_params(schedule))
    self._record = None
    if functions.record_test_loss is not None:
      self._record = tf.function(lambda state, loss: functions.record_test_loss(state, loss))
    spec = process.client_input_spec
    self._input_dtype = None if spec is None else spec.dtype

  @property
  def num_threads(self) -> int:
    return self._num_threads

  def initialize(self):
    return _to_numpy(self._functions.initial_server_state(
        self._functions.initial_model_weights()))

  def initial_client_state(self):
    return _to_numpy(self._functions.initial_client_state())

  def get_model_weights(self, state):
    return state.global_model_weights

  def set_model_weights(self, state, model_weights):
    return state._replace(global_model_weights=_to_numpy(model_weights))

  def record_test_loss(self, state, loss: float):
    if self._record is None:
      raise ValueError('This process does not use the test loss.')
    return _to_numpy(self._record(_to_tensors(state), tf.constant(loss, tf.float32)))

  def next(self, state, client_data: Sequence[tf.data.Dataset], client_states: Sequence[Any],
           client_inputs: Sequence[Any]) -> process_lib.RoundOutput:
    """One round on these clients; the same result as the TFF process's `next`."""
    if not len(client_data) == len(client_states) == len(client_inputs):
      raise ValueError(f'{len(client_data)} datasets, {len(client_states)} client states and '
                       f'{len(client_inputs)} client inputs: one of each per client.')
    state = _to_tensors(state)
    params = self._round_params(state.client_work)
    weights = state.global_model_weights

    def work(index):
      worker = self._take_worker()
      try:
        client_input = client_inputs[index]
        if self._input_dtype is not None:
          client_input = tf.constant(client_input, self._input_dtype)
        return worker.run(weights, params, client_data[index],
                          _to_tensors(client_states[index]), client_input)
      finally:
        self._workers.put(worker)

    if self._num_threads == 1 or len(client_data) == 1:
      outputs = [work(i) for i in range(len(client_data))]
    else:
      outputs = list(self._thread_pool().map(work, range(len(client_data))))
    summed = tf.nest.map_structure(_add, *[o['summable'] for o in outputs])
    new_state, measurements = self._server_step(state, summed)
    metrics = self._functions.round_metrics(state.client_work, summed, measurements)
    # The server and client states stay tensors: copying 145 MB of FC weights out to numpy
    # and back in would cost more than the round's arithmetic on them (`np.asarray` reads a
    # tensor without a copy, for checkpoints).
    return process_lib.RoundOutput(state=new_state, metrics=_to_numpy(metrics),
                                client_states=[o['client_state'] for o in outputs])

  def _take_worker(self) -> _ClientWorker:
    try:
      return self._workers.get_nowait()
    except queue.Empty:
      with self._lock:  # Model construction is not thread-safe in Keras.
        return _ClientWorker(self._functions)

  def _thread_pool(self) -> concurrent.futures.ThreadPoolExecutor:
    if self._pool is None:
      self._pool = concurrent.futures.ThreadPoolExecutor(
          self._num_threads, thread_name_prefix='tff_flare_client')
    return self._pool

  def close(self) -> None:
    """Stops the client threads (also done when the process object is collected)."""
    if self._pool is not None:
      self._pool.shutdown(wait=True)
      self._pool = None
