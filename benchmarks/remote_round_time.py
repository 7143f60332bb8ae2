r"""Seconds per round and bytes per round on 1, 2, 4 loopback TFF workers versus local.

For the authors' MNIST CNN (10 clients x 600 images, batch 600, one local step) or FC
(`--model=fc`), FLARE and FedAvg from one initial model, on synthetic uint8 images scaled
per batch (what the experiment binary sends). Settings, each in this one run:

  local      TFF's local runtime: whole computations on one worker (`remote.single_worker_execution`,
             the context TFF's default builds, with its traffic counted);
  workers=N  TFF's mergeable context over N loopback workers (`remote.remote_execution`):
             the round's clients split in N subrounds; FLARE's round in two phases.

`FLARE_1comp` (on workers) is FLARE's `next` run as one computation, which TFF's split makes
train every client twice; FLARE is run as its two `RoundPhases`.

Per setting and algorithm: seconds per round (mean of the timed rounds; the first round, with
tracing, is not timed), the bytes that crossed between the driver and its workers per round
(serialized requests + responses), and the largest weight difference to the local run after
all rounds. On one machine the workers share its cores: what this measures is the cost of
the split and of the driver's traffic, not a speed-up.

  python -m benchmarks.remote_round_time --workers=1,2,4
  python -m benchmarks.remote_round_time --model=fc --clients=3 --workers=1,2 --rounds=1
"""

import collections
import statistics
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare import fedavg
from tff_flare import flare
from tff_flare import models
from tff_flare import remote
from tff_flare import tasks
from tff_flare import training_loop
from tff_flare import worker

_MODEL = flags.DEFINE_enum('model', 'cnn', ['cnn', 'fc'], "The authors' MNIST CNN or FC.")
_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients per round.', lower_bound=1)
_EXAMPLES = flags.DEFINE_integer('examples_per_client', 600, 'Images per client.',
                                 lower_bound=1)
_ROUNDS = flags.DEFINE_integer('rounds', 2, 'Timed rounds per setting.', lower_bound=1)
_WORKERS = flags.DEFINE_list('workers', ['1', '2', '4'], 'Loopback worker counts to time.')
_ONE_COMPUTATION = flags.DEFINE_bool(
    'one_computation', True, 'On workers, also time FLARE_1comp: FLARE\'s `next` run as one '
    'computation (clients train twice) instead of its two phases.')

# feature shape, Keras builder, the authors' client learning rate (momentum 0.99).
_MODELS = {'cnn': ((28, 28, 1), models.mnist_cnn, 0.215),
           'fc': ((784,), lambda: models.mnist_fc(), 0.001)}


def _client_data(num_clients: int, num_examples: int) -> tff.simulation.datasets.ClientData:
  shape = _MODELS[_MODEL.value][0]
  rng = np.random.default_rng(0)
  data = {f'c{i}': collections.OrderedDict(
      x=rng.integers(0, 256, size=(num_examples,) + shape, dtype=np.uint8),
      y=rng.integers(0, 10, size=(num_examples, 1)).astype(np.int32))
          for i in range(num_clients)}
  return tff.simulation.datasets.TestClientData(data).preprocess(
      lambda d: d.batch(num_examples).map(tasks.scale_batch))


class _OneComputationRun(training_loop.AlgorithmRun):
  """FLARE's round as its one `next` computation even on workers (no `RoundPhases`).

  TFF's split then computes every client's update twice (once for the aggregate, once for
  the CLIENTS-placed new states): what the two phases avoid.
  """

  def run_round(self, client_ids, datasets):
    output = self.process.next(self.state, list(datasets), self.store.get_many(client_ids))
    self.store.update(client_ids, output.client_states)
    self.state = output.state
    return output.metrics


def _runs(model_fn, initial_weights=None, one_computation=False):
  optimizer = tff.learning.optimizers.build_sgdm(_MODELS[_MODEL.value][2], momentum=0.99)
  processes = collections.OrderedDict(
      FLARE=flare.build_flare(model_fn, keep_percent=0.001, client_optimizer=optimizer,
                              tau=0.05, tau_decay=1.1, reg_steps=1),
      FedAvg=fedavg.build_fedavg(model_fn, client_optimizer=optimizer))
  runs = []
  for name, process in processes.items():
    runs.append(training_loop.AlgorithmRun(name, process, initial_weights=initial_weights))
    if initial_weights is None:  # Every run starts from the first one's initial model.
      initial_weights = runs[0].model_weights()
  if one_computation:
    runs.append(_OneComputationRun('FLARE_1comp', processes['FLARE'],
                                   initial_weights=initial_weights))
  return runs


def _time_setting(runs, client_data, stats, num_rounds):
  """{name: (seconds per timed round, bytes per timed round)}; runs are trained in place."""
  ids = client_data.client_ids
  datasets = [client_data.create_tf_dataset_for_client(cid) for cid in ids]
  seconds, traffic = collections.defaultdict(list), collections.defaultdict(list)
  for round_num in range(num_rounds + 1):
    for run in runs:
      stats.reset()
      start = time.perf_counter()
      run.run_round(ids, datasets)
      if round_num > 0:
        seconds[run.name].append(time.perf_counter() - start)
        traffic[run.name].append(stats.total_bytes())
  return {name: (statistics.mean(seconds[name]), statistics.mean(traffic[name]))
          for name in seconds}


def _max_difference(runs, reference_runs):
  """{name: largest weight difference to the local run of the same algorithm}."""
  reference = {run.name: run for run in reference_runs}
  reference['FLARE_1comp'] = reference['FLARE']
  return {run.name: max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
                        for a, b in zip(run.model_weights().trainable,
                                        reference[run.name].model_weights().trainable))
          for run in runs}


def main(argv):
  del argv
  worker_counts = [int(n) for n in _WORKERS.value]
  feature_shape, keras_builder, _ = _MODELS[_MODEL.value]
  model_fn = models.tff_model_fn(keras_builder, feature_shape)
  client_data = _client_data(_CLIENTS.value, _EXAMPLES.value)
  print(f'MNIST {_MODEL.value.upper()}, {_CLIENTS.value} clients x {_EXAMPLES.value} images '
        f'(one batch), {_ROUNDS.value} timed rounds after one untimed; '
        f'{len(tf.config.list_physical_devices("CPU"))} CPU device(s), '
        f'{len(tf.config.list_physical_devices("GPU"))} GPU(s)', flush=True)
  results = collections.OrderedDict()
  with worker.LoopbackWorkers(1) as local_worker:
    with remote.single_worker_execution(local_worker.addresses[0]) as execution:
      local_runs = _runs(model_fn)
      initial = local_runs[0].model_weights()
      results['local'] = _time_setting(local_runs, client_data, execution.stats, _ROUNDS.value)
  differences = {'local': {run.name: 0.0 for run in local_runs}}
  for count in worker_counts:
    with worker.LoopbackWorkers(count) as workers:
      with remote.remote_execution(workers.addresses) as execution:
        runs = _runs(model_fn, initial, one_computation=_ONE_COMPUTATION.value)
        setting = f'workers={count}'
        results[setting] = _time_setting(runs, client_data, execution.stats, _ROUNDS.value)
        differences[setting] = _max_difference(runs, local_runs)
  print(f'\n{"setting":<10} {"algorithm":<11} {"s/round":>8} {"vs local":>8} '
        f'{"MB/round":>9} {"max |w - w_local|":>18}')
  for setting, by_name in results.items():
    for name, (seconds, traffic) in by_name.items():
      ratio = seconds / results['local'][name.replace('_1comp', '')][0]
      print(f'{setting:<10} {name:<11} {seconds:8.2f} {ratio:7.2f}x {traffic / 1e6:9.1f} '
            f'{differences[setting][name]:18.2e}')


if __name__ == '__main__':
  app.run(main)
