"""Tests of `tff_flare.algorithms.tff_baselines`: TFF's processes, configured like the papers'."""

import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import fedavg
from tff_flare.algorithms import tff_baselines


def _weights_after(process, datasets, rounds=2):
  return tiny_models.train(process, datasets, rounds)[0]


class TffBaselinesTest(tf.test.TestCase):

  def test_fedprox_with_zero_strength_equals_our_fedavg(self):
    model_fn = tiny_models.softmax_model_fn()
    optimizer = tff.learning.optimizers.build_sgdm(0.3, momentum=0.5)
    datasets = [tiny_models.classification_dataset(s, batch_size=4) for s in range(2)]
    ours = _weights_after(fedavg.build_fedavg(model_fn, client_optimizer=optimizer), datasets)
    prox0 = _weights_after(
        tff_baselines.build_tff_fedprox(model_fn, client_optimizer=optimizer,
                                        proximal_strength=0.0), datasets)
    prox = _weights_after(
        tff_baselines.build_tff_fedprox(model_fn,
                                        client_optimizer=optimizer,
                                        proximal_strength=10.0), datasets)
    for o, p in zip(ours, prox0):
      self.assertAllClose(o, p, rtol=1e-6, atol=1e-7)
    self.assertNotAllClose(ours[0], prox[0])

  def test_client_weighting_by_examples_equals_our_fedavg_so_weighted(self):
    # Was a raw TypeError (the builders took no client_weighting).
    model_fn = tiny_models.softmax_model_fn()
    optimizer = tff.learning.optimizers.build_sgdm(0.3)
    by_examples = tff.learning.ClientWeighting.NUM_EXAMPLES
    datasets = [
        tiny_models.classification_dataset(s, num_examples=n, batch_size=4)
        for s, n in ((0, 4), (1, 12))
    ]  # Unequal clients: the weighting matters.
    ours = _weights_after(
        fedavg.build_fedavg(model_fn, client_optimizer=optimizer, client_weighting=by_examples),
        datasets)
    theirs = _weights_after(
        tff_baselines.build_tff_fedavg(model_fn,
                                       client_optimizer=optimizer,
                                       client_weighting=by_examples), datasets)
    prox0 = _weights_after(
        tff_baselines.build_tff_fedprox(model_fn,
                                        client_optimizer=optimizer,
                                        proximal_strength=0.0,
                                        client_weighting=by_examples), datasets)
    uniform = _weights_after(tff_baselines.build_tff_fedavg(model_fn, client_optimizer=optimizer),
                             datasets)
    for o, t, p in zip(ours, theirs, prox0):
      self.assertAllClose(o, t, rtol=1e-6, atol=1e-7)
      self.assertAllClose(o, p, rtol=1e-6, atol=1e-7)
    self.assertNotAllClose(ours[0], uniform[0])

  def test_metrics_have_the_common_parts(self):
    model_fn = tiny_models.softmax_model_fn()
    process = tff_baselines.build_tff_fedavg(
        model_fn, client_optimizer=tff.learning.optimizers.build_sgdm(0.3))
    self.assertTrue(process.runs_only_on_tff)
    datasets = [tiny_models.classification_dataset(s) for s in range(3)]
    metrics = tiny_models.train(process, datasets, 1)[2][0].metrics
    self.assertEqual(metrics['aggregator']['communication']['num_clients_total'], 3)
    communication = metrics['aggregator']['communication']
    self.assertEqual(communication['bytes_sent_total'], 3 * 15 * 4)  # Dense.
    # Nonzeros are not measured here (TFF does not expose the deltas): not reported as 1.0.
    self.assertNotIn('density', metrics['aggregator']['communication'])
    self.assertNotIn('entries_sent_total', metrics['aggregator']['communication'])
    self.assertIn('loss', metrics['client_work']['train'])


if __name__ == '__main__':
  tf.test.main()
