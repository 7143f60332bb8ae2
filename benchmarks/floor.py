r"""A round against this machine's floor: the matmul peak, the FLOPs of a step, a bare step.

Everything below is measured in this one run, one figure after another, on the same client
tensors (synthetic uint8 images scaled per batch, as the tasks do):

  matmul      a 4096 x 4096 float32 matmul (2 n^3 FLOPs), the machine's dense peak;
  FLOPs       the model's FLOPs per training step, counted layer by layer (printed);
  bare step   the Keras model itself, one `tf.function` step per batch (forward, backward,
              Keras's SGD with the task's momentum): what a client's steps cost at least;
  local       the project's local training of one client (`local_training.train_locally`
              in a `tf.function`, the steps over the client's batches as tensors);
  pieces      with FLARE: its extra work per client (the median masks of the accumulator,
              the top-k split of the corrected update, `s + a` and `delta + a`) and the
              server's sum and step, each alone (selection kernels when built);
  rounds      whole rounds of each algorithm through the loop's own calls (the round's
              client datasets from the task, `AlgorithmRun.run_round`), in each mode, median
              of `--rounds` after one untimed round (tracing).

The figures are the ratios to `clients x` the bare steps of one client, timed just before
each round (this machine's speed drifts; figures taken side by side drift together), and for
FLARE also to `clients x (bare + pieces) + server`. With several client threads a round can
beat its clients' bare steps run one after another: two clients at once fill the two cores
better than one step does.

  python -m benchmarks.floor                                   # CNN, 10 clients x 600
  python -m benchmarks.floor --model=fc --clients=3
  python -m benchmarks.floor --model=masking_cnn --examples_per_client=500 --batch_size=32 \
      --algorithms=mask_independent
  taskset -c 0 python -m benchmarks.floor --clients=3 --client_threads=1 \
      --algorithms=flare,ec,ef21,fedavg --modes=inprocess       # one core, as evidence runs
"""

import collections
import statistics
import time

from absl import flags
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from benchmarks import synthetic
from experiments import binary
from tff_flare.algorithms import flare
from tff_flare.algorithms import local_training
from tff_flare.algorithms import registry
from tff_flare.algorithms import selection
from tff_flare.algorithms import sparsification
from tff_flare.execution import cleanup
from tff_flare.execution import modes
from tff_flare.simulation import evaluation
from tff_flare.simulation import loop

_MODEL = flags.DEFINE_enum('model', 'cnn', list(synthetic.MODELS), 'The model.')
_CLIENTS = flags.DEFINE_integer('clients', 10, 'Clients per round.', lower_bound=1)
_EXAMPLES = flags.DEFINE_integer('examples_per_client', 600, 'Images per client.', lower_bound=1)
_BATCH = flags.DEFINE_integer('batch_size', 600, 'Local batch size.', lower_bound=1)
_ALGORITHMS = flags.DEFINE_list('algorithms', ['flare'], 'Algorithms of the whole rounds.')
_MODES = flags.DEFINE_list('modes', ['inprocess', 'local'], 'Modes of the whole rounds.')
_ROUNDS = flags.DEFINE_integer('rounds',
                               3,
                               'Timed rounds per algorithm and mode (median).',
                               lower_bound=1)
_REPEATS = flags.DEFINE_integer('repeats', 5, 'Timings of each piece (median).', lower_bound=1)
_THREADS = flags.DEFINE_integer('client_threads', None, 'In-process client threads.', lower_bound=1)
_MATMUL_N = flags.DEFINE_integer('matmul_n', 4096, 'Size of the square matmul.', lower_bound=1)
_EVAL_EXAMPLES = flags.DEFINE_integer(
    'eval_examples',
    0, 'Also time an evaluation of this many test examples (images; the '
    "GRU's sequences, in its batches of 8) against the bare Keras forward passes.",
    lower_bound=0)
binary.each_one_of(_ALGORITHMS, registry.NAMES, ', '.join(registry.NAMES))
binary.each_one_of(_MODES, ('inprocess', 'local'), 'inprocess, local')

_KEEP_PERCENT, _TAU, _TAU_DECAY = 0.001, 0.05, 1.1
# A model built with the project's own layer, and the same model with Keras's (`synthetic`).
_REFERENCE = {'gru': 'gru_keras'}


def _median_seconds(fn, repeats: int) -> float:
  fn()  # Trace and warm up.
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return statistics.median(times)


def _seconds(fn) -> float:
  start = time.perf_counter()
  fn()
  return time.perf_counter() - start


def interleaved_seconds(fns: dict, repeats: int) -> dict[str, list[float]]:
  """Seconds of each `fn`, run in turn (A B C A B C ...) after one untimed call each.

  This machine's speed drifts (a shared VM): figures taken in turn drift together, so their
  ratios, repeat by repeat, hold where figures taken minutes apart would not.
  """
  for fn in fns.values():
    fn()
  seconds: dict[str, list[float]] = {name: [] for name in fns}
  for _ in range(repeats):
    for name, fn in fns.items():
      seconds[name].append(_seconds(fn))
  return seconds


def median_ratio(numerators: list[float], denominators: list[float]) -> float:
  return statistics.median(n / d for n, d in zip(numerators, denominators))


def _read_one(structure) -> None:
  """Waits for every output, copying one entry of each back (not the whole tensors)."""
  for t in tf.nest.flatten(structure):
    tf.reshape(t, [-1])[:1].numpy()


def matmul_fn(n: int):
  """A call of an n x n float32 matmul (`2 n^3` FLOPs), waited for."""
  rng = np.random.default_rng(0)
  a = tf.constant(rng.standard_normal((n, n), np.float32))
  b = tf.constant(rng.standard_normal((n, n), np.float32))
  matmul = tf.function(lambda a, b: tf.linalg.matmul(a, b)[0, 0])
  return lambda: matmul(a, b).numpy()


def step_flops(keras_model: tf.keras.Model, batch_size: int) -> tuple[float, list[str]]:
  """FLOPs of one training step on `batch_size` examples, and the arithmetic, per layer.

  A layer's forward pass costs `F = 2 x multiply-adds` per example (Dense: `in x out` per
  position, a sequence's positions each; Conv2D: `H_out x W_out x C_out x k_h x k_w x C_in`;
  GRU: `3 x (D + H) x H` per character, the three gates' input and recurrent kernels); the
  backward pass costs `F` for the weight gradient and `F` for the input gradient, which the
  first layer with weights does not need (an embedding's input gradient is not computed).
  Biases, activations, pooling, embedding lookups, the loss and the optimizer are left out
  (under 1 % here).
  """
  total, lines = 0.0, []
  first = True
  for layer in keras_model.layers:
    if isinstance(layer, tf.keras.layers.Dense):
      fan_in, fan_out = layer.kernel.shape
      positions = int(np.prod(layer.output.shape[1:-1]))
      macs = positions * fan_in * fan_out
      what = f'Dense {fan_in}x{fan_out}' + (f' at {positions} positions' if positions > 1 else
                                            '') + f': {positions}*{fan_in}*{fan_out}'
    elif isinstance(layer, tf.keras.layers.Conv2D):
      kh, kw, c_in, c_out = layer.kernel.shape
      _, h_out, w_out, _ = layer.output.shape
      macs = h_out * w_out * c_out * kh * kw * c_in
      what = f'Conv2D {kh}x{kw}x{c_in}->{c_out} at {h_out}x{w_out}: {h_out}*{w_out}*{c_out}*{kh}*{kw}*{c_in}'
    elif isinstance(layer, tf.keras.layers.GRU):
      inputs, units = layer.cell.kernel.shape[0], layer.cell.units
      steps = layer.output.shape[1]
      macs = steps * 3 * (inputs + units) * units
      what = f'GRU {inputs}->{units} over {steps} steps: {steps}*3*({inputs}+{units})*{units}'
    elif isinstance(layer, tf.keras.layers.Embedding):
      first = False  # Its input needs no gradient, but the next layer's input does.
      continue
    else:
      continue
    forward = 2 * macs
    passes = 2 if first else 3
    first = False
    total += passes * forward
    lines.append(f'  {what} = {macs:,} MACs; x2 = {forward:,} FLOPs forward, x{passes} with '
                 f'backward = {passes * forward:,} per example')
  lines.append(f'  step = {total:,.0f} FLOPs per example x {batch_size} = '
               f'{total * batch_size / 1e9:.2f} GFLOP')
  return total * batch_size, lines


def bare_client_fn(model: str, batches: list):
  """One client's steps as a bare Keras model (one `tf.function` call a batch), waited for."""
  spec = synthetic.MODELS[model]
  keras_model = spec.keras_builder()
  optimizer = tf.keras.optimizers.legacy.SGD(spec.learning_rate, momentum=spec.momentum)
  loss_fn = synthetic.loss_fn(model)

  @tf.function
  def step(x, y):
    with tf.GradientTape() as tape:
      loss = loss_fn(y, keras_model(x, training=True))
    gradients = tape.gradient(loss, keras_model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, keras_model.trainable_variables))
    return loss

  def client():
    for batch in batches:
      loss = step(batch['x'], batch['y'])
    loss.numpy()

  return client


def evaluation_fns(model: str, num_examples: int) -> dict:
  """The project's evaluation (`evaluation.build_evaluate_fn`) of a test set and, on the same
  batches, a bare Keras forward pass per batch (inference: dropout off, no loss)."""
  spec = synthetic.MODELS[model]
  batch_size = 8 if spec.text else 500  # The GRU's fixed batch; the image tasks' test batch.
  test = synthetic.client_data(model, 1, num_examples,
                               batch_size).create_tf_dataset_for_client('client_0')
  evaluate = evaluation.build_evaluate_fn(synthetic.model_fn(model), test)
  weights = tff.learning.models.ModelWeights.from_model(synthetic.model_fn(model)())
  weights = tf.nest.map_structure(lambda v: np.asarray(v.numpy()), weights)
  keras_model = spec.keras_builder()
  forward = tf.function(lambda x: keras_model(x, training=False))
  batches = [b['x'] for b in test]

  def bare():
    if spec.text:
      keras_model.reset_states()
    for x in batches:
      output = forward(x)
    _read_one(output)

  return dict(evaluate=lambda: evaluate(weights), bare_forward=bare)


def local_training_fn(model: str, dataset: tf.data.Dataset):
  """`train_locally` on one client's dataset (a `tf.function`, from the model's weights)."""
  model_fn = synthetic.model_fn(model)
  tff_model = model_fn()
  optimizer = synthetic.client_optimizer(model)
  initial = tf.nest.map_structure(tf.convert_to_tensor,
                                  tff.learning.models.ModelWeights.from_model(tff_model))

  @tf.function
  def train(dataset):
    return local_training.train_locally(tff_model, optimizer, initial, dataset).trainable_weights

  return lambda: _read_one(train(dataset))


def flare_pieces(model: str, num_clients: int) -> collections.OrderedDict:
  """Seconds of FLARE's extra work per client, and of the server's step, each alone."""
  server = [tf.constant(w) for w in synthetic.model_fn(model)().trainable_variables]
  rng = np.random.default_rng(0)
  accumulator = [
      tf.constant(rng.normal(scale=1e-3, size=v.shape).astype(np.float32)) for v in server
  ]
  delta = [tf.constant(rng.normal(scale=1e-3, size=v.shape).astype(np.float32)) for v in server]
  regularized = [True] * len(server)
  masks = tf.function(lambda a: flare.flare_masks(a, regularized, 50.0))
  top_k = tf.function(lambda u: sparsification.sparsify(u, _KEEP_PERCENT))
  state_updates = tf.function(lambda s, a, d:
                              ([x + y for x, y in zip(s, a)], [x + y for x, y in zip(d, a)]))
  server_step = tf.function(
      lambda s, messages:
      [w + tf.add_n(list(parts)) / float(num_clients) for w, parts in zip(s, zip(*messages))])
  repeats = _REPEATS.value
  with selection.native_kernels():  # Traced at the first call, below.
    update = [d + a for d, a in zip(delta, accumulator)]
    sent = top_k(update).sent
    pieces = collections.OrderedDict(
        masks=_median_seconds(lambda: _read_one(masks(accumulator)), repeats),
        top_k=_median_seconds(lambda: _read_one(top_k(update)), repeats),
        state_updates=_median_seconds(lambda: _read_one(state_updates(server, accumulator, delta)),
                                      repeats))
    pieces['server'] = _median_seconds(lambda: _read_one(server_step(server, [sent] * num_clients)),
                                       repeats)
  return pieces


def build_processes(names, model_fn) -> dict:
  spec = synthetic.MODELS[_MODEL.value]
  hparams = registry.Hyperparameters(
      client_optimizer=synthetic.client_optimizer(_MODEL.value),
      keep_percent=_KEEP_PERCENT,
      tau=_TAU,
      tau_decay=_TAU_DECAY,
      reg_steps=spec.reg_steps,
      total_clients=_CLIENTS.value,
      # The GRU's embedding is not regularized (the authors'; tasks.registry).
      is_regularized=(lambda name: 'embedding' not in name) if spec.text else None)
  return collections.OrderedDict((name, registry.build(name, model_fn, hparams)) for name in names)


def round_seconds(mode: str, processes, task, initial, bare_client,
                  rounds: int) -> dict[str, tuple[float, float]]:
  """{algorithm: (median s/round, median of round / (clients x bare client))} in `mode`.

  Each timed round (after one untimed, with tracing) follows a bare client's steps, timed
  just before it.
  """
  ids = task.train_data.client_ids
  threads = _THREADS.value if mode == 'inprocess' else None
  results = {}
  with modes.build_execution(mode, num_threads=threads) as execution:
    runs = [
        loop.AlgorithmRun(name, process, execution, initial_weights=initial)
        for name, process in processes.items()
    ]
    seconds, bare = collections.defaultdict(list), collections.defaultdict(list)
    for round_num in range(rounds + 1):
      for run in runs:
        bare_seconds = _seconds(bare_client)
        round_time = _seconds(
            lambda: run.run_round(ids, task.client_datasets(ids, round_num)))  # noqa: B023
        if round_num:
          seconds[run.name].append(round_time)
          bare[run.name].append(len(ids) * bare_seconds)
  for name, values in seconds.items():
    print(
        f'{mode} {name}: rounds of {", ".join(f"{t:.3f}" for t in values)} s, '
        f'{len(ids)} x bare before each {", ".join(f"{t:.3f}" for t in bare[name])} s',
        flush=True)
    results[name] = (statistics.median(values), median_ratio(values, bare[name]))
  return results


def main(argv):
  del argv
  cleanup.install_process_cleanup()
  model, clients = _MODEL.value, _CLIENTS.value
  task = synthetic.task(model, clients, _EXAMPLES.value, _BATCH.value)
  # The processes first: a Keras model built eagerly is invalidated by a model built later in
  # a `tf.Graph`, as every process builder does (`inprocess.ResettableModel`).
  processes = build_processes(_ALGORITHMS.value, task.model_fn)
  dataset = task.train_data.create_tf_dataset_for_client(task.train_data.client_ids[0])
  batches = list(dataset)
  keras_model = synthetic.MODELS[model].keras_builder()
  flops_per_batch = [step_flops(keras_model, len(b['y'])) for b in batches]
  client_flops = sum(f for f, _ in flops_per_batch)
  unit = 'sequences, batch 8' if synthetic.MODELS[model].text else f'images, batch {_BATCH.value}'
  print(f'{model}: {keras_model.count_params():,} parameters; {clients} clients x '
        f'{_EXAMPLES.value} {unit} ({len(batches)} steps a client); '
        f'{len(tf.config.list_physical_devices("GPU"))} GPU(s)')
  print('FLOPs of a step (first batch):\n' + '\n'.join(flops_per_batch[0][1]))
  bare_client = bare_client_fn(model, batches)
  figures = dict(matmul=matmul_fn(_MATMUL_N.value),
                 bare=bare_client,
                 local=local_training_fn(model, dataset))
  reference = _REFERENCE.get(model)
  if reference:  # The same model with Keras's own layer, timed in turn with the others.
    figures['reference'] = bare_client_fn(reference, batches)
  timed = interleaved_seconds(figures, _REPEATS.value)
  matmul_rate = 2 * _MATMUL_N.value**3 / statistics.median(timed['matmul'])
  bare = statistics.median(timed['bare'])
  share = lambda key: 100 * median_ratio([client_flops / b for b in timed[key]],
                                         [2 * _MATMUL_N.value**3 / m for m in timed['matmul']])
  print(f'matmul {_MATMUL_N.value}^2 float32: {matmul_rate / 1e9:.1f} GFLOP/s')
  print(f'one client ({client_flops / 1e9:.2f} GFLOP, {len(batches)} steps): bare Keras steps '
        f'{1000 * bare:.1f} ms ({client_flops / bare / 1e9:.1f} GFLOP/s = {share("bare"):.0f} % '
        f'of the matmul); local training {1000 * statistics.median(timed["local"]):.1f} ms '
        f'({median_ratio(timed["local"], timed["bare"]):.2f}x bare)')
  if reference:
    keras_bare = statistics.median(timed['reference'])
    print(f'{reference} (Keras\'s own layer): bare steps {1000 * keras_bare:.1f} ms '
          f'({share("reference"):.0f} % of the matmul); the bare step above is '
          f'{median_ratio(timed["reference"], timed["bare"]):.2f}x faster; at the matmul rate a '
          f'client would take {1000 * client_flops / matmul_rate:.1f} ms')
  if _EVAL_EXAMPLES.value:
    timed_eval = interleaved_seconds(evaluation_fns(model, _EVAL_EXAMPLES.value), _REPEATS.value)
    print(f'evaluation of {_EVAL_EXAMPLES.value} examples: '
          f'{statistics.median(timed_eval["evaluate"]):.3f} s; bare Keras forward passes '
          f'{statistics.median(timed_eval["bare_forward"]):.3f} s '
          f'({median_ratio(timed_eval["evaluate"], timed_eval["bare_forward"]):.2f}x bare)')
  extra = server = None
  if 'flare' in _ALGORITHMS.value:
    pieces = flare_pieces(model, clients)
    extra = pieces['masks'] + pieces['top_k'] + pieces['state_updates']
    server = pieces['server']
    print('FLARE pieces, ms: ' + ', '.join(f'{k} {1000 * v:.1f}' for k, v in pieces.items()) +
          f' (per client {1000 * extra:.1f}, the server once a round)')
  initial = tf.nest.map_structure(np.asarray,
                                  tff.learning.models.ModelWeights.from_model(task.model_fn()))
  results = collections.OrderedDict(
      (mode, round_seconds(mode, processes, task, initial, bare_client, _ROUNDS.value))
      for mode in _MODES.value)
  versus_reference = f' {"per batch vs " + reference:>22}' if reference else ''
  print(f'\n{"mode":<10} {"algorithm":<18} {"s/round":>8} {"vs bare":>8} {"vs bare+pieces":>15}'
        f'{versus_reference}   (bare: {clients} x a bare client, timed before each round)')
  for mode, by_name in results.items():
    for name, (seconds, ratio) in by_name.items():
      with_pieces = ''
      if name == 'flare' and extra is not None:
        # The bare part of the floor scales with the bare client timed beside the round.
        floor = seconds / ratio + clients * extra + server
        with_pieces = f'{seconds / floor:14.2f}x'
      per_batch = ''
      if reference:  # A round's seconds per batch against a batch of Keras's bare steps.
        per_batch = f'{seconds / clients / keras_bare:21.3f}x'
      print(f'{mode:<10} {name:<18} {seconds:8.3f} {ratio:7.2f}x {with_pieces:>15}{per_batch}')


if __name__ == '__main__':
  binary.run(main)
