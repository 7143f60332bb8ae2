"""The golden retrace: our processes reproduce the authors' own evaluations on their stream.

`../shared/golden/authors_cnn_3of10_rounds0-40.json` holds the test loss and accuracy of the
authors' scripts (clients_unavailability/CNN, ported to TF 2.14 / TFF 0.87 by renaming APIs,
run on CPU) after 0, 10, 20, 30 and 40 rounds of their MNIST CNN with 3 of 10 clients a round,
with their client stream (`random.Random(0).sample(range(10), 3)` each round). The same
configuration here (`--client_sampling=python_random`, the npz in Keras order, the
authors' initial model) must give the same evaluations: in-process every algorithm to round
20 (its tolerance tells EC from EF21 from round 10), on TFF's local runtime FLARE, the
algorithm with every part, to round 30 (every other algorithm on TFF's runtime equals it
in-process: tests/execution/test_inprocess.py), which keeps the suite's longest tests near a
minute; `TFF_FLARE_GOLDEN_ROUNDS=40` retraces the file's last evaluation too in both modes
(both pass it), `TFF_FLARE_GOLDEN_LOCAL=all` FLARE, EC and EF21 on TFF's runtime (they pass;
its tolerance tells EC from EF21 from round 30).

Tolerance (`docs/faithfulness.md` "The golden retrace"), per execution mode, five times the
largest difference measured (at commit 7ae6c00, both modes, rounds 0-40): in-process 1.9e-6
in loss and 0 in accuracy, TFF's local runtime 8.3e-6 and 1e-4 (FedAvg after 40 rounds: its
sums are added in another order). The authors' EC and EF21 (dense state) differ by 1.1e-5,
3.4e-5, 7.0e-5 and 9.4e-5 in loss after 10, 20, 30 and 40 rounds, so at these tolerances
the check tells them apart (asserted: where they differ by more than the tolerance, our EC is
nearer their EC and our EF21 nearer their EF21); so it does an EC stopped after round 0
(9.5e-5 by round 10).

The check reads `../shared` (or `$TFF_FLARE_SHARED`); without it the test is skipped, unless
`TFF_FLARE_REQUIRE_SHARED=1` (set by `.ci/run`) makes its absence a failure.
"""

import collections
import json
import os
import pathlib

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner
from tff_flare.simulation import evaluation
from tff_flare.tasks import data_sources
from tff_flare.tasks import models

SHARED = pathlib.Path(
    os.environ.get('TFF_FLARE_SHARED',
                   pathlib.Path(__file__).resolve().parents[3] / 'shared'))
GOLDEN = SHARED / 'golden' / 'authors_cnn_3of10_rounds0-40.json'
MNIST = SHARED / 'datasets' / 'mnist.npz'
# Our algorithm names for theirs.
ALGORITHMS = {'flare': 'flare', 'ec': 'ec', 'ef21_dense': 'ef21_dense_state', 'fedavg': 'fedavg'}
# Per mode: (loss, accuracy), five times the largest difference measured (module docstring).
TOLERANCE = {'inprocess': (1e-5, 5e-4), 'local': (5e-5, 5e-4)}
# Per mode: the algorithms retraced and the rounds run.
ROUNDS = int(os.environ.get('TFF_FLARE_GOLDEN_ROUNDS', '30'))
# In-process the tolerance is 5x tighter: EC and EF21 are apart from round 10 (1.1e-5, 3.4e-5
# at round 20 > 1e-5), so the first three evaluations suffice (unless asked for more).
IN_PROCESS_ROUNDS = 20 if 'TFF_FLARE_GOLDEN_ROUNDS' not in os.environ else ROUNDS
# On TFF's runtime FLARE, or with TFF_FLARE_GOLDEN_LOCAL=all FLARE, EC and EF21.
_LOCAL = ('flare', 'ec',
          'ef21_dense') if os.environ.get('TFF_FLARE_GOLDEN_LOCAL') == 'all' else ('flare',)
RETRACED = {
    'inprocess': (tuple(ALGORITHMS), min(ROUNDS, IN_PROCESS_ROUNDS)),
    'local': (_LOCAL, ROUNDS)
}


def golden_config(output_dir: str,
                  execution: str,
                  algorithms=tuple(ALGORITHMS),
                  rounds: int = 40) -> config_lib.ExperimentConfig:
  """The authors' configuration of the golden run (the file's `config`; `rounds` <= 40)."""
  return config_lib.ExperimentConfig(output_dir=output_dir,
                                     task='mnist_cnn',
                                     algorithms=tuple(algorithms),
                                     rounds=rounds,
                                     clients_per_round=3,
                                     client_sampling='python_random',
                                     seed=0,
                                     keep_percent=0.001,
                                     tau=0.05,
                                     tau_decay=1.1,
                                     mask_percentile=50.0,
                                     reg_steps=1,
                                     local_epochs=1,
                                     batch_size=600,
                                     learning_rate=0.215,
                                     momentum=0.99,
                                     eval_every=10,
                                     checkpoint_every=rounds,
                                     source='npz',
                                     data_path=str(MNIST),
                                     execution=execution)


def our_evaluations(
    output_dir: pathlib.Path, algorithms=tuple(ALGORITHMS)
) -> dict[str, list[tuple[int, float, float]]]:
  """`{algorithm: [(after_round, loss, accuracy), ...]}` from a run's metrics.csv."""
  import csv  # pylint: disable=g-import-not-at-top
  with open(output_dir / 'metrics.csv', newline='') as f:
    rows = list(csv.DictReader(f))
  return {
      name: [(int(r['round']), float(r[f'{name}/eval/loss']), float(r[f'{name}/eval/accuracy']))
             for r in rows
             if r.get(f'{name}/eval/loss', '')] for name in algorithms
  }


def _need_shared(test: tf.test.TestCase) -> None:
  if not GOLDEN.exists() or not MNIST.exists():
    if os.environ.get('TFF_FLARE_REQUIRE_SHARED') == '1':
      test.fail(f'The golden check needs {GOLDEN} and {MNIST}.')
    test.skipTest(f'{GOLDEN.name} or {MNIST.name} is not under {SHARED}')


class GoldenRetraceTest(tf.test.TestCase):

  def _retrace(self, execution: str):
    _need_shared(self)
    loss_tolerance, accuracy_tolerance = TOLERANCE[execution]
    algorithms, rounds = RETRACED[execution]
    golden = json.loads(GOLDEN.read_text())
    output = pathlib.Path(self.get_temp_dir()) / execution
    runner.run_experiment(golden_config(str(output), execution, algorithms, rounds),
                          log=lambda _: None)
    ours = our_evaluations(output, algorithms)
    largest_loss = largest_accuracy = 0.0
    for name in algorithms:
      theirs = [e for e in golden['evaluations'][ALGORITHMS[name]] if e['after_round'] <= rounds]
      self.assertEqual([r for r, _, _ in ours[name]], [e['after_round'] for e in theirs])
      for (after, loss, accuracy), expected in zip(ours[name], theirs):
        largest_loss = max(largest_loss, abs(loss - expected['loss']))
        largest_accuracy = max(largest_accuracy, abs(accuracy - expected['accuracy']))
        self.assertAllClose(loss,
                            expected['loss'],
                            rtol=0,
                            atol=loss_tolerance,
                            msg=f'{execution} {name} after {after}')
        self.assertAllClose(accuracy,
                            expected['accuracy'],
                            rtol=0,
                            atol=accuracy_tolerance,
                            msg=f'{execution} {name} after {after}')
    if not {'ec', 'ef21_dense'} <= set(algorithms):
      return
    # EC and EF21 told apart wherever the authors' code tells them apart.
    told_apart = 0
    for i, (ec, ef21) in enumerate(
        zip(golden['evaluations']['ec'], golden['evaluations']['ef21_dense_state'])):
      if ec['after_round'] > rounds:
        break
      if abs(ec['loss'] - ef21['loss']) > loss_tolerance:  # A swap would fail the bound.
        told_apart += 1
        self.assertLess(abs(ours['ec'][i][1] - ec['loss']), abs(ours['ec'][i][1] - ef21['loss']))
        self.assertLess(abs(ours['ef21_dense'][i][1] - ef21['loss']),
                        abs(ours['ef21_dense'][i][1] - ec['loss']))
    self.assertGreaterEqual(told_apart, 1)
    print(f'golden retrace ({execution}): largest loss difference {largest_loss:.3g}, '
          f'largest accuracy difference {largest_accuracy:.3g}; EC and EF21 apart at '
          f'{told_apart} evaluations')

  def test_in_process(self):
    self._retrace('inprocess')

  def test_on_tff_local_runtime(self):
    self._retrace('local')


class InitialModelTest(tf.test.TestCase):
  """The authors' CNN before any round, on the whole real MNIST test set (spec 6.2)."""

  def test_initial_loss_and_accuracy(self):
    _need_shared(self)
    arrays = data_sources.load_images('mnist', 'npz', str(MNIST))
    test = tf.data.Dataset.from_tensor_slices(
        collections.OrderedDict(x=arrays.x_test.astype(np.float32) / 255.0,
                                y=arrays.y_test.astype(np.int32).reshape(-1, 1))).batch(600)
    # 'per_layer' (kernel i seeded with i) is measured here, not the spec's 2.30217 / 0.0766
    # for "kernel i with seed i" (docs/faithfulness.md Q6): their draw is not ours.
    for kernel_seeds, loss, accuracy in (('shared', 2.3013, 0.1011), ('per_layer', 2.30266, None)):
      model_fn = models.tff_model_fn(
          lambda: models.mnist_cnn(kernel_seeds),  # noqa: B023 (called in this iteration)
          (28, 28, 1))
      model = model_fn()
      result = evaluation.build_evaluate_fn(model_fn, test)(
          tff.learning.models.ModelWeights.from_model(model))
      self.assertEqual(result['num_examples'], 10_000)
      self.assertAllClose(result['loss'], loss, rtol=0, atol=5e-5, msg=kernel_seeds)
      print(f'initial CNN ({kernel_seeds} kernel seeds): loss {result["loss"]:.5f}, '
            f'accuracy {result["accuracy"]:.4f}')
      if accuracy is not None:
        self.assertEqual(round(result['accuracy'] * 10_000),
                         round(accuracy * 10_000),
                         msg=kernel_seeds)


if __name__ == '__main__':
  tf.test.main()
