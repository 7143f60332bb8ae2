r"""Seconds per round of FedAvg, EC, FLARE and TFF's FedAvg on the paper's MNIST CNN.

Side by side in one run, interleaved round by round so that machine noise hits every
algorithm alike: 10 clients of 600 synthetic 28x28 images (batch 600, so one local step per
round as in the authors' CNN runs), R = 0.001, the CNN config (lr 0.215, momentum 0.99,
TAU 0.05, c 1.1, p 1). The first round of each process (tracing, worker start) is not timed.
`--model=fc` times the authors' 36M-parameter FC instead (784 features, lr 0.001).

TFF's own overhead is measured in the same run: `FLARE_plain_tf` is the same FLARE round
(the same client update function, `flare.build_flare_client_update`, on the same data, then
the unweighted mean and the server step `s <- s + mean`) driven by a Python loop over plain
`tf.function`s, without TFF; FLARE's cost relative to it is TFF's overhead (target <= 1.15x).
Both start from FLARE's initial weights, and the benchmark prints how far apart their weights are
after the timed rounds (float rounding only).

It also times, outside TFF in plain `tf.function`s, one client's local training and FLARE's
extra client work (the percentile masks plus the error-feedback top-k on the CNN's tensors),
and prints the extra work's share of the local training time.

  python -m benchmarks.round_time --rounds=5
  python -m benchmarks.round_time --model=fc --clients=3 --rounds=1
"""

import collections
import statistics
import time
import types

from absl import app
from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare import ec
from tff_flare import fedavg
from tff_flare import flare
from tff_flare import local_training
from tff_flare import models
from tff_flare import regularizers
from tff_flare import schedules
from tff_flare import tff_baselines

_ROUNDS = flags.DEFINE_integer('rounds', 5, 'Timed rounds per algorithm.', lower_bound=1)
_MODEL = flags.DEFINE_enum('model', 'cnn', ['cnn', 'fc'], "The authors' MNIST CNN or FC.")
_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients per round.', lower_bound=1)
_EXAMPLES = flags.DEFINE_integer('examples_per_client', 600, 'Examples per client.',
                                 lower_bound=1)
_BATCH = flags.DEFINE_integer('batch_size', 600, 'Local batch size.', lower_bound=1)
_KEEP_PERCENT = 0.001


# feature shape, Keras builder and the authors' client learning rate (momentum 0.99).
_MODELS = {'cnn': ((28, 28, 1), models.mnist_cnn, 0.215),
           'fc': ((784,), lambda: models.mnist_fc(), 0.001)}


def _client_datasets(num_clients, num_examples, batch_size):
  rng = np.random.default_rng(0)
  datasets = []
  for _ in range(num_clients):
    x = rng.uniform(size=(num_examples,) + _MODELS[_MODEL.value][0]).astype(np.float32)
    y = rng.integers(0, 10, size=(num_examples, 1)).astype(np.int32)
    datasets.append(tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=x, y=y)).batch(batch_size).cache())
  return datasets


_TAU, _TAU_DECAY, _REG_STEPS = 0.05, 1.1, 1


def _optimizer():
  return tff.learning.optimizers.build_sgdm(_MODELS[_MODEL.value][2], momentum=0.99)


def _processes(model_fn):
  optimizer = _optimizer()
  processes = collections.OrderedDict(
      FedAvg=fedavg.build_fedavg(model_fn, client_optimizer=optimizer),
      EC=ec.build_ec(model_fn, keep_percent=_KEEP_PERCENT, client_optimizer=optimizer),
      FLARE=flare.build_flare(model_fn, keep_percent=_KEEP_PERCENT, client_optimizer=optimizer,
                              tau=_TAU, tau_decay=_TAU_DECAY, reg_steps=_REG_STEPS),
      TFF_FedAvg=tff_baselines.build_tff_fedavg(model_fn, client_optimizer=optimizer))
  # Last (see PlainFlareLoop), from FLARE's initial weights (the FC is not seeded).
  flare_process = processes['FLARE']
  initial = flare_process.get_model_weights(flare_process.initialize()).trainable
  processes['FLARE_plain_tf'] = PlainFlareLoop(model_fn, initial)
  return processes


class PlainFlareLoop:
  """FLARE rounds without TFF: the same client update in a `tf.function`, a Python loop.

  Mimics the `StatefulClientsProcess` interface that `time_rounds` uses. State is
  `(round_num, list of trainable weight tensors)`; a client state is `[accumulator tensors]`.
  """

  has_client_state = True

  def __init__(self, model_fn, initial_trainable):
    # Built after every TFF process and after the validation (which builds models in a
    # graph): graph-built Keras models invalidate eagerly built ones.
    client_update = flare.build_flare_client_update(
        model_fn, keep_percent=_KEEP_PERCENT, reg_steps=_REG_STEPS)
    self._model = model_fn()
    self._initial = [tf.constant(w) for w in initial_trainable]
    optimizer = _optimizer()

    @tf.function
    def client_round(trainable, tau, dataset, accumulator):
      server_weights = tff.learning.models.ModelWeights(trainable=trainable, non_trainable=[])
      output = client_update(self._model, optimizer, server_weights, tau, dataset,
                             collections.OrderedDict(accumulator=accumulator))
      return output.message, output.client_state['accumulator']

    self._client_round = client_round

  def initialize(self):
    return 0, self._initial

  def initial_client_state(self):
    return [tf.zeros_like(w) for w in self._initial]

  def next(self, state, datasets, client_states):
    round_num, trainable = state
    tau = tf.constant(schedules.tau_at_round(_TAU, _TAU_DECAY, round_num), tf.float32)
    messages, new_states = [], []
    for dataset, accumulator in zip(datasets, client_states):
      message, new_accumulator = self._client_round(trainable, tau, dataset, accumulator)
      messages.append(message)
      new_states.append(new_accumulator)
    mean = [tf.add_n(list(parts)) / len(messages) for parts in zip(*messages)]
    trainable = [w + m for w, m in zip(trainable, mean)]
    return types.SimpleNamespace(state=(round_num + 1, trainable), client_states=new_states)


def _max_weight_difference(plain_state, flare_process, flare_state):
  tff_weights = flare_process.get_model_weights(flare_state).trainable
  return max(float(np.max(np.abs(np.asarray(a) - np.asarray(b))))
             for a, b in zip(plain_state[1], tff_weights))


def time_rounds(processes, datasets, num_rounds):
  """Returns ({name: [seconds of each timed round]}, {name: final state}), interleaved."""
  runs = {}
  for name, process in processes.items():
    state = process.initialize()
    client_states = None
    if getattr(process, 'has_client_state', False):
      client_states = [process.initial_client_state()] * len(datasets)
    runs[name] = [process, state, client_states]
  seconds = collections.defaultdict(list)
  for round_num in range(num_rounds + 1):
    for name, run in runs.items():
      process, state, client_states = run
      start = time.perf_counter()
      if client_states is None:
        output = process.next(state, datasets)
      else:
        output = process.next(state, datasets, client_states)
        run[2] = output.client_states
      run[1] = output.state
      if round_num > 0:
        seconds[name].append(time.perf_counter() - start)
  return seconds, {name: run[1] for name, run in runs.items()}


def time_client_work(model_fn, dataset, repeats=10):
  """Seconds of one client's local training, and of FLARE's masks + top-k, in plain TF."""
  model = model_fn()
  optimizer = _optimizer()
  weights = tff.learning.models.ModelWeights.from_model(model)
  initial = tf.nest.map_structure(tf.identity, weights)

  @tf.function
  def train():
    return local_training.train_locally(model, optimizer, initial, dataset).trainable_weights

  rng = np.random.default_rng(1)
  accumulator = [tf.constant(rng.normal(size=v.shape).astype(np.float32))
                 for v in model.trainable_variables]
  delta = [tf.constant(rng.normal(size=v.shape).astype(np.float32))
           for v in model.trainable_variables]
  regularized = [True] * len(accumulator)

  @tf.function
  def masks_and_compression():
    masks = regularizers.flare_masks(accumulator, regularized, 50.0)
    sent, residual = ec.compress_with_error_feedback(delta, accumulator, _KEEP_PERCENT,
                                                     ec.sparsification.TopKRule.AUTHORS)
    return masks, sent, residual

  def median_seconds(fn):
    fn()  # Trace.
    samples = []
    for _ in range(repeats):
      start = time.perf_counter()
      tf.nest.map_structure(lambda t: t.numpy(), fn())
      samples.append(time.perf_counter() - start)
    return statistics.median(samples)

  return median_seconds(train), median_seconds(masks_and_compression)


def main(argv):
  del argv
  tf.get_logger().setLevel('ERROR')
  feature_shape, keras_builder, _ = _MODELS[_MODEL.value]
  model_fn = models.tff_model_fn(keras_builder, feature_shape)
  datasets = _client_datasets(_CLIENTS.value, _EXAMPLES.value, _BATCH.value)
  print(f'MNIST {_MODEL.value.upper()}, {_CLIENTS.value} clients x {_EXAMPLES.value} examples, batch '
        f'{_BATCH.value}, R={_KEEP_PERCENT}%, {_ROUNDS.value} timed rounds (median):')
  processes = _processes(model_fn)
  seconds, states = time_rounds(processes, datasets, _ROUNDS.value)
  medians = {name: statistics.median(s) for name, s in seconds.items()}
  for name, value in medians.items():
    print(f'  {name:<14} {value:7.3f} s/round   ({value / medians["TFF_FedAvg"]:.2f}x '
          f'TFF FedAvg; rounds: {", ".join(f"{s:.3f}" for s in seconds[name])})')
  ratio = medians['FLARE'] / medians['FLARE_plain_tf']
  print(f'FLARE in TFF / the same rounds in plain tf.function: {ratio:.3f}x (TFF overhead '
        f'{100 * (1 - 1 / ratio):.1f}% of a FLARE round); max |weight difference| after '
        f'{_ROUNDS.value + 1} rounds: '
        f'{_max_weight_difference(states["FLARE_plain_tf"], processes["FLARE"], states["FLARE"]):.2e}')
  train_s, extra_s = time_client_work(model_fn, datasets[0])
  print(f'One client, plain tf.function: local training {train_s * 1e3:.1f} ms, FLARE masks '
        f'+ error-feedback top-k {extra_s * 1e3:.1f} ms ({100 * extra_s / train_s:.1f}% of '
        'local training)')


if __name__ == '__main__':
  app.run(main)
