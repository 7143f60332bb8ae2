"""Tests of `tff_flare.tasks.registry`: the tasks on mock and tiny local data."""

import os
import pathlib
import subprocess
import sys
from unittest import mock

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.algorithms import ec
from tff_flare.tasks import data_sources
from tff_flare.tasks import registry as tasks
from tff_flare.tasks import text


def _mnist_npz(directory, num_train=60_000):
  path = os.path.join(directory, 'mnist.npz')
  if not os.path.exists(path):
    rng = np.random.default_rng(0)
    np.savez(path,
             x_train=rng.integers(0, 256, (num_train, 28, 28), dtype=np.uint8),
             y_train=(np.arange(num_train) % 10).astype(np.uint8),
             x_test=rng.integers(0, 256, (50, 28, 28), dtype=np.uint8),
             y_test=(np.arange(50) % 10).astype(np.uint8))
  return path


SHARED = pathlib.Path(
    os.environ.get('TFF_FLARE_SHARED',
                   pathlib.Path(__file__).resolve().parents[3] / 'shared'))


class TaskRegistryTest(tf.test.TestCase):

  def test_unknown_task_lists_the_known_ones(self):
    with self.assertRaisesRegex(ValueError, r'Unknown task .*mnist_cnn.*shakespeare_gru'):
      tasks.build_task('mnist_resnet')

  def test_unknown_option_lists_the_known_ones(self):
    with self.assertRaisesRegex(
        ValueError, r'Unknown task option\(s\) local_epochs; known: '
        r'source, .*text_evaluation'):
      tasks.build_task('digits_demo', local_epochs=2)

  def test_authors_mnist_split_from_npz(self):
    path = _mnist_npz(self.get_temp_dir())
    task = tasks.build_task('mnist_cnn', source='npz', data_path=path)
    self.assertEqual(task.train_data.client_ids, [f'client_{i}' for i in range(10)])
    with np.load(path) as data:
      expected_x = data['x_train'][600:1200].astype(np.float32) / 255.0
      expected_y = data['y_train'][600:1200]
    batches = list(task.train_data.create_tf_dataset_for_client('client_1'))
    self.assertLen(batches, 1)  # 600 examples, batch 600: one step per round.
    self.assertEqual(batches[0]['x'].shape, (600, 28, 28, 1))
    self.assertEqual(batches[0]['x'].dtype, tf.float32)
    self.assertAllEqual(batches[0]['x'][..., 0], expected_x)  # Scaled per batch, bit-exact.
    self.assertAllEqual(batches[0]['y'][:, 0], expected_y)
    self.assertEqual(task.hparams['learning_rate'], 0.215)
    test_examples = sum(int(b['y'].shape[0]) for b in task.test_data)
    self.assertEqual(test_examples, 50)

  def test_a_step_cap_draws_a_reshuffled_stream_every_round(self):
    path = _mnist_npz(self.get_temp_dir())
    task = tasks.build_task('mnist_cnn', source='npz', data_path=path, batch_size=8, local_steps=3)
    round_0, round_1, again = (task.client_datasets(['client_1'], r)[0] for r in (0, 1, 0))
    batches = list(round_0)
    self.assertEqual([b['x'].shape for b in batches], [(8, 28, 28, 1)] * 3)
    self.assertEqual(batches[0]['x'].dtype, tf.float32)
    self.assertLessEqual(float(tf.reduce_max(batches[0]['x'])), 1.0)
    with np.load(path) as data:  # Client 1's examples (600-1199), in another order.
      labels = data['y_train'][600:1200]
    self.assertNotAllEqual(batches[0]['y'][:, 0], labels[:8])
    self.assertNotAllEqual(batches[0]['y'], next(iter(round_1))['y'])
    self.assertAllEqual(batches[0]['x'], next(iter(again))['x'])
    with self.assertRaisesRegex(ValueError, 'takes no local epochs'):
      tasks.build_task('mnist_cnn', source='npz', data_path=path, local_steps=3, epochs=2)
    for bad in (0, 2**16 + 1, 2.5, True):
      with self.assertRaisesRegex(ValueError, r'local_steps must be an int in \[1, 65536\]'):
        tasks.build_task('digits_demo', local_steps=bad)

  def test_logreg_evaluates_on_the_clients_training_examples(self):
    path = _mnist_npz(self.get_temp_dir())
    task = tasks.build_task('mnist_logreg', source='npz', data_path=path, eval_data='train')
    self.assertLen(task.train_data.client_ids, 10)
    train_ys = np.sort(
        np.concatenate([
            b['y'][:, 0].numpy()
            for cid in task.train_data.client_ids
            for b in task.train_data.create_tf_dataset_for_client(cid)
        ]))
    eval_ys = np.sort(np.concatenate([b['y'][:, 0].numpy() for b in task.test_data]))
    self.assertLen(eval_ys, 60_000)  # Every training example, not the 50 test images.
    self.assertAllEqual(eval_ys, train_ys)
    weights = task.model_fn().trainable_variables
    self.assertEqual([w.shape for w in weights], [(784, 10), (10,)])
    self.assertAllEqual(weights[0], tf.zeros((784, 10)))  # The convex analyses' start.
    with self.assertRaisesRegex(ValueError, 'Unknown eval_data'):
      tasks.build_task('mnist_logreg', source='npz', data_path=path, eval_data='val')
    with self.assertRaisesRegex(ValueError, 'shakespeare_gru does not take eval_data'):
      tasks.build_task('shakespeare_gru', eval_data='train')

  def test_fc_from_tfds_mock_with_options(self):
    with tfds.testing.mock_data(num_examples=200):
      task = tasks.build_task('mnist_fc',
                              source='tfds',
                              total_clients=10,
                              num_clients=4,
                              partition='iid',
                              batch_size=5,
                              epochs=2)
    self.assertLen(task.train_data.client_ids, 4)
    batches = list(task.train_data.create_tf_dataset_for_client('client_0'))
    self.assertLen(batches, 8)  # 20 examples, batch 5, 2 epochs.
    self.assertEqual(batches[0]['x'].shape, (5, 784))
    self.assertBetween(float(tf.reduce_max(batches[0]['x'])), 0.0, 1.0)
    with self.assertRaisesRegex(ValueError, 'num_clients'):
      with tfds.testing.mock_data(num_examples=20):
        tasks.build_task('mnist_fc', source='tfds', total_clients=2, num_clients=3)

  def test_cifar_tasks_and_a_round_on_the_task(self):
    with tfds.testing.mock_data(num_examples=40):
      vgg = tasks.build_task('cifar100_vgg11', source='tfds')
      masking = tasks.build_task('cifar10_masking_cnn',
                                 source='tfds',
                                 total_clients=10,
                                 partition='dirichlet',
                                 alpha=0.5,
                                 batch_size=0)
    self.assertLen(vgg.train_data.client_ids, 4)
    self.assertEqual(vgg.hparams['reg_steps'], 5)
    batch = next(iter(vgg.train_data.create_tf_dataset_for_client('client_0')))
    self.assertEqual(batch['x'].shape, (10, 32, 32, 3))
    self.assertLen(masking.train_data.client_ids, 10)
    process = ec.build_ec(masking.model_fn,
                          keep_percent=1.0,
                          client_optimizer=tff.learning.optimizers.build_sgdm(0.1))
    ids = masking.train_data.client_ids[:2]
    output = tiny_models.next_round(
        process, process.initialize(),
        [masking.train_data.create_tf_dataset_for_client(c) for c in ids])
    self.assertGreater(output.metrics['aggregator']['communication']['entries_sent_total'], 0)

  def test_shakespeare_from_a_play_file(self):
    long_speech = '\n'.join(text.VOCAB[:60] for _ in range(450))  # ~27,450 characters.
    play = f'HAMLET:\n{long_speech}\n\nHAMLET:\n{long_speech}\n\nOSRIC:\nMy lord.\n\n'
    play += 'OSRIC:\nAy.\n\nHAMLET:\nThe rest is silence.\n'
    path = pathlib.Path(self.get_temp_dir()) / 'play.txt'
    path.write_text(play)
    with self.assertRaisesRegex(
        data_sources.DataSourceError,
        r"10 Shakespeare clients asked \(the authors' 10\), but only 1 "
        r'roles .* give num_clients=1 or fewer\.'):
      tasks.build_task('shakespeare_gru', source='text', data_path=str(path))
    task = tasks.build_task('shakespeare_gru', source='text', data_path=str(path), num_clients=1)
    self.assertEqual(task.train_data.client_ids, ['HAMLET'])  # OSRIC has too few batches.
    batch = next(iter(task.train_data.create_tf_dataset_for_client('HAMLET')))
    self.assertEqual(batch['x'].shape, (8, 100))
    self.assertFalse(task.hparams['is_regularized']('embedding/embeddings:0'))
    self.assertTrue(task.hparams['is_regularized']('gru/gru_cell/kernel:0'))
    self.assertEqual(task.hparams['reg_steps'], 'all')

  def test_a_bad_gru_layout_is_refused_before_the_data_is_read(self):
    missing = os.path.join(self.get_temp_dir(), 'no_play.txt')
    with mock.patch.dict(os.environ, {'TFF_FLARE_GRU_LAYOUT': 'sideways'}):
      with self.assertRaisesRegex(ValueError, "^TFF_FLARE_GRU_LAYOUT='sideways': use 'plain'"):
        tasks.build_task('shakespeare_gru', source='text', data_path=missing)

  def test_shakespeare_rounds_shuffle_anew_and_evaluation_is_the_authors(self):
    speech = '\n'.join(text.VOCAB[:60] for _ in range(450))
    play = ''.join(f'{name}:\n{speech}\n\n{name}:\n{speech}\n\n' for name in ('ANNE', 'BERT'))
    path = pathlib.Path(self.get_temp_dir()) / 'play2.txt'
    path.write_text(play)
    task = tasks.build_task('shakespeare_gru', source='text', data_path=str(path), num_clients=2)
    full = tasks.build_task('shakespeare_gru',
                            source='text',
                            data_path=str(path),
                            num_clients=2,
                            text_evaluation='full')
    self.assertEqual(sum(1 for _ in task.test_data), 2)  # The authors' evaluate(steps=2).
    self.assertGreater(sum(1 for _ in full.test_data), 2)

    # TFF serializes a client dataset into every call and rebuilds it there, so a shuffle
    # with a fixed seed would replay its first permutation every round.
    @tff.tensorflow.computation(
        tff.SequenceType(tff.types.tensorflow_to_type(task.train_data.element_type_structure)))
    def last_batch(dataset):
      return dataset.reduce(tf.zeros([8, 100], tf.int64), lambda last, b: b['x'])

    fixed = task.train_data.create_tf_dataset_for_client('ANNE')
    self.assertAllEqual(last_batch(fixed), last_batch(fixed))
    round_0, round_1 = (last_batch(task.client_datasets(['ANNE'], r)[0]) for r in (0, 1))
    self.assertNotAllEqual(round_0, round_1)  # A new permutation every round...
    self.assertAllEqual(round_1, last_batch(task.client_datasets(['ANNE'], 1)[0]))  # ...seeded.
    # A step cap takes that many batches of the stream (more than one pass here).
    capped = tasks.build_task('shakespeare_gru',
                              source='text',
                              data_path=str(path),
                              num_clients=2,
                              local_steps=40)
    passes = sum(1 for _ in task.client_datasets(['ANNE'], 0)[0])
    self.assertLess(passes, 40)
    self.assertEqual(sum(1 for _ in capped.client_datasets(['ANNE'], 0)[0]), 40)

  def test_the_real_play_outlives_garbage_collection(self):
    # The loaded play's ClientData must live as long as the task: it was held only weakly
    # (by a tf.function method) and collected before round 0 of a real run.
    play = SHARED / 'datasets' / 'tinyshakespeare.txt'
    if not play.exists():
      if os.environ.get('TFF_FLARE_REQUIRE_SHARED') == '1':
        self.fail(f'{play} is missing.')
      self.skipTest(f'{play} is not here.')
    # In a fresh interpreter: under pytest something else kept the ClientData alive.
    code = ('import gc\n'
            'from tff_flare.tasks import registry as tasks\n'
            f'task = tasks.build_task("shakespeare_gru", source="text", data_path="{play}", '
            'num_clients=2)\n'
            'gc.collect()\n'
            'batch = next(iter(task.client_datasets(task.train_data.client_ids[:2], 0)[0]))\n'
            'print("batch", tuple(batch["x"].shape))\n')
    result = subprocess.run([sys.executable, '-c', code],
                            capture_output=True,
                            text=True,
                            timeout=600,
                            check=False,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertIn('batch (8, 100)', result.stdout, result.stderr[-2000:])

  def test_digits_demo(self):
    task = tasks.build_task('digits_demo')
    self.assertLen(task.train_data.client_ids, 10)
    batches = list(task.train_data.create_tf_dataset_for_client('client_0'))
    self.assertLen(batches, 1)
    self.assertEqual(batches[0]['x'].shape, (143, 64))


if __name__ == '__main__':
  tf.test.main()
