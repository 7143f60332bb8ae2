"""TFF's executor service (the C++ `worker_binary` shipped in the TFF package) as a worker.

A worker holds no data or state between computations: the driver sends every computation,
its data and the client states. `python -m experiments.worker --port=8000` starts one on a
machine (`worker_command`); `LoopbackWorkers` starts them on this machine (the local execution
mode, tests, benchmarks), each with a parent-death signal (`cleanup.WorkerPopen`), so none
outlives the process that started it.
"""

import errno
import os
import signal
import socket
import subprocess
import time

import grpc
import portpicker
import psutil

from tff_flare.execution import cleanup


def worker_binary_path() -> str:
  """Path of TFF's executor-service binary inside the installed `tensorflow_federated`."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(tff.__file__), 'data', cleanup.WORKER_BINARY_NAME)
  if not os.path.isfile(path):
    raise FileNotFoundError(f'TFF worker binary not found at {path}; is '
                            'tensorflow-federated installed with its data files?')
  return path


def worker_command(port: int, max_concurrent_computation_calls: int = -1) -> list[str]:
  """The command line of a TFF worker serving on `port`."""
  if not 0 < port < 65536:
    raise ValueError(f'port must be in [1, 65535], got {port}.')
  return [
      worker_binary_path(), f'--port={port}',
      f'--max_concurrent_computation_calls={max_concurrent_computation_calls}'
  ]


def port_in_use(port: int) -> bool:
  """Whether a socket on this machine holds `port` (TCP, any address).

  TFF's worker (gRPC) binds with SO_REUSEPORT, so a second worker on a port another gRPC
  server holds starts and serves beside it, and the kernel splits the connections between the
  two. A bind without SO_REUSEPORT fails on such a port, which is what this tries.
  """
  for family, host in ((socket.AF_INET6, '::'), (socket.AF_INET, '0.0.0.0')):
    try:
      probe = socket.socket(family, socket.SOCK_STREAM)
    except OSError:  # No IPv6 on this machine.
      continue
    with probe:
      probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is free.
      try:
        probe.bind((host, port))
        return False
      except OSError as e:
        if e.errno == errno.EADDRINUSE:
          return True
        if family == socket.AF_INET6:
          continue
        raise
  return False


def others_listen_on(port: int, pid: int) -> bool:
  """Whether a socket of a process other than `pid` listens on TCP `port` of this machine.

  A port that `portpicker` found free can be taken before the worker binds it: a server that
  binds with SO_REUSEPORT (another gRPC server) then listens beside the worker, and the kernel
  splits the driver's calls between the two. Read after the worker serves (psutil's table of
  sockets; a socket whose owner this process may not see counts as another's).
  """
  return any(c.laddr and c.laddr.port == port and c.status == psutil.CONN_LISTEN and c.pid != pid
             for c in psutil.net_connections(kind='tcp'))


def wait_until_serving(address: str, timeout_s: float) -> bool:
  """True once a gRPC server accepts connections at `address` (within `timeout_s`)."""
  with grpc.insecure_channel(address) as channel:
    try:
      grpc.channel_ready_future(channel).result(timeout=timeout_s)
      return True
    except grpc.FutureTimeoutError:
      return False


_START_ATTEMPTS = 3


class LoopbackWorkers:
  """`num_workers` TFF workers on localhost; a context manager that stops them on exit.

  Attributes:
    addresses: `['localhost:PORT', ...]`, one per worker.
  """

  def __init__(self, num_workers: int, *, start_timeout_s: float = 60.0):
    if num_workers < 1:
      raise ValueError(f'num_workers must be >= 1, got {num_workers}.')
    self._ports = [portpicker.pick_unused_port() for _ in range(num_workers)]
    self._start_timeout_s = start_timeout_s
    self._processes: list[subprocess.Popen | None] = [None] * num_workers
    self.addresses = [f'localhost:{port}' for port in self._ports]

  def start(self, index: int | None = None) -> None:
    """Starts worker `index` (all when None) and waits until it serves.

    A worker that exits before serving (its port taken between `portpicker`'s check and its
    bind, say), or that serves on a port another process listens on too (taken in that
    moment by a server that shares ports: `others_listen_on`), is started again on another
    port, up to `_START_ATTEMPTS` times.

    Raises:
      RuntimeError: a worker that does not serve within the start timeout.
    """
    indices = range(len(self._ports)) if index is None else [index]
    for i in indices:
      for attempt in range(_START_ATTEMPTS):
        process = self._processes[i]
        if process is None or process.poll() is not None:
          if port_in_use(self._ports[i]):  # Taken since it was picked: another port.
            self._ports[i] = portpicker.pick_unused_port()
            self.addresses[i] = f'localhost:{self._ports[i]}'
          process = self._processes[i] = cleanup.WorkerPopen(worker_command(self._ports[i]),
                                                             stdout=subprocess.DEVNULL,
                                                             stderr=subprocess.DEVNULL)
        if self._wait_serving(i):
          if not others_listen_on(self._ports[i], process.pid):
            break
          self.kill(i)  # Shares its port: the driver's calls would be split.
          failure = 'served on a port another process listens on too'
        elif process.poll() is None:  # Alive but not serving: give up.
          self.stop()
          raise RuntimeError(f'TFF worker at {self.addresses[i]} did not start serving '
                             f'within {self._start_timeout_s} s.')
        else:
          failure = f'exited before serving (status {process.returncode})'
        if attempt + 1 == _START_ATTEMPTS:
          self.stop()
          raise RuntimeError(f'TFF worker at {self.addresses[i]} {failure}, '
                             f'{_START_ATTEMPTS} times.')
        self._ports[i] = portpicker.pick_unused_port()
        self.addresses[i] = f'localhost:{self._ports[i]}'

  def _wait_serving(self, index: int) -> bool:
    """True once worker `index` serves; False when it exits or the start timeout passes."""
    deadline = time.monotonic() + self._start_timeout_s
    while time.monotonic() < deadline:
      process = self._processes[index]
      if process is None or process.poll() is not None:
        return False
      if wait_until_serving(self.addresses[index], min(1.0, deadline - time.monotonic())):
        return True
    return False

  def pid(self, index: int) -> int | None:
    """The process id of worker `index`, None when it is not started."""
    process = self._processes[index]
    return None if process is None else process.pid

  def death(self, index: int) -> str | None:
    """How worker `index` ended, if it has (e.g. 'killed by signal 9'); None while it runs."""
    process = self._processes[index]
    if process is None or process.poll() is None:
      return None
    code = process.returncode
    return f'killed by signal {-code}' if code < 0 else f'exited with status {code}'

  def kill(self, index: int) -> None:
    """Kills worker `index` at once (SIGKILL), as a crashed machine would."""
    process = self._processes[index]
    if process is not None:
      process.kill()
      process.wait()
      self._processes[index] = None

  def stop(self) -> None:
    """Stops every worker (SIGINT, then SIGKILL after 5 s) and reaps it."""
    for i, process in enumerate(self._processes):
      if process is None:
        continue
      if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
          process.wait(timeout=5)
        except subprocess.TimeoutExpired:
          process.kill()
          process.wait()
      self._processes[i] = None

  def __enter__(self) -> 'LoopbackWorkers':
    self.start()
    return self

  def __exit__(self, *exc) -> None:
    self.stop()
