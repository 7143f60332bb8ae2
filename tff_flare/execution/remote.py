"""TFF execution contexts over TFF workers (`workers`), built from TFF's own parts.

`remote_execution(['host1:8000', 'host2:8000'])` builds TFF's distributed runtime from its
own parts and installs it as the current context:

  * per worker, TFF's `RemoteExecutor` over a `RemoteExecutorGrpcStub` (gRPC), wrapped in an
    `AsyncExecutionContext` exactly as `tff.backends.native` wraps its local worker;
  * over the workers, `tff.backends.native.create_mergeable_comp_execution_context`: it cuts
    each computation at its aggregation, gives each worker a contiguous share of the round's
    clients (a subround), merges the partial aggregates, and concatenates CLIENTS-placed
    results (in the order the subrounds finish, in TFF 0.87; `modes.next_in_phases` puts
    them back in client order).

`worker_execution('localhost:PORT')` is TFF's local runtime over one worker: the context
`tff.backends.native.create_sync_local_cpp_execution_context` builds over the worker it
starts itself (whole computations, no subrounds), here over a worker this project started
(`modes.LocalExecution`), with its traffic counted.

Processes with client state run their round as two computations (`composer.RoundPhases`),
so each client trains once; the client states come back to the driver, which keeps them in
its store as in a local run.

Faults. TFF's `AsyncExecutionContext` retries a subround whose worker answers with a
retryable gRPC error (UNAVAILABLE, ...), with backoff, forever. Here a worker that stays
unreachable for `unavailable_timeout_s` ends the run instead, with `WorkerUnavailableError`
naming it; a worker that is back within that time (restarted on the same port) gets the
subround again (TFF's retry), with the same result. A worker that is down at start is found
before any work (`connect_timeout_s`).

Traffic. Every gRPC request and response is counted per worker (`ExecutionStats`): the
bytes gRPC serializes and parses for it. TFF's mergeable context sends a subround's arguments to
both halves of the cut (before and after the merge; for a result placed only at the server,
the first subround's again) and merges partial sums on a worker, so a round moves more than
TFF's local runtime moves between the driver and its own worker (`benchmarks/round_time.py`
measures both). `RemoteExecution.invoke_in_shares` calls each worker's own context with its
share of the clients and returns the workers' results to the driver unmerged
(`modes._ServerOnDriver`: the clients' sums, the server's round run by the driver).
"""

import asyncio
import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from absl import logging
import grpc
import tensorflow_federated as tff
from tensorflow_federated.python.common_libs import async_utils
from tensorflow_federated.python.common_libs import structure
from tensorflow_federated.python.core.backends.native import compiler
from tensorflow_federated.python.core.environments.tensorflow_frontend import tensorflow_computation
from tensorflow_federated.python.core.impl.execution_contexts import mergeable_comp_execution_context
from tensorflow_federated.python.core.impl.executor_stacks import executor_factory
from tensorflow_federated.python.core.impl.executors import executors_errors

# The message-size limits TFF's own local context sets on its channel (2 GB).
_CHANNEL_OPTIONS = executor_factory._GRPC_CHANNEL_OPTIONS  # pylint: disable=protected-access


class WorkerUnavailableError(RuntimeError):
  """A TFF worker cannot be reached (down at start, or gone for too long during a round).

  The message says what happened to the worker; where the run resumes from is the runner's
  to add (`with_advice`): only it knows whether the run has a checkpoint, or a directory."""

  def __init__(self, address: str, message: str):
    super().__init__(f'TFF worker {address}: {message}')
    self.address = address
    self.message = message

  def with_advice(self, advice: str) -> 'WorkerUnavailableError':
    """The same error, `advice` appended to its message."""
    return WorkerUnavailableError(self.address, f'{self.message} {advice}')


def parse_workers(workers: Sequence[str] | str) -> list[str]:
  """`'h1:8000,h2:8000'` or a list of `host:port` -> validated list (ports without leading
  zeros); raises `ValueError`, also for one worker named twice."""
  if isinstance(workers, str):
    workers = [w for w in workers.split(',') if w.strip()]
  addresses = [w.strip() for w in workers]
  if not addresses:
    raise ValueError('Remote execution needs at least one worker (workers=host:port,...).')
  normalized: list[str] = []
  seen: dict[tuple[str, int], str] = {}
  for address in addresses:
    host, _, port = address.rpartition(':')
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
      raise ValueError(f'Worker address {address!r} is not host:port (port in 1..65535).')
    # One worker named twice (h:1 and h:01, localhost and 127.0.0.1) would get two shares of
    # every round. Names are compared as written (no DNS lookup, which can block).
    key = ('loopback' if host.lower() in _LOOPBACK_NAMES else host.lower(), int(port))
    if key in seen:
      raise ValueError(f'Worker addresses repeat: {seen[key]!r} and {address!r} name the same '
                       'worker.')
    seen[key] = address
    normalized.append(f'{host}:{int(port)}')
  return normalized


# The names of this machine's loopback interface a worker list may use.
_LOOPBACK_NAMES = ('localhost', '127.0.0.1', '::1', '[::1]')


@dataclasses.dataclass
class WorkerTraffic:
  """Serialized bytes between the driver and one worker."""

  address: str
  bytes_sent: int = 0
  bytes_received: int = 0


class ExecutionStats:
  """Traffic of every worker since the last `reset()`; thread-safe."""

  def __init__(self, addresses: Sequence[str]):
    self._lock = threading.Lock()
    self._addresses = list(addresses)
    self.reset()

  def reset(self) -> None:
    with self._lock:
      self._traffic = {a: WorkerTraffic(a) for a in self._addresses}

  def record(self, address: str, *, sent: int = 0, received: int = 0) -> None:
    with self._lock:
      traffic = self._traffic[address]
      traffic.bytes_sent += sent
      traffic.bytes_received += received

  def per_worker(self) -> list[WorkerTraffic]:
    with self._lock:
      return [dataclasses.replace(t) for t in self._traffic.values()]

  def total_bytes(self) -> int:
    return sum(t.bytes_sent + t.bytes_received for t in self.per_worker())


class _WatchedRpc:
  """One gRPC method of a worker: turns a long outage into a clear error.

  TFF's stub turns retryable gRPC errors into `RetryableGRPCError`, which TFF's context
  retries forever. Once the worker has failed that way for longer than `timeout_s`, this
  raises `WorkerUnavailableError` instead, which TFF does not retry.

  A worker that stops answering without failing (a frozen process, a paused machine, a
  half-open link) fails no call: while a call is in flight, the worker is asked every few
  seconds, on a fresh connection, whether it answers (`_answers`); silent for longer than
  `timeout_s`, the call is cancelled and `WorkerUnavailableError` raised. (gRPC's keepalive
  cannot do this sooner than in five minutes: TFF's worker refuses more frequent pings.)
  """

  def __init__(self,
               rpc,
               address: str,
               outage: dict,
               timeout_s: float,
               death: Callable[[], str | None] | None = None):
    self._rpc = rpc
    self._address = address
    self._outage = outage
    self._timeout_s = timeout_s
    self._death = death

  def __call__(self, request, **kwargs):
    try:
      response = self._result(self._rpc.future(request, **kwargs))
    except grpc.RpcError as e:
      if isinstance(e, grpc.Call) and e.code() in executors_errors.get_grpc_retryable_error_codes():
        death = self._death() if self._death is not None else None
        if death is not None:  # A worker of this process that has died: no retry can help.
          raise WorkerUnavailableError(
              self._address, f"TFF's local worker {death} during a round ({e.code().name}).") from e
        first = self._outage.setdefault('since', time.monotonic())
        if time.monotonic() - first > self._timeout_s:
          raise WorkerUnavailableError(
              self._address, f'unreachable for more than {self._timeout_s:.0f} s '
              f'({e.code().name}: {e.details()}). Restart it (python -m experiments.worker '
              f'--port={self._address.rpartition(":")[2]}).') from e
      raise
    self._outage.pop('since', None)
    return response

  def _result(self, future):
    """The call's response, or `WorkerUnavailableError` once the worker has been silent for
    more than `timeout_s` (gRPC errors of the call pass through)."""
    # Waits and probes of at most 2 s (a third of a short timeout): a worker silent since a
    # wait began is named at most two waits and a probe after the timeout (a probe only after
    # a whole timeout made it 3-4 timeouts; waits of a third of it, 1.3-2).
    every_s = min(_PROBE_EVERY_S, self._timeout_s / 3)
    while True:
      waited_from = time.monotonic()
      try:
        response = future.result(timeout=every_s)
        self._outage.pop('silent_since', None)
        return response
      except grpc.FutureTimeoutError:
        pass
      if _answers(self._address, every_s):
        self._outage.pop('silent_since', None)
        continue
      # One silence clock per worker, shared by its calls in flight and the calls after them
      # (each call's own clock made a frozen worker take 6-9 times the timeout to be named),
      # from the start of the wait the probe followed.
      silent_since = self._outage.setdefault('silent_since', waited_from)
      if time.monotonic() - silent_since > self._timeout_s:
        future.cancel()
        death = self._death() if self._death is not None else None
        raise WorkerUnavailableError(
            self._address, f'answered nothing for more than {self._timeout_s:.0f} s during a '
            'call (a stopped or frozen process, a paused machine, a broken link?). Restart it '
            f'(python -m experiments.worker --port={self._address.rpartition(":")[2]}).'
            if death is None else f"TFF's local worker {death} during a round.")


# How often a worker with a call in flight is asked whether it answers (seconds): a fresh
# connection's handshake, cheap beside a round's calls.
_PROBE_EVERY_S = 2.0


def _answers(address: str, timeout_s: float) -> bool:
  """Whether the worker at `address` completes a gRPC handshake on a fresh connection within
  `timeout_s`: a stopped process still accepts TCP connections (the kernel does), but
  does not answer the handshake."""
  channel = grpc.insecure_channel(address)
  try:
    grpc.channel_ready_future(channel).result(timeout=timeout_s)
    return True
  except grpc.FutureTimeoutError:
    return False
  finally:
    channel.close()


class _WorkerChannel:
  """The gRPC channel TFF's `RemoteExecutorGrpcStub` is given for one worker.

  Every unary method the stub creates on it counts the bytes gRPC actually serializes and
  parses (no second serialization) and is watched for outages (`_WatchedRpc`).
  """

  def __init__(self,
               channel: grpc.Channel,
               address: str,
               stats: ExecutionStats,
               unavailable_timeout_s: float,
               death: Callable[[], str | None] | None = None):
    self._channel = channel
    self._address = address
    self._stats = stats
    self._timeout_s = unavailable_timeout_s
    self._death = death
    self._outage: dict[str, float] = {}
    self._callbacks: list[Callable[..., Any]] = []

  def subscribe(self, callback, try_to_connect=False):
    self._callbacks.append(callback)
    self._channel.subscribe(callback, try_to_connect=try_to_connect)

  def close(self) -> None:
    """Closes the channel once TFF's connectivity watch has ended.

    gRPC polls a subscribed channel's connectivity from a thread that ends within 0.2 s of
    the last unsubscription; closing the channel before that makes the thread fail.
    """
    for callback in self._callbacks:
      self._channel.unsubscribe(callback)
    if self._callbacks:
      time.sleep(0.3)
    self._channel.close()

  def unary_unary(self, method, request_serializer, response_deserializer, **kwargs):

    def serialize(request) -> bytes:
      data = request_serializer(request)
      self._stats.record(self._address, sent=len(data))
      return data

    def deserialize(data: bytes):
      self._stats.record(self._address, received=len(data))
      return response_deserializer(data)

    rpc = self._channel.unary_unary(method,
                                    request_serializer=serialize,
                                    response_deserializer=deserialize,
                                    **kwargs)
    watched = _WatchedRpc(rpc, self._address, self._outage, self._timeout_s, self._death)
    return _Disposal(watched) if method.endswith(_DISPOSE_METHOD) else watched


# The RPC that frees values on a worker. TFF calls it from the finalizers of the values the
# driver drops, where an error is printed as a traceback and changes nothing.
_DISPOSE_METHOD = '/Dispose'


class _Disposal:
  """The Dispose RPC of a worker that may be gone: its failure is not an error.

  A run whose worker has died or become unreachable ends with `WorkerUnavailableError` from
  the call that found it; the values still alive then are dropped afterwards, and each drop's
  Dispose would fail again in a finalizer, printing a traceback after the run's one line.
  There is nothing left to free on a worker that is gone, so the failure is logged and
  dropped, as TFF's own `RemoteExecutor` does for the DisposeExecutor RPC.
  """

  def __init__(self, rpc: _WatchedRpc):
    self._rpc = rpc

  def __call__(self, request, **kwargs):
    try:
      return self._rpc(request, **kwargs)
    except (grpc.RpcError, WorkerUnavailableError) as e:
      logging.debug('Dispose on a worker that does not answer, ignored: %s', e)
      return None


def _connect(address: str, connect_timeout_s: float) -> grpc.Channel:
  channel = grpc.insecure_channel(address, _CHANNEL_OPTIONS)
  try:
    grpc.channel_ready_future(channel).result(timeout=connect_timeout_s)
  except grpc.FutureTimeoutError as e:
    channel.close()
    port = address.rpartition(':')[2]
    raise WorkerUnavailableError(
        address, f'no worker answers (waited {connect_timeout_s:.0f} s). Start one on that '
        f'machine with: python -m experiments.worker --port={port}') from e
  return channel


def _worker_executor_factory(channel: _WorkerChannel) -> tff.framework.ExecutorFactory:
  """TFF's executor factory over one worker, as `tff.backends.native` builds its local one."""
  stub = tff.framework.RemoteExecutorGrpcStub(channel)

  def executor_stack(cardinalities):
    if cardinalities.get(tff.CLIENTS) is None:  # As TFF's local factory: 0 by default.
      cardinalities[tff.CLIENTS] = 0
    # TFF's setting for a worker's memory: each value the driver drops is disposed of on the
    # worker at once. By default TFF batches 20, and TFF's FedAvg on the FC (145 MB a model)
    # grew its worker by about 1 GB a round until it was killed (test_remote).
    executor = tff.framework.RemoteExecutor(stub, dispose_batch_size=1)
    executor.set_cardinalities(cardinalities)
    return executor

  return tff.framework.ResourceManagingExecutorFactory(executor_stack)


_CONTEXT_ARGS = dict(compiler_fn=compiler.desugar_and_transform_to_native,
                     transform_args=tensorflow_computation.transform_args,
                     transform_result=tensorflow_computation.transform_result)


@dataclasses.dataclass
class RemoteExecution:
  """The installed distributed context, its workers' own contexts and their traffic."""

  addresses: list[str]
  context: tff.framework.MergeableCompExecutionContext | tff.framework.SyncExecutionContext
  stats: ExecutionStats
  worker_contexts: list[tff.framework.AsyncExecutionContext] = dataclasses.field(
      default_factory=list)
  # One event loop thread for `invoke_in_shares`, started at its first call.
  _async_runner: async_utils.AsyncThreadRunner | None = dataclasses.field(default=None,
                                                                          init=False,
                                                                          repr=False)

  def invoke_in_shares(self, comp: tff.Computation, shared: Sequence[Any],
                       per_client: Sequence[Sequence[Any]]) -> list[Any]:
    """`comp(*shared, *share)` on every worker at once, each with its contiguous share of
    the clients' arguments (`per_client`: one list per CLIENTS-placed parameter, a value a
    client), cut as TFF's mergeable context cuts them; the workers' results in worker order.
    `comp` must place its result at the server (a sum over its share's clients, say):
    nothing is merged here.

    Raises:
      ValueError: a round of no clients (there is nothing to sum).
    """
    if not per_client or not len(per_client[0]):
      raise ValueError('A round on workers needs at least one client.')
    shares = mergeable_comp_execution_context._split_value_into_subrounds(  # pylint: disable=protected-access
        structure.Struct.unnamed(*shared, *(list(values) for values in per_client)),
        comp.type_signature.parameter, len(self.worker_contexts))

    async def all_shares():
      return await asyncio.gather(
          *[context.invoke(comp, share) for context, share in zip(self.worker_contexts, shares)])

    return list(self._runner().run_coro_and_return_result(all_shares()))

  def _runner(self) -> async_utils.AsyncThreadRunner:
    if self._async_runner is None:
      self._async_runner = async_utils.AsyncThreadRunner()
    return self._async_runner


@contextlib.contextmanager
def remote_execution(workers: Sequence[str] | str,
                     *,
                     connect_timeout_s: float = 20.0,
                     unavailable_timeout_s: float = 60.0) -> Iterator[RemoteExecution]:
  """Installs TFF's mergeable execution context over `workers` for the `with` block.

  Raises:
    ValueError: a malformed worker list.
    WorkerUnavailableError: a worker that does not answer within `connect_timeout_s`.
  """
  addresses = parse_workers(workers)
  stats = ExecutionStats(addresses)
  channels = []
  try:
    for address in addresses:
      channels.append(
          _WorkerChannel(_connect(address, connect_timeout_s), address, stats,
                         unavailable_timeout_s))
    contexts = [
        tff.framework.AsyncExecutionContext(executor_fn=_worker_executor_factory(channel),
                                            **_CONTEXT_ARGS) for channel in channels
    ]
    context = tff.backends.native.create_mergeable_comp_execution_context(contexts)
    with tff.framework.get_context_stack().install(context):
      yield RemoteExecution(addresses=addresses,
                            context=context,
                            stats=stats,
                            worker_contexts=contexts)
  finally:
    for channel in channels:
      channel.close()


@contextlib.contextmanager
def worker_execution(address: str,
                     *,
                     connect_timeout_s: float = 20.0,
                     unavailable_timeout_s: float = 60.0,
                     death: Callable[[], str | None] | None = None,
                     num_subrounds: int = 1) -> Iterator[RemoteExecution]:
  """TFF's local runtime over the worker at `address`, with its traffic counted.

  The same context `tff.backends.native.create_sync_local_cpp_execution_context` builds over
  the worker it starts itself (a `SyncExecutionContext`, whole computations, no subrounds);
  with `num_subrounds` > 1, TFF's mergeable context over it instead, which runs a round's
  clients in that many calls one after another: the worker holds one call's clients at once,
  and the driver sends each call the server state.
  TFF retries a call to a worker that does not answer forever; here the run ends with
  `WorkerUnavailableError` at once when `death()` says the worker process has ended, and
  after `unavailable_timeout_s` of no answer otherwise.
  """
  (address,) = parse_workers([address])
  stats = ExecutionStats([address])
  channel = _WorkerChannel(_connect(address, connect_timeout_s), address, stats,
                           unavailable_timeout_s, death)
  try:
    context: tff.framework.MergeableCompExecutionContext | tff.framework.SyncExecutionContext
    if num_subrounds > 1:
      context = tff.backends.native.create_mergeable_comp_execution_context(
          [
              tff.framework.AsyncExecutionContext(executor_fn=_worker_executor_factory(channel),
                                                  **_CONTEXT_ARGS)
          ],
          num_subrounds=num_subrounds)
    else:
      context = tff.framework.SyncExecutionContext(executor_fn=_worker_executor_factory(channel),
                                                   **_CONTEXT_ARGS)
    with tff.framework.get_context_stack().install(context):
      yield RemoteExecution(addresses=[address], context=context, stats=stats)
  finally:
    channel.close()
