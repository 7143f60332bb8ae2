"""Tests of `tff_flare.execution.workers` and the worker binary: nothing is left behind."""

import os
import signal
import socket
import subprocess
import sys

import portpicker
import tensorflow as tf

from unittest import mock

from tff_flare.execution import cleanup
from tff_flare.execution import workers as worker


def _pids_on(port):
  return [
      pid for pid in cleanup.local_worker_pids()
      if f'--port={port} ' in cleanup.command_line(pid) + ' '
  ]


class WorkerCommandTest(tf.test.TestCase):

  def test_command_serves_tff_and_stops_on_sigterm(self):
    port = portpicker.pick_unused_port()
    process = subprocess.Popen([sys.executable, '-m', 'experiments.worker', f'--port={port}'],
                               stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    try:
      self.assertTrue(worker.wait_until_serving(f'localhost:{port}', timeout_s=120))
      # The command became TFF's worker binary (exec), so the signal reaches it directly.
      self.assertIn(cleanup.WORKER_BINARY_NAME, cleanup.command_line(process.pid))
    finally:
      process.send_signal(signal.SIGTERM)
      process.wait(timeout=30)
    self.assertFalse(worker.wait_until_serving(f'localhost:{port}', timeout_s=0.5))

  def test_bad_port_is_a_clear_error(self):
    with self.assertRaisesRegex(ValueError, r'port must be in \[1, 65535\]'):
      worker.worker_command(0)

  def test_a_port_another_server_holds_is_refused(self):
    # gRPC listens with SO_REUSEPORT: a second worker would serve beside the first one.
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as held:
      held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
      held.bind(('::', 0))
      held.listen()
      port = held.getsockname()[1]
      self.assertTrue(worker.port_in_use(port))
      result = subprocess.run([sys.executable, '-m', 'experiments.worker', f'--port={port}'],
                              capture_output=True,
                              text=True,
                              timeout=120)
    self.assertEqual(result.returncode, 2, result.stderr)
    self.assertRegex(result.stderr.strip().splitlines()[-1],
                     r'^error: Port \d+ is in use on this machine')
    self.assertNotIn('Starting', result.stdout)
    self.assertFalse(worker.port_in_use(port))

  def test_others_listen_on_tells_a_shared_port_from_an_own_one(self):
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as held:
      held.bind(('::', 0))
      port = held.getsockname()[1]
      self.assertFalse(worker.others_listen_on(port, os.getpid()))  # Bound, not listening.
      held.listen()
      self.assertFalse(worker.others_listen_on(port, os.getpid()))  # This process's own.
      other = subprocess.Popen(['sleep', '30'])
      try:
        self.assertTrue(worker.others_listen_on(port, other.pid))
      finally:
        other.kill()
        other.wait()


def _shared_listener():
  """A socket listening with SO_REUSEPORT on a free port, as another gRPC server would."""
  held = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
  held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
  held.bind(('::', 0))
  held.listen()
  held.setblocking(False)
  return held


class LoopbackWorkersTest(tf.test.TestCase):

  def test_a_port_taken_between_its_check_and_the_bind_is_left(self):
    # Was: the worker served beside the other server and the kernel split the driver's
    # connections between the two. The check before the start is passed (the port was free
    # then); the worker is then found sharing it and moved.
    with _shared_listener() as held:
      port = held.getsockname()[1]
      with mock.patch.object(worker.portpicker, 'pick_unused_port',
                             side_effect=[port, portpicker.pick_unused_port()]), \
           mock.patch.object(worker, 'port_in_use', return_value=False):
        workers = worker.LoopbackWorkers(1)
        try:
          workers.start()
          (address,) = workers.addresses
          self.assertNotEqual(address, f'localhost:{port}')
          self.assertFalse(worker.others_listen_on(int(address.rpartition(':')[2]), workers.pid(0)))
          self.assertTrue(worker.wait_until_serving(address, timeout_s=1))
          self.assertEmpty(_pids_on(port))
        finally:
          workers.stop()

  def test_a_port_always_shared_ends_in_one_line(self):
    with _shared_listener() as held:
      port = held.getsockname()[1]
      with mock.patch.object(worker.portpicker, 'pick_unused_port', return_value=port), \
           mock.patch.object(worker, 'port_in_use', return_value=False):
        workers = worker.LoopbackWorkers(1)
        with self.assertRaisesRegex(
            RuntimeError, f'localhost:{port} served on a port another '
            'process listens on too, 3 times'):
          workers.start()
      self.assertEmpty(_pids_on(port))

  def test_stopped_workers_leave_no_process(self):
    workers = worker.LoopbackWorkers(2)
    workers.start()
    ports = [a.rpartition(':')[2] for a in workers.addresses]
    pids = [pid for port in ports for pid in _pids_on(port)]
    self.assertLen(pids, 2)
    for address in workers.addresses:
      self.assertTrue(worker.wait_until_serving(address, timeout_s=1))
    workers.stop()
    for pid in pids:
      self.assertFalse(os.path.exists(f'/proc/{pid}'), pid)

  def test_killed_worker_restarts_on_its_port(self):
    with worker.LoopbackWorkers(1) as workers:
      (address,) = workers.addresses
      workers.kill(0)
      self.assertFalse(worker.wait_until_serving(address, timeout_s=0.5))
      workers.start(0)
      self.assertTrue(worker.wait_until_serving(address, timeout_s=1))
    self.assertEmpty(_pids_on(address.rpartition(':')[2]))


if __name__ == '__main__':
  tf.test.main()
