r"""Seconds and bytes per round in every execution mode, side by side in one run.

For a model of `benchmarks.synthetic` (default: the authors' MNIST CNN, 10 clients x 600
images, batch 600, one local step; `--model=fc`, `vgg11`, ...), the chosen algorithms from
one initial model, on synthetic data batched and scaled as the tasks do (what the experiment
binary sends). Modes, each in this one run, in turn:

  local      TFF's local runtime (`--execution=local`): whole computations on one
             `worker_binary`, its traffic counted;
  inprocess  this process, no TFF runtime (`--execution=inprocess`);
  workers=N  N loopback TFF workers (`--execution=remote`): each gets the model and a
             contiguous share of the round's clients and returns their sum, the server's
             round runs on the driver (`modes._ServerOnDriver`); with the clients' states
             kept by the driver (memory, disk), a stateful round runs in two phases and
             its states cross the driver.
  <mode>:files  the same, with the clients' states in files the client computations read
             and write themselves (`AlgorithmProcess.next_with_state_files`): no client state
             crosses the driver; a stateful round runs whole on TFF's local runtime
             (`inprocess:files`: this process reads and writes the files).

Per mode and algorithm: seconds per round (mean of the timed rounds; the first round, with
tracing, is not timed), the bytes that crossed between the driver and TFF's worker(s) per
round and the same as models per worker (bytes / (model bytes x workers), TFF's local runtime
one worker: the goal of a split round is 2, the model out and a sum back), and the largest
weight difference to the first mode's run after all rounds (float rounding, except
where the model draws at random: the VGG's dropout masks differ between this process and
TFF's worker, 2.7e-4 after two rounds of two steps). On one machine
TFF's workers share the cores: the `workers=N` rows measure the cost of the split and the
driver's traffic, not a speed-up.

  python -m benchmarks.round_time                                  # CNN, local vs in-process
  python -m benchmarks.round_time --modes=local,inprocess,workers=1,workers=2
  python -m benchmarks.round_time --model=fc --clients=3 --rounds=1 --algorithms=flare,fedavg
  # the authors' VGG11 round: 4 clients x 25 steps of 500 images
  python -m benchmarks.round_time --model=vgg11 --clients=4 --examples_per_client=12500 \
      --batch_size=500 --rounds=1 --algorithms=flare --modes=workers=2:files,workers=1:files,inprocess
  python -m benchmarks.round_time --model=fc --clients=3 --rounds=1 --algorithms=flare \
      --modes=local,local:files,workers=1,workers=1:files
"""

import collections
import os
import shutil
import statistics
import tempfile
import time

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import synthetic
from experiments import binary
from tff_flare.algorithms import registry
from tff_flare.execution import modes
from tff_flare.execution import workers
from tff_flare.simulation import loop
from tff_flare.execution import cleanup

_MODEL = flags.DEFINE_enum(
    'model', 'cnn', list(synthetic.MODELS),
    "The model (`benchmarks.synthetic`: the authors' MNIST CNN and FC, VGG, GRU).")
_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients per round.', lower_bound=1)
_EXAMPLES = flags.DEFINE_integer('examples_per_client', 600, 'Images per client.', lower_bound=1)
_BATCH = flags.DEFINE_integer('batch_size', 600, 'Local batch size.', lower_bound=1)
_ROUNDS = flags.DEFINE_integer('rounds', 2, 'Timed rounds per mode.', lower_bound=1)
_ALGORITHMS = flags.DEFINE_list('algorithms', ['flare', 'ec', 'fedavg', 'tff_fedavg'],
                                'Algorithms to time.')
_MODES = flags.DEFINE_list(
    'modes', ['local', 'inprocess'],
    'Modes to time: local, inprocess, workers=N; with :files the client '
    'states are files (see above).')
_THREADS = flags.DEFINE_integer('client_threads', None, 'In-process client threads.', lower_bound=1)
binary.each_one_of(_ALGORITHMS, registry.NAMES, ', '.join(registry.NAMES))


def _is_mode(mode: str) -> bool:
  """local, inprocess or workers=N (N >= 1), each optionally followed by :files."""
  execution, _, files = mode.partition(':')
  count = execution.removeprefix('workers=')
  return files in ('', 'files') and (execution in ('local', 'inprocess') or
                                     (execution.startswith('workers=') and count.isdigit() and
                                      int(count) >= 1))


binary.each_one_of(_MODES, _is_mode, 'local, inprocess or workers=N, each optionally with :files')


def _time_mode(mode, processes, data, initial, rounds):
  """{name: (seconds, bytes per timed round, final trainable weights)} of one mode."""
  ids = data.client_ids
  datasets = [data.create_tf_dataset_for_client(cid) for cid in ids]
  mode, _, files = mode.partition(':')
  directory = tempfile.mkdtemp(prefix='round_time_states_')
  stack = []
  if mode.startswith('workers='):
    loopback = workers.LoopbackWorkers(int(mode.split('=')[1]))
    loopback.start()
    stack.append(loopback)
    execution = modes.build_execution('remote', loopback.addresses)
  else:
    execution = modes.build_execution(mode, num_threads=_THREADS.value)
  try:
    with execution:
      runs = [
          loop.AlgorithmRun(name,
                            process,
                            execution,
                            initial_weights=initial,
                            client_state_dir=os.path.join(directory, name) if files else None,
                            states_written_by_clients=bool(files))
          for name, process in processes.items()
      ]
      seconds, traffic = collections.defaultdict(list), collections.defaultdict(list)
      for round_num in range(rounds + 1):
        for run in runs:
          if execution.stats is not None:
            execution.stats.reset()
          start = time.perf_counter()
          run.run_round(ids, datasets)
          if round_num > 0:
            seconds[run.name].append(time.perf_counter() - start)
            traffic[run.name].append(
                execution.stats.total_bytes() if execution.stats is not None else 0)
      return {
          run.name: (statistics.mean(seconds[run.name]), statistics.mean(traffic[run.name]),
                     [np.asarray(w) for w in run.model_weights().trainable]) for run in runs
      }
  finally:
    for item in stack:
      item.stop()
    shutil.rmtree(directory, ignore_errors=True)


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  model_fn = synthetic.model_fn(_MODEL.value)
  data = synthetic.client_data(_MODEL.value, _CLIENTS.value, _EXAMPLES.value, _BATCH.value)
  hparams = registry.Hyperparameters(client_optimizer=synthetic.client_optimizer(_MODEL.value),
                                     keep_percent=0.001,
                                     tau=0.05,
                                     tau_decay=1.1,
                                     reg_steps=synthetic.MODELS[_MODEL.value].reg_steps,
                                     total_clients=_CLIENTS.value)
  processes = collections.OrderedDict(
      (name, registry.build(name, model_fn, hparams)) for name in _ALGORITHMS.value)
  # One initial model for every mode and algorithm (built after the processes: see
  # `inprocess.ResettableModel` on eager Keras models).
  initial = tf.nest.map_structure(np.asarray,
                                  tff.learning.models.ModelWeights.from_model(model_fn()))
  num_parameters = sum(w.size for w in initial.trainable)
  print(
      f'{_MODEL.value} ({num_parameters:,} parameters), {_CLIENTS.value} '
      f'clients x {_EXAMPLES.value} examples, batch {_BATCH.value}; {_ROUNDS.value} timed '
      f'rounds after one untimed; {len(tf.config.list_physical_devices("GPU"))} GPU(s)',
      flush=True)
  results = collections.OrderedDict()
  for mode in _MODES.value:
    results[mode] = _time_mode(mode, processes, data, initial, _ROUNDS.value)
    print(f'{mode}: done', flush=True)
  reference = results[_MODES.value[0]]
  model_bytes = 4 * num_parameters  # float32
  print(f'\n{"mode":<16} {"algorithm":<11} {"s/round":>8} {"vs " + _MODES.value[0]:>9} '
        f'{"MB/round":>9} {"models/worker":>13} {"max |w - w_" + _MODES.value[0] + "|":>18}')
  for mode, by_name in results.items():
    tff_workers = int(mode.partition(':')[0].split('=')[1]) if mode.startswith('workers=') else 1
    for name, (seconds, traffic, weights) in by_name.items():
      difference = max(float(np.max(np.abs(a - b))) for a, b in zip(weights, reference[name][2]))
      per_worker = f'{traffic / (model_bytes * tff_workers):13.2f}' if traffic else f'{"-":>13}'
      print(f'{mode:<16} {name:<11} {seconds:8.2f} {seconds / reference[name][0]:8.2f}x '
            f'{traffic / 1e6:9.1f} {per_worker} {difference:18.2e}')


if __name__ == '__main__':
  binary.run(main)
