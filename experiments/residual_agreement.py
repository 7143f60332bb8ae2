"""Does FLARE's pull point downhill? A client's residual against a large-batch gradient.

  python -m experiments.residual_agreement --run_dir=RUN [--round=N] [--reference_examples=2500]

FLARE pulls a client's weights, on its first p local steps, toward `s + a` (the server model
`s`, the client's residual `a`) on the entries where `|a|` exceeds its tensor's median
(`flare.flare_masks`): at `w = s` the pull moves those entries by `+eta tau_r sign(a)`. That
helps where `sign(a)` is the sign of descent of the client's loss at `s`. From a FLARE run's
checkpoint (`--round`, default the latest), for each client, over the masked entries (an EC
run's residual too, under FLARE's mask: the entries FLARE's rule would pull):

  * `residual`: the fraction where `sign(a) = sign(-g)`, `g` the client's gradient at `s`
    over `--reference_examples` of its examples in batches of `--reference_batch` (the
    authors' batch is 500), summed;
  * `halves`: the same fraction between the gradients of the two halves of those examples:
    how stable the reference's own signs are (its agreement with itself, at half the size);
  * `minibatch`: the same fraction for the gradient of one batch of the run's own size, the
    mean over the first `--minibatches` batches of the round's stream: how well one step the
    run takes agrees with the large-batch direction; `minibatch_nonzero`, the share of the
    masked entries such a gradient moves at all;
  * `cosine`: the cosine of `a` and `-g` on the masked entries.

A fraction counts the masked entries where both signs are nonzero; a coin agrees on 0.5. The numbers go to `RUN/residual_agreement_<round>.json`
with the command; the run and its checkpoint are read, not changed.
"""

import dataclasses
import json
import pathlib
import sys

from absl import flags
import numpy as np
import tensorflow as tf

from experiments import binary
from experiments import spec
from tff_flare.algorithms import flare
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import run_files
from tff_flare.experiment import runner
from tff_flare.simulation import checkpoints
from tff_flare.simulation import files

_RUN_DIR = binary.path_flag(flags.DEFINE_string('run_dir', None,
                                                'A run of FLARE or EC (required).'))
_ROUND = flags.DEFINE_integer('round', None, 'The checkpoint (default: the latest).', lower_bound=1)
_REFERENCE_EXAMPLES = flags.DEFINE_integer('reference_examples',
                                           2500,
                                           "Each client's examples in its reference gradient.",
                                           lower_bound=1)
_REFERENCE_BATCH = flags.DEFINE_integer('reference_batch',
                                        500,
                                        'Batch size of the reference gradient.',
                                        lower_bound=1)
_MINIBATCHES = flags.DEFINE_integer('minibatches',
                                    20,
                                    "Batches of the run's size whose agreement is averaged.",
                                    lower_bound=1)


def sign_agreement(direction, reference, masks) -> float:
  """The fraction of the masked entries (mask 1, both values nonzero) where `direction` and
  `reference` have the same sign; NaN without such entries. Lists of arrays alike."""
  agree = count = 0
  for d, r, m in zip(direction, reference, masks):
    counted = (np.asarray(m) > 0) & (np.asarray(r) != 0) & (np.asarray(d) != 0)
    agree += int(np.sum(np.sign(d)[counted] == np.sign(r)[counted]))
    count += int(np.sum(counted))
  return agree / count if count else float('nan')


def masked_cosine(direction, reference, masks) -> float:
  """The cosine of `direction` and `reference` restricted to the masked entries."""
  d = np.concatenate([np.asarray(x)[np.asarray(m) > 0] for x, m in zip(direction, masks)])
  r = np.concatenate([np.asarray(x)[np.asarray(m) > 0] for x, m in zip(reference, masks)])
  norm = float(np.linalg.norm(d) * np.linalg.norm(r))
  return float(np.dot(d.astype(np.float64), r)) / norm if norm else float('nan')


# The algorithms whose clients keep a residual `a` (the top-k error feedback's accumulator).
WITH_RESIDUAL = ('flare', 'ec', 'ec_fedprox', 'ec_ffl')


def _config(run_dir: pathlib.Path) -> tuple[config_lib.ExperimentConfig, str]:
  """The run's configuration and its algorithm with a residual (the first one)."""
  recorded = run_files.config(run_dir)
  if recorded is None:
    raise binary.BadInput(f'{run_dir} holds no run (no config.json).')
  names = {f.name for f in dataclasses.fields(config_lib.ExperimentConfig)}
  config = config_lib.ExperimentConfig(
      **{k: tuple(v) if isinstance(v, list) else v for k, v in recorded.items() if k in names})
  with_residual = [a for a in config.algorithms if a in WITH_RESIDUAL]
  if not with_residual:
    raise binary.BadInput(f'{run_dir} trained {", ".join(config.algorithms)}: none keeps a '
                          f'residual (they are {", ".join(WITH_RESIDUAL)}).')
  return config, with_residual[0]


def measure(run_dir: pathlib.Path, round_num: int | None, *, reference_examples: int,
            reference_batch: int, minibatches: int) -> dict:
  """The agreements of every client of the run at checkpoint `round_num` (see the module
  docstring); `None`: the latest checkpoint."""
  config, algorithm = _config(run_dir)
  saved = checkpoints.saved_rounds(run_dir / 'checkpoints')
  if not saved:
    raise binary.BadInput(f'{run_dir} has no checkpoint.')
  round_num = saved[-1] if round_num is None else round_num
  if round_num not in saved:
    raise binary.BadInput(f'{run_dir} has no checkpoint after round {round_num - 1} '
                          f'(its checkpoints: after rounds {[r - 1 for r in saved]}).')
  server, clients = checkpoints.read_checkpoint(run_dir / 'checkpoints', round_num, algorithm)
  task = runner.build_task(config)
  reference_task = runner.build_task(
      dataclasses.replace(config, local_steps=None, batch_size=reference_batch, local_epochs=1))
  model = task.model_fn()
  trainable = model.trainable_variables
  num_tensors = len(trainable)
  client_ids = list(task.train_data.client_ids)
  if len(clients) != num_tensors * len(client_ids):
    raise binary.BadInput(f'The checkpoint holds {len(clients)} client arrays; {len(client_ids)} '
                          f'clients of {num_tensors} tensors need {num_tensors * len(client_ids)}.')
  for variable, value in zip(trainable, server[:num_tensors]):
    variable.assign(value)  # Raises where the checkpoint is another model's.

  @tf.function
  def gradient(batch):
    with tf.GradientTape() as tape:
      loss = model.forward_pass(batch, training=True).loss
    return tape.gradient(loss, trainable)

  percentile = (config.mask_percentile
                if config.mask_percentile is not None else flare.MASK_PERCENTILE.default)
  regularized = [True] * num_tensors
  predicate = task.hparams.get('is_regularized')
  if predicate is not None:
    regularized = [bool(predicate(v.name)) for v in trainable]
  stream = (task.round_train_data(round_num)
            if task.round_train_data is not None else task.train_data)
  per_client = {}
  for i, client_id in enumerate(client_ids):
    residual = clients[i * num_tensors:(i + 1) * num_tensors]
    masks = [
        m.numpy()
        for m in flare.flare_masks([tf.constant(a) for a in residual], regularized, percentile)
    ]
    halves = [[np.zeros(v.shape, np.float64) for v in trainable] for _ in range(2)]
    examples = batches = 0
    for batch in reference_task.train_data.create_tf_dataset_for_client(client_id):
      if examples >= reference_examples:
        break
      for total, g in zip(halves[batches % 2], gradient(batch)):
        total -= tf.convert_to_tensor(g).numpy()  # The descent direction, -g.
      examples += int(tf.shape(batch['y'])[0])
      batches += 1
    reference = [a + b for a, b in zip(*halves)]
    small, moved = [], []
    for batch in stream.create_tf_dataset_for_client(client_id).take(minibatches):
      descent = [-tf.convert_to_tensor(g).numpy() for g in gradient(batch)]
      small.append(sign_agreement(descent, reference, masks))
      moved.append(
          sum(int(np.sum((d != 0) & (m > 0))) for d, m in zip(descent, masks)) /
          max(1, sum(int(np.sum(m > 0)) for m in masks)))
    per_client[client_id] = dict(residual=sign_agreement(residual, reference, masks),
                                 halves=sign_agreement(halves[0], halves[1], masks),
                                 minibatch=float(np.mean(small)),
                                 minibatch_nonzero=float(np.mean(moved)),
                                 cosine=masked_cosine(residual, reference, masks),
                                 masked_entries=int(sum(int(np.sum(m)) for m in masks)),
                                 reference_examples=examples)
  return dict(algorithm=algorithm,
              round=round_num,
              clients=per_client,
              mean={key: _mean(per_client, key) for key in _MEASURES})


_MEASURES = ('residual', 'halves', 'minibatch', 'minibatch_nonzero', 'cosine')


def _mean(per_client: dict, key: str) -> float:
  return float(np.mean([measured[key] for measured in per_client.values()]))


def main(argv):
  del argv
  run_dir = pathlib.Path(_RUN_DIR.value or '')
  if not _RUN_DIR.value or not run_dir.is_dir():
    raise binary.BadInput(f'--run_dir must name a run directory, got {_RUN_DIR.value!r}.')
  found = measure(run_dir,
                  _ROUND.value,
                  reference_examples=_REFERENCE_EXAMPLES.value,
                  reference_batch=_REFERENCE_BATCH.value,
                  minibatches=_MINIBATCHES.value)
  found['command'] = 'python -m experiments.residual_agreement ' + ' '.join(sys.argv[1:])
  output = run_dir / f'{spec.RESIDUAL_AGREEMENT_PREFIX}{found["round"]}.json'
  files.write_file(output, json.dumps(found, indent=2) + '\n')
  mean = found['mean']
  print(
      f'{output}: {found["algorithm"]} after round {found["round"] - 1}, over the masked entries: sign(a) agrees '
      f'with the large-batch descent on {mean["residual"]:.3f}, the two halves of the '
      f'reference on {mean["halves"]:.3f}, one batch of the run on {mean["minibatch"]:.3f} '
      f'(which moves {mean["minibatch_nonzero"]:.3f} of them); cosine(a, -g) '
      f'{mean["cosine"]:.3f} (a coin: 0.5).')


if __name__ == '__main__':
  binary.run(main)
