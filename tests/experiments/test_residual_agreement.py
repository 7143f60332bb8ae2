"""Tests of `experiments/residual_agreement.py`: the agreement by hand, and on a run's checkpoint."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import tensorflow as tf

from experiments import binary
from experiments import residual_agreement
from tff_flare.experiment import config as config_lib
from tff_flare.experiment import runner


class AgreementTest(tf.test.TestCase):

  def test_sign_agreement_by_hand(self):
    direction = [np.array([1.0, -2.0, 3.0, 0.5, 0.0]), np.array([[-1.0]])]
    reference = [np.array([2.0, 1.0, 0.0, 4.0, 1.0]), np.array([[-3.0]])]
    masks = [np.array([1.0, 1.0, 1.0, 0.0, 1.0]), np.array([[1.0]])]
    # Counted: entries 0, 1 (2 has no reference sign, 3 no mask, 4 no direction) and the
    # last: 0 and the last agree, 1 does not.
    self.assertAlmostEqual(residual_agreement.sign_agreement(direction, reference, masks), 2 / 3)
    self.assertAlmostEqual(residual_agreement.sign_agreement(reference, reference, masks), 1.0)
    negated = [-r for r in reference]
    self.assertAlmostEqual(residual_agreement.sign_agreement(negated, reference, masks), 0.0)
    # Masked entries: d = (1, -2, 3, 0, -1), r = (2, 1, 0, 1, -3): 2 - 2 + 0 + 0 + 3 = 3.
    self.assertAlmostEqual(residual_agreement.masked_cosine(direction, reference, masks),
                           3 / (np.sqrt(15) * np.sqrt(15)))


class OnARunTest(tf.test.TestCase):

  def test_every_client_measured_from_the_checkpoint_and_written(self):
    output = pathlib.Path(self.get_temp_dir()) / 'run'
    runner.run_experiment(config_lib.ExperimentConfig(output_dir=str(output),
                                                      task='digits_demo',
                                                      algorithms=('flare',),
                                                      rounds=2,
                                                      eval_every=2,
                                                      checkpoint_every=1,
                                                      execution='inprocess'),
                          log=lambda line: None)
    found = residual_agreement.measure(output,
                                       None,
                                       reference_examples=100,
                                       reference_batch=50,
                                       minibatches=2)
    self.assertEqual((found['algorithm'], found['round']), ('flare', 2))
    self.assertLen(found['clients'], 10)
    for measured in found['clients'].values():
      self.assertBetween(measured['residual'], 0.0, 1.0)
      self.assertBetween(measured['minibatch'], 0.0, 1.0)
      self.assertBetween(measured['halves'], 0.0, 1.0)
      self.assertBetween(measured['minibatch_nonzero'], 0.0, 1.0)
      self.assertGreater(measured['masked_entries'], 0)
      self.assertEqual(measured['reference_examples'], 100)
    # The binary writes it beside the run; a run of another algorithm is refused in one line.
    done = subprocess.run([
        sys.executable, '-m', 'experiments.residual_agreement', f'--run_dir={output}',
        '--reference_examples=50', '--minibatches=1', '--round=1'
    ],
                          capture_output=True,
                          text=True,
                          check=False)
    self.assertEqual(done.returncode, 0, done.stderr)
    written = json.loads((output / 'residual_agreement_1.json').read_text())
    self.assertEqual(written['round'], 1)
    self.assertIn('--round=1', written['command'])
    with self.assertRaisesRegex(
        binary.BadInput,
        r'^.* has no checkpoint after round 6 \(its checkpoints: after rounds \[0, 1\]\)\.$'):
      residual_agreement.measure(output, 7, reference_examples=1, reference_batch=1, minibatches=1)


if __name__ == '__main__':
  tf.test.main()
