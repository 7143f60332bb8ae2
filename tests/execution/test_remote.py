"""Tests of `tff_flare.execution.remote`: rounds on loopback TFF workers equal local rounds;
faults."""

import csv
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
from unittest import mock

import grpc
import numpy as np
import portpicker
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.proto.v0 import executor_pb2

from tff_flare.algorithms import ec
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import flare
from tff_flare.algorithms import model_aggregators
from tff_flare.execution import cleanup
from tff_flare.execution import modes
from tff_flare.execution import remote
from tff_flare.execution import workers as worker
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner
from tff_flare.simulation import hooks
from tff_flare.simulation import loop
from tff_flare.simulation import sampling
from tff_flare.tasks import registry as tasks
from tests import tiny_models

_TIMEOUT_S = 3.0


def _worker_pids(addresses):
  """Pids of this process's TFF workers serving on the ports of `addresses`."""
  ports = [f'--port={a.rpartition(":")[2]} ' for a in addresses]
  return [
      pid for pid in cleanup.local_worker_pids()
      if any(p in cleanup.command_line(pid) + ' ' for p in ports)
  ]


def _train_two_rounds(task, execution):
  optimizer = tff.learning.optimizers.build_sgdm(0.1, momentum=0.9)
  runs = [
      loop.AlgorithmRun(
          'flare',
          flare.build_flare(task.model_fn,
                            keep_percent=5.0,
                            client_optimizer=optimizer,
                            tau=0.05,
                            tau_decay=1.1,
                            reg_steps=1), execution),
      loop.AlgorithmRun('ec',
                        ec.build_ec(task.model_fn, keep_percent=5.0, client_optimizer=optimizer),
                        execution),
      # A TFF aggregation factory in the mean's place: its aggregation is cut too.
      loop.AlgorithmRun(
          'ec_clipped',
          ec.build_ec(task.model_fn,
                      keep_percent=5.0,
                      client_optimizer=optimizer,
                      model_aggregator=model_aggregators.build('clipping', 0.05)), execution)
  ]
  rows = hooks.CollectRows()
  loop.run_rounds(runs,
                  task.client_datasets,
                  sampling.build_client_sampler(task.train_data.client_ids, 4, seed=3),
                  start_round=0,
                  end_round=2,
                  hooks=[rows])
  return runs, rows.rows[:-1]


class TwoLoopbackWorkersTest(tf.test.TestCase):

  def test_flare_and_ec_two_rounds_match_a_local_run(self):
    # 5 local steps per client, momentum: FLARE's regularized step and the top-k matter.
    task = tasks.build_task('digits_demo', num_clients=6, batch_size=32, epochs=1)
    with modes.build_execution('local') as execution:
      local_runs, local_history = _train_two_rounds(task, execution)
    with worker.LoopbackWorkers(2) as workers:
      with modes.build_execution('remote', workers.addresses) as execution:
        remote_runs, remote_history = _train_two_rounds(task, execution)
        traffic = execution.stats.per_worker()
    self.assertEmpty(_worker_pids(workers.addresses))
    # Both workers took part, and moved at least the model (~37 KB) both ways.
    for t in traffic:
      self.assertGreater(t.bytes_sent, 37_000, t)
      self.assertGreater(t.bytes_received, 37_000, t)
    for local, remote_run in zip(local_runs, remote_runs):
      self.assertAllClose(local.model_weights().trainable,
                          remote_run.model_weights().trainable,
                          rtol=1e-5,
                          atol=1e-6,
                          msg=local.name)
      self.assertEqual(local.store.client_ids(), remote_run.store.client_ids())
      for cid in local.store.client_ids():
        self.assertAllClose(local.store.get(cid),
                            remote_run.store.get(cid),
                            rtol=1e-5,
                            atol=1e-6,
                            msg=f'{local.name} {cid}')
    for local_row, remote_row in zip(local_history, remote_history):
      self.assertEqual(local_row.client_ids, remote_row.client_ids)
      for name in ('flare', 'ec', 'ec_clipped'):
        self.assertAllClose(local_row[name].train, remote_row[name].train, rtol=1e-5)

  def test_states_in_files_a_round_moves_the_model_out_and_a_sum_back(self):
    # The workers return their clients' sums and the driver runs the server's round
    # (`modes._ServerOnDriver`): a round moves the model out and a model-sized sum back per
    # worker. TFF's mergeable context, running the round whole, also merges two partial sums
    # on a worker and runs the part after the merge with the model again: five model-sized
    # transfers per worker on one, ten in all on two.
    task = tasks.build_task('digits_demo', num_clients=6, batch_size=32, epochs=1)
    optimizer = tff.learning.optimizers.build_sgdm(0.1, momentum=0.9)
    process = flare.build_flare(task.model_fn,
                                keep_percent=5.0,
                                client_optimizer=optimizer,
                                tau=0.05,
                                tau_decay=1.1,
                                reg_steps=1)
    model_bytes = 4 * process.num_trainable_parameters
    ids = task.train_data.client_ids[:4]
    datasets = task.client_datasets(ids, 0)
    inputs = process.client_inputs(ids)

    def two_rounds(execution, run_round, folder):
      bound = execution.bind(process)
      state = bound.initialize()
      read = [''] * 4
      moved = []
      for generation in range(2):
        write = [os.path.join(folder, f'{i}_g{generation}_') for i in ids]
        execution.stats.reset()
        state = run_round(bound, state, read, write).state
        moved.append(execution.stats.total_bytes())
        read = write
      return bound.get_model_weights(state).trainable, moved

    base = self.get_temp_dir()
    with worker.LoopbackWorkers(2) as workers:
      with modes.build_execution('remote', workers.addresses) as execution:
        split, split_bytes = two_rounds(
            execution, lambda bound, state, read, write: bound.next_with_state_files(
                state, datasets, read, write, inputs), os.path.join(base, 'split'))
        # The same round as one computation through TFF's mergeable context.
        whole, whole_bytes = two_rounds(
            execution, lambda bound, state, read, write: modes._OnTff.next_with_state_files(
                bound, state, datasets, read, write, inputs), os.path.join(base, 'whole'))
    self.assertEmpty(_worker_pids(workers.addresses))
    self.assertAllClose(whole, split, rtol=1e-5, atol=1e-6)
    for split_round, whole_round in zip(split_bytes, whole_bytes):
      # Two workers: 4 model-sized transfers, against 10 (and the same data and file names).
      self.assertLess(split_round, whole_round - 5 * model_bytes)
      self.assertGreater(split_round, 4 * model_bytes)

  def test_a_round_of_no_clients_is_refused_before_any_call(self):
    workers = remote.RemoteExecution(addresses=[], context=None, stats=None)
    with self.assertRaisesRegex(ValueError, 'needs at least one client'):
      workers.invoke_in_shares(None, (), ([], []))

  def test_without_client_state_a_round_moves_the_model_out_and_a_sum_back(self):
    # FedAvg keeps no client state: its round is split the same way (`client_sums`).
    task = tasks.build_task('digits_demo', num_clients=6, batch_size=32, epochs=1)
    process = fedavg.build_fedavg(task.model_fn,
                                  client_optimizer=tff.learning.optimizers.build_sgdm(0.1,
                                                                                      momentum=0.9))
    model_bytes = 4 * process.num_trainable_parameters
    ids = task.train_data.client_ids[:4]
    datasets = task.client_datasets(ids, 0)
    inputs = process.client_inputs(ids)

    def two_rounds(execution, run_round):
      bound = execution.bind(process)
      state = bound.initialize()
      states = [bound.initial_client_state()] * 4
      moved = []
      for _ in range(2):
        execution.stats.reset()
        output = run_round(bound, state, states)
        state = output.state
        moved.append(execution.stats.total_bytes())
        self.assertLen(output.client_states, 4)
      return bound.get_model_weights(state).trainable, moved

    with worker.LoopbackWorkers(2) as workers:
      with modes.build_execution('remote', workers.addresses) as execution:
        split, split_bytes = two_rounds(
            execution, lambda bound, state, states: bound.next(state, datasets, states, inputs))
        whole, whole_bytes = two_rounds(
            execution,
            lambda bound, state, states: modes._OnTff.next(bound, state, datasets, states, inputs))
    self.assertEmpty(_worker_pids(workers.addresses))
    self.assertAllClose(whole, split, rtol=1e-5, atol=1e-6)
    for split_round, whole_round in zip(split_bytes, whole_bytes):
      self.assertLess(split_round, whole_round - 5 * model_bytes)
      self.assertGreater(split_round, 4 * model_bytes)


def _config(output_dir, **overrides):
  values = dict(output_dir=output_dir,
                task='digits_demo',
                algorithms=('flare', 'ef21', 'mask_independent', 'tff_fedavg'),
                rounds=4,
                num_clients=6,
                clients_per_round=4,
                eval_every=2,
                checkpoint_every=1,
                worker_timeout_s=_TIMEOUT_S)
  values.update(overrides)
  return config_lib.ExperimentConfig(**values)


def _csv_rounds(output_dir):
  with open(pathlib.Path(output_dir) / 'metrics.csv', newline='') as f:
    return [int(r['round']) for r in csv.DictReader(f)]


class FaultsTest(tf.test.TestCase):

  def test_worker_down_at_start_is_named(self):
    address = f'localhost:{portpicker.pick_unused_port()}'
    with self.assertRaisesRegex(remote.WorkerUnavailableError,
                                f'{address}: no worker answers.*experiments.worker'):
      with remote.remote_execution([address], connect_timeout_s=1.0):
        pass

  def test_worker_killed_mid_run_then_resumed_equals_local_run(self):
    # disk: the driver keeps the states as files; files: the workers' client computations
    # read and write them (`next_with_state_files`), so no state crosses the driver.
    base = self.get_temp_dir()
    # A stateful algorithm (its states on disk), one with client inputs, one of TFF's.
    overrides = dict(algorithms=('flare', 'mask_independent', 'tff_fedavg'))
    local = runner.run_experiment(_config(os.path.join(base, 'local'), **overrides),
                                  log=lambda _: None)
    with worker.LoopbackWorkers(2) as workers:
      for storage in ('disk', 'files'):
        output_dir = os.path.join(base, storage)
        # The client states in files here, in memory in the local run: same results.
        config = _config(output_dir,
                         execution='remote',
                         workers=workers.addresses,
                         client_state_storage=storage,
                         **overrides)

        def kill_after_round_1(line):
          if line.startswith('round 1 '):
            workers.kill(1)

        with self.assertRaisesRegex(remote.WorkerUnavailableError,
                                    f'{workers.addresses[1]}: unreachable for more than 3 s'):
          runner.run_experiment(config, log=kill_after_round_1)
        self.assertEqual(_csv_rounds(output_dir), [0, 1])
        workers.start(1)  # Back on the same port.
        lines = []
        resumed = runner.run_experiment(config, log=lines.append)
        self.assertIn('Resuming from the checkpoint after round 1.', lines)
        self.assertEqual(_csv_rounds(output_dir), [0, 1, 2, 3, 4])  # 4: the final evaluation.
        for name, result in local['final_eval'].items():
          self.assertAllClose(resumed['final_eval'][name],
                              result,
                              rtol=1e-5,
                              msg=f'{storage} {name}')
        flare_dir = pathlib.Path(output_dir) / 'client_states' / 'flare'
        self.assertLen([p for p in flare_dir.iterdir() if p.is_dir()], 6)  # One per client.
        suffix = dict(disk='.npy', files='.tensor')[storage]
        self.assertNotEmpty(list(flare_dir.glob(f'*/g*_0{suffix}')), storage)
    self.assertEmpty(_worker_pids(workers.addresses))

  def test_a_stopped_worker_ends_the_round_after_the_timeout(self):
    # SIGSTOP (a frozen process, a paused machine): the worker fails nothing and answers
    # nothing; without the probe the round waits forever.
    output_dir = os.path.join(self.get_temp_dir(), 'remote')
    with worker.LoopbackWorkers(2) as workers:
      config = _config(output_dir,
                       execution='remote',
                       workers=workers.addresses,
                       algorithms=('ec',))

      stopped = []

      def stop_after_round_1(line):
        if line.startswith('round 1 '):
          os.kill(workers.pid(1), signal.SIGSTOP)
          stopped.append(time.monotonic())

      with self.assertRaisesRegex(remote.WorkerUnavailableError,
                                  f'{workers.addresses[1]}: answered nothing for more than 3 s'):
        runner.run_experiment(config, log=stop_after_round_1)
      # One clock for the worker, waits and probes of at most 2 s (a third of this timeout):
      # measured 2.2 timeouts here, 6.7 s, with the driver's work between rounds; at a 20 s
      # timeout 24.8 s (each call's own clock took 6-9 timeouts; a probe after a whole one, 4).
      self.assertLess(time.monotonic() - stopped[0], 4 * _TIMEOUT_S)
      self.assertEqual(_csv_rounds(output_dir), [0, 1])
      os.kill(workers.pid(1), signal.SIGCONT)  # Answers again: the same command resumes.
      lines = []
      runner.run_experiment(config, log=lines.append)
    self.assertIn('Resuming from the checkpoint after round 1.', lines)
    self.assertEqual(_csv_rounds(output_dir), [0, 1, 2, 3, 4])

  def test_worker_back_within_the_timeout_gets_its_subround_again(self):
    base = self.get_temp_dir()
    overrides = dict(algorithms=('ec',), rounds=2)
    local = runner.run_experiment(_config(os.path.join(base, 'local'), **overrides),
                                  log=lambda _: None)
    with worker.LoopbackWorkers(2) as workers:
      restarted, finished = threading.Event(), threading.Event()

      def restart_later():  # A worker dies with the thread that started it: this one waits.
        time.sleep(2.0)
        workers.start(1)
        restarted.set()
        finished.wait()

      def kill_after_round_0(line):
        if line.startswith('round 0 '):
          workers.kill(1)
          threading.Thread(target=restart_later, daemon=True).start()

      config = _config(os.path.join(base, 'remote'),
                       execution='remote',
                       workers=workers.addresses,
                       **dict(overrides, worker_timeout_s=120.0))
      result = runner.run_experiment(config, log=kill_after_round_0)
      self.assertTrue(restarted.is_set())
      workers.stop()
      finished.set()
    self.assertAllClose(result['final_eval']['ec'], local['final_eval']['ec'], rtol=1e-5)

  def test_binary_names_a_worker_that_is_down(self):
    port = portpicker.pick_unused_port()
    result = subprocess.run([
        sys.executable, '-m', 'experiments.run_experiment', '--rounds=1',
        f'--output_dir={self.get_temp_dir()}', '--execution=remote', f'--workers=localhost:{port}',
        '--worker_timeout_s=1'
    ],
                            capture_output=True,
                            text=True,
                            timeout=300,
                            check=False,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertEqual(result.returncode, 3, result.stderr[-2000:])
    self.assertIn(f'TFF worker localhost:{port}: no worker answers', result.stderr)
    self.assertIn(f'python -m experiments.worker --port={port}', result.stderr)

  def test_labels_the_model_has_no_class_for_are_one_line_on_a_worker(self):
    # The same line as in this process (test_runner): here TF's error reaches the driver as
    # TFF's gRPC error from the worker.
    data = {
        f'c{i}': tiny_models.dataset_from_arrays(np.ones((8, 4), np.float32),
                                                 np.full((8, 1), 7, np.int32), 4) for i in range(3)
    }
    with worker.LoopbackWorkers(1) as workers:
      for execution in ('local', 'remote'):  # TFF's runtime here, and on a worker.
        process = ec.build_ec(tiny_models.SOFTMAX_MODEL_FN,
                              keep_percent=5.0,
                              client_optimizer=tff.learning.optimizers.build_sgdm(0.1))
        with self.assertRaisesRegex(config_lib.ConfigError, r'^The model cannot run on the '
                                    r'data \(round 0\): Received a label value of 7 which is '
                                    r'outside the valid range of \[0, 3\)\.  Label values: '
                                    r'7 7 7 7$',
                                    msg=execution):
          runner.simulate({'ec': process},
                          data,
                          rounds=2,
                          client_threads=1,
                          execution=execution,
                          log=lambda _: None,
                          **(dict(workers=workers.addresses, worker_timeout_s=30)
                             if execution == 'remote' else {}))
    self.assertEmpty(_worker_pids(workers.addresses))


def _most_values_held_by_the_worker(rounds: int) -> int:
  """The most values TFF's local worker held at once (made, not yet disposed) during a FedAvg
  run of `rounds` rounds on TFF's local runtime, counted on the driver's stub."""
  stub = tff.framework.RemoteExecutorGrpcStub
  held, most = [0], [0]

  def counting(method, change):

    def call(self, request):
      response = method(self, request)
      held[0] += change(request)
      most[0] = max(most[0], held[0])
      return response

    return call

  made = lambda _: 1
  data = {
      f'c{i}': tiny_models.dataset_from_arrays(np.ones((8, 4), np.float32),
                                               np.zeros((8, 1), np.int32), 4) for i in range(2)
  }
  with mock.patch.multiple(stub,
                           create_value=counting(stub.create_value, made),
                           create_call=counting(stub.create_call, made),
                           create_struct=counting(stub.create_struct, made),
                           create_selection=counting(stub.create_selection, made),
                           dispose=counting(stub.dispose, lambda r: -len(r.value_ref))):
    runner.simulate(
        {
            'fedavg':
                fedavg.build_fedavg(tiny_models.SOFTMAX_MODEL_FN,
                                    client_optimizer=tff.learning.optimizers.build_sgdm(0.1))
        },
        data,
        rounds=rounds,
        client_threads=1,
        execution='local',
        log=lambda _: None)
  return most[0]


class WorkerMemoryTest(tf.test.TestCase):

  def test_a_worker_holds_no_value_of_a_finished_round(self):
    # TFF's RemoteExecutor disposes of the values the driver has dropped 20 at a time by
    # default: on the FC (145 MB a model) TFF's worker grew by about 1 GB a round until it
    # was killed. The values held at once do not grow with the rounds.
    self.assertEqual(_most_values_held_by_the_worker(6), _most_values_held_by_the_worker(2))

  def test_values_dropped_after_a_worker_died_print_nothing(self):
    # The run ends with one line from the call that found the worker gone; the values still
    # alive are dropped afterwards, and TFF disposes of each from its finalizer, where an
    # error prints a traceback. Dispose on a gone worker is a no-op; any other call still
    # names the worker.
    port = portpicker.pick_unused_port()
    channel = remote._WorkerChannel(grpc.insecure_channel(f'localhost:{port}'),
                                    f'localhost:{port}',
                                    remote.ExecutionStats([f'localhost:{port}']),
                                    unavailable_timeout_s=_TIMEOUT_S,
                                    death=lambda: 'exited with code -9')
    stub = tff.framework.RemoteExecutorGrpcStub(channel)
    try:
      self.assertIsNone(stub.dispose(executor_pb2.DisposeRequest()))
      with self.assertRaisesRegex(remote.WorkerUnavailableError, 'exited with code -9'):
        stub.compute(executor_pb2.ComputeRequest())
    finally:
      channel.close()


class BadInputTest(tf.test.TestCase):

  def test_bad_worker_lists(self):
    for workers, message in (('', 'at least one worker'), ('localhost', 'not host:port'),
                             ('h:0', 'not host:port'), ('h:99999', 'not host:port'), ('h:1,h:1',
                                                                                      'repeat')):
      with self.assertRaisesRegex(ValueError, message, msg=workers):
        remote.parse_workers(workers)
    self.assertEqual(remote.parse_workers('a:1, b:2'), ['a:1', 'b:2'])
    # One worker under two names would get two shares of every round.
    for workers in ('h:1,h:01', 'localhost:8000,127.0.0.1:8000', 'H:5,h:5'):
      with self.assertRaisesRegex(ValueError, 'name the same worker', msg=workers):
        remote.parse_workers(workers)
    self.assertEqual(remote.parse_workers('h:080,h:81'), ['h:80', 'h:81'])

  def test_experiment_rejects_inconsistent_execution(self):
    for overrides, message in ((dict(execution='cluster'), 'Unknown execution'),
                               (dict(workers=('h:1',)), 'execution is inprocess'),
                               (dict(workers=('h:1',), execution='local'), 'execution is local'),
                               (dict(execution='remote'), 'at least one worker'),
                               (dict(execution='remote', workers=('h:1',),
                                     worker_timeout_s=0), 'worker timeout')):
      with self.assertRaisesRegex(config_lib.ConfigError, message):
        config_lib.validate(_config(self.get_temp_dir(), **overrides))


if __name__ == '__main__':
  tf.test.main()
