r"""Starts TFF's executor service (the C++ `worker_binary` shipped in the TFF package).

On every machine that should run clients:

  python -m tff_flare.worker --port=8000

then point a driver at the workers with `--execution=remote --workers=host1:8000,host2:8000`.
The command replaces itself with TFF's `worker_binary --port=PORT` (so signals reach the
service directly). The worker holds no data or state between computations: the driver sends
every computation, its data and the client states.

`LoopbackWorkers` starts such workers on this machine (tests, benchmarks): each with a
parent-death signal, so none outlives the process that started it (Linux sends the signal
when the *thread* that started the worker ends: start workers from a thread that lives as
long as they should, e.g. the main thread).
"""

import os
import signal
import subprocess
from typing import Optional

from absl import app
from absl import flags
import grpc
import portpicker

from tff_flare import runtime


def worker_binary_path() -> str:
  """Path of TFF's executor-service binary inside the installed `tensorflow_federated`."""
  import tensorflow_federated as tff  # pylint: disable=g-import-not-at-top
  path = os.path.join(os.path.dirname(tff.__file__), 'data', runtime.WORKER_BINARY_NAME)
  if not os.path.isfile(path):
    raise FileNotFoundError(f'TFF worker binary not found at {path}; is '
                            'tensorflow-federated installed with its data files?')
  return path


def worker_command(port: int, max_concurrent_computation_calls: int = -1) -> list[str]:
  if not 0 < port < 65536:
    raise ValueError(f'port must be in [1, 65535], got {port}.')
  return [worker_binary_path(), f'--port={port}',
          f'--max_concurrent_computation_calls={max_concurrent_computation_calls}']


def wait_until_serving(address: str, timeout_s: float) -> bool:
  """True once a gRPC server accepts connections at `address` (within `timeout_s`)."""
  with grpc.insecure_channel(address) as channel:
    try:
      grpc.channel_ready_future(channel).result(timeout=timeout_s)
      return True
    except grpc.FutureTimeoutError:
      return False


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
    self._processes: list[Optional[subprocess.Popen]] = [None] * num_workers
    self.addresses = [f'localhost:{port}' for port in self._ports]

  def start(self, index: Optional[int] = None) -> None:
    """Starts worker `index` (all when None) and waits until it serves."""
    indices = range(len(self._ports)) if index is None else [index]
    for i in indices:
      if self._processes[i] is not None and self._processes[i].poll() is None:
        continue
      self._processes[i] = runtime.WorkerPopen(worker_command(self._ports[i]),
                                               stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL)
    for i in indices:
      if not wait_until_serving(self.addresses[i], self._start_timeout_s):
        self.stop()
        raise RuntimeError(f'TFF worker at {self.addresses[i]} did not start serving within '
                           f'{self._start_timeout_s} s.')

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


_PORT = flags.DEFINE_integer('port', 8000, 'Port the worker serves gRPC on.')
_MAX_CALLS = flags.DEFINE_integer(
    'max_concurrent_computation_calls', -1, 'Clients one worker trains at once (e.g. to '
    'bound GPU memory); non-positive: no limit.')


def main(argv) -> None:
  del argv
  command = worker_command(_PORT.value, _MAX_CALLS.value)
  print(f'TFF worker serving on port {_PORT.value}: {" ".join(command)}', flush=True)
  os.execv(command[0], command)


if __name__ == '__main__':
  app.run(main)
