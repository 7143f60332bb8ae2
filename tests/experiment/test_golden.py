"""The golden retrace: our processes reproduce the authors' own evaluations on their stream.

`../shared/golden/authors_cnn_3of10_rounds0-40.json` holds the test loss and accuracy of the
authors' scripts (clients_unavailability/CNN, ported to TF 2.14 / TFF 0.87 by renaming APIs,
run on CPU) after 0, 10, 20, 30 and 40 rounds of their MNIST CNN with 3 of 10 clients a round,
with their client stream (`random.Random(0).sample(range(10), 3)` each round). The same
configuration here (`--client_sampling=python_random`, the npz in Keras order, the
authors' initial model) must give the same evaluations, in both execution modes.

Tolerance (`docs/faithfulness.md` "The golden retrace"): the first evaluation is the same
model and must agree to float rounding; later ones may drift by float rounding of sums added
in another order (TFF's, Eigen's multi-threaded convolution gradients), which momentum-free
single-step rounds at lr 0.215 amplify slowly. The bounds are a few times the largest
difference measured and far below what one changed rule would cause (FLARE moves 0.13 in
accuracy from EC by round 40).

The check reads `../shared` (or `$TFF_FLARE_SHARED`); without it the test is skipped, unless
`TFF_FLARE_REQUIRE_SHARED=1` (set by `.ci/run`) makes its absence a failure.
"""

import json
import os
import pathlib

import tensorflow as tf

from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner

SHARED = pathlib.Path(os.environ.get(
    'TFF_FLARE_SHARED', pathlib.Path(__file__).resolve().parents[3] / 'shared'))
GOLDEN = SHARED / 'golden' / 'authors_cnn_3of10_rounds0-40.json'
MNIST = SHARED / 'datasets' / 'mnist.npz'
# Our algorithm names for theirs.
ALGORITHMS = {'flare': 'flare', 'ec': 'ec', 'ef21_dense': 'ef21_dense_state', 'fedavg': 'fedavg'}
LOSS_TOLERANCE = 1e-4
ACCURACY_TOLERANCE = 2e-3  # 20 of the 10,000 test images.


def golden_config(output_dir: str, execution: str) -> config_lib.ExperimentConfig:
  """The authors' configuration of the golden run (the file's `config`)."""
  return config_lib.ExperimentConfig(
      output_dir=output_dir, task='mnist_cnn', algorithms=tuple(ALGORITHMS), rounds=40,
      clients_per_round=3, client_sampling='python_random', seed=0, keep_percent=0.001,
      tau=0.05, tau_decay=1.1, mask_percentile=50.0, reg_steps=1, local_epochs=1,
      batch_size=600, learning_rate=0.215, momentum=0.99, eval_every=10, checkpoint_every=40,
      source='npz', data_path=str(MNIST), execution=execution)


def our_evaluations(output_dir: pathlib.Path) -> dict[str, list[tuple[int, float, float]]]:
  """`{algorithm: [(after_round, loss, accuracy), ...]}` from a run's metrics.csv."""
  import csv  # pylint: disable=g-import-not-at-top
  with open(output_dir / 'metrics.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  return {name: [(int(r['round']), float(r[f'{name}/eval/loss']),
                  float(r[f'{name}/eval/accuracy']))
                 for r in rows if r.get(f'{name}/eval/loss', '')]
          for name in ALGORITHMS}


class GoldenRetraceTest(tf.test.TestCase):

  def _retrace(self, execution: str):
    if not GOLDEN.exists() or not MNIST.exists():
      if os.environ.get('TFF_FLARE_REQUIRE_SHARED') == '1':
        self.fail(f'The golden check needs {GOLDEN} and {MNIST}.')
      self.skipTest(f'{SHARED} is not here.')
    golden = json.loads(GOLDEN.read_text())
    output = pathlib.Path(self.get_temp_dir()) / execution
    runner.run_experiment(golden_config(str(output), execution), log=lambda _: None)
    ours = our_evaluations(output)
    largest_loss = largest_accuracy = 0.0
    for name, theirs_name in ALGORITHMS.items():
      theirs = golden['evaluations'][theirs_name]
      self.assertEqual([r for r, _, _ in ours[name]], [e['after_round'] for e in theirs])
      for (after, loss, accuracy), expected in zip(ours[name], theirs):
        largest_loss = max(largest_loss, abs(loss - expected['loss']))
        largest_accuracy = max(largest_accuracy, abs(accuracy - expected['accuracy']))
        self.assertAllClose(loss, expected['loss'], rtol=0, atol=LOSS_TOLERANCE,
                            msg=f'{execution} {name} after {after}')
        self.assertAllClose(accuracy, expected['accuracy'], rtol=0, atol=ACCURACY_TOLERANCE,
                            msg=f'{execution} {name} after {after}')
    print(f'golden retrace ({execution}): largest loss difference {largest_loss:.3g}, '
          f'largest accuracy difference {largest_accuracy:.3g}')

  def test_in_process(self):
    self._retrace('inprocess')

  def test_on_tff_local_runtime(self):
    self._retrace('local')


if __name__ == '__main__':
  tf.test.main()
