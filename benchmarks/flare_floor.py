r"""FLARE's round on the FC: its arithmetic floor, in-process, and on TFF's local runtime.

The floor of a round is the sum of its pieces, each timed alone as a `tf.function` on the
same tensors (median of `--repeats`):

  local training   one client's forward/backward and optimizer steps on its data;
  FLARE's pull     the extra of the first step: the penalty gradient `tau m sign(w - s - a)`;
  masks            the median masks `1[|a| > median |a|]` of the accumulator (`regularizers`);
  top-k            the per-tensor cut `TopK_R(u)` of the corrected update, with the residual
                   `u - sent` and the count of `sent` (`sparsification`);
  state updates    the pull's targets `s + a` and the corrected update `u = delta + a`;
  server           the sum of the clients' messages and `s <- s + mean`;

  floor = clients x (training + pull + masks + top-k + state updates) + server.

Then whole FLARE rounds on the same clients (the first round, with tracing, untimed):
in-process (`--execution=inprocess`) and on TFF's local runtime. Every figure comes from this
one run, one after another, so the ratios compare like with like.

  python -m benchmarks.flare_floor                       # FC, 3 clients x 600 images
  python -m benchmarks.flare_floor --model=cnn --clients=10
"""

import collections
import statistics
import time

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import synthetic
from tff_flare.algorithms import flare
from tff_flare.algorithms import local_training
from tff_flare.algorithms import regularizers
from tff_flare.algorithms import selection
from tff_flare.algorithms import sparsification
from tff_flare.execution import modes
from tff_flare.simulation import loop
from tff_flare.execution import cleanup

_MODEL = flags.DEFINE_enum('model', 'fc', ['cnn', 'fc'], "The authors' MNIST CNN or FC.")
_CLIENTS = flags.DEFINE_integer('clients', 3, 'Clients per round.', lower_bound=1)
_EXAMPLES = flags.DEFINE_integer('examples_per_client', 600, 'Images per client.',
                                 lower_bound=1)
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Timings of each piece (median).', lower_bound=1)
_ROUNDS = flags.DEFINE_integer('rounds', 3, 'Timed whole rounds per mode (median).',
                              lower_bound=1)
_THREADS = flags.DEFINE_integer('client_threads', None, 'In-process client threads.')
_MODES = flags.DEFINE_list('modes', ['inprocess', 'local'], 'Modes of the whole rounds.')

_KEEP_PERCENT, _TAU, _TAU_DECAY, _PERCENTILE = 0.001, 0.5, 1.05, 50.0


def _median_seconds(fn, *args) -> float:
  """Median seconds of `fn(*args)`, a `tf.function` whose outputs are all computed but only
  one entry of each is read back (copying them out is not part of a round)."""

  @tf.function
  def run(*args):
    return [tf.reshape(t, [-1])[0] for t in tf.nest.flatten(fn(*args))]

  run(*args)  # Trace and warm up.
  times = []
  for _ in range(_REPEATS.value):
    start = time.perf_counter()
    [t.numpy() for t in run(*args)]  # pylint: disable=expression-not-assigned
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def time_pieces(model_fn, optimizer, dataset, num_clients, native: bool
                ) -> collections.OrderedDict:
  """Seconds of each piece of a FLARE round (see the module docstring).

  With `native`, the selections run as the compiled kernels (as in-process), else as
  TensorFlow ops (as on TFF's runtime).
  """
  model = model_fn()
  weights = tff.learning.models.ModelWeights.from_model(model)
  server = [tf.identity(v) for v in weights.trainable]
  rng = np.random.default_rng(0)
  accumulator = [tf.constant(rng.normal(scale=1e-3, size=v.shape).astype(np.float32))
                 for v in server]
  delta = [tf.constant(rng.normal(scale=1e-3, size=v.shape).astype(np.float32))
           for v in server]
  regularized = [True] * len(server)
  tau = tf.constant(0.1, tf.float32)
  initial = tff.learning.models.ModelWeights(trainable=server, non_trainable=[])

  @tf.function
  def training():
    return local_training.train_locally(model, optimizer, initial, dataset).trainable_weights

  @tf.function
  def pull(weights_now, targets, masks):
    return regularizers.flare_penalty_gradient(weights_now, targets, masks, tau)

  @tf.function
  def masks(accumulator):
    return regularizers.flare_masks(accumulator, regularized, _PERCENTILE)

  @tf.function
  def top_k(update):
    return sparsification.sparsify(update, _KEEP_PERCENT)

  @tf.function
  def state_updates(server, accumulator, delta):
    targets = [s + a for s, a in zip(server, accumulator)]
    update = [d + a for d, a in zip(delta, accumulator)]
    return targets, update

  @tf.function
  def server_step(server, messages):
    mean = [tf.add_n(list(parts)) / float(num_clients) for parts in zip(*messages)]
    return [s + m for s, m in zip(server, mean)]

  with selection.native_kernels(native):  # Traced at the first call, below.
    mask_values = masks(accumulator)
    targets = [s + a for s, a in zip(server, accumulator)]
    update = [d + a for d, a in zip(delta, accumulator)]
    sent = top_k(update).sent
    pieces = collections.OrderedDict(
        training=_median_seconds(training),
        pull=_median_seconds(pull, server, targets, mask_values),
        masks=_median_seconds(masks, accumulator),
        top_k=_median_seconds(top_k, update),
        state_updates=_median_seconds(state_updates, server, accumulator, delta))
    pieces['server'] = _median_seconds(server_step, server, [sent] * num_clients)
  return pieces


def time_rounds(mode, process, data, initial, rounds) -> float:
  """Median seconds of a FLARE round in `mode` (the first round untimed)."""
  ids = data.client_ids
  datasets = [data.create_tf_dataset_for_client(cid) for cid in ids]
  threads = _THREADS.value if mode == 'inprocess' else None
  with modes.build_execution(mode, num_threads=threads) as execution:
    run = loop.AlgorithmRun('flare', process, execution, initial_weights=initial)
    seconds = []
    for round_num in range(rounds + 1):
      start = time.perf_counter()
      run.run_round(ids, datasets)
      if round_num:
        seconds.append(time.perf_counter() - start)
  print(f'{mode}: rounds of {", ".join(f"{t:.2f}" for t in seconds)} s', flush=True)
  return statistics.median(seconds)


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  learning_rate = synthetic.MODELS[_MODEL.value][2]
  model_fn = synthetic.model_fn(_MODEL.value)
  optimizer = tff.learning.optimizers.build_sgdm(learning_rate, momentum=0.99)
  data = synthetic.client_data(_MODEL.value, _CLIENTS.value, _EXAMPLES.value,
                               _EXAMPLES.value)
  process = flare.build_flare(model_fn, keep_percent=_KEEP_PERCENT, client_optimizer=optimizer,
                              tau=_TAU, tau_decay=_TAU_DECAY, mask_percentile=_PERCENTILE,
                              reg_steps=1)
  # Eager models after the process (built in a graph): see `inprocess.ResettableModel`.
  initial = tf.nest.map_structure(np.asarray,
                                  tff.learning.models.ModelWeights.from_model(model_fn()))
  num_parameters = sum(w.size for w in initial.trainable)
  print(f'MNIST {_MODEL.value.upper()} ({num_parameters:,} parameters), FLARE, '
        f'{_CLIENTS.value} clients x {_EXAMPLES.value} images (one step), R = '
        f'{_KEEP_PERCENT} %; {len(tf.config.list_physical_devices("GPU"))} GPU(s)', flush=True)
  dataset = data.create_tf_dataset_for_client(data.client_ids[0])
  native = selection.native_ops() is not None
  columns = collections.OrderedDict(tf_ops=time_pieces(model_fn, optimizer, dataset,
                                                       _CLIENTS.value, native=False))
  if native:
    columns['kernels'] = time_pieces(model_fn, optimizer, dataset, _CLIENTS.value, native=True)
  else:
    print(f'The selection kernels are not built ({selection.NATIVE_LIBRARY}): `make kernels`.')
  print(f'\n{"piece (one client), ms":<24}' + ''.join(f'{name:>10}' for name in columns))
  for piece in columns['tf_ops']:
    print(f'{piece:<24}' + ''.join(f'{1000 * c[piece]:10.1f}' for c in columns.values()))
  floors = {}
  for name, pieces in columns.items():
    per_client = sum(v for k, v in pieces.items() if k != 'server')
    floors[name] = _CLIENTS.value * per_client + pieces['server']
    extra = pieces['masks'] + pieces['top_k']
    print(f'{name}: masks + top-k {1000 * extra:.1f} ms = '
          f'{100 * extra / pieces["training"]:.1f} % of local training; floor of a round '
          f'{floors[name]:.2f} s = {_CLIENTS.value} x {1000 * per_client:.1f} ms + server')
  floor = floors['kernels' if native else 'tf_ops']
  rounds = collections.OrderedDict(
      (mode, time_rounds(mode, process, data, initial, _ROUNDS.value)) for mode in _MODES.value)
  print(f'\n{"mode":<10} {"s/round":>8} {"vs floor":>9}  (floor: {floor:.2f} s)')
  for mode, seconds in rounds.items():
    print(f'{mode:<10} {seconds:8.2f} {seconds / floor:8.2f}x')
  if {'inprocess', 'local'} <= set(rounds):
    print(f'\nTFF local / in-process: {rounds["local"] / rounds["inprocess"]:.2f}x')


if __name__ == '__main__':
  app.run(main)
