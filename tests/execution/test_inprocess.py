"""Tests of `tff_flare.execution.inprocess`: the same rounds as TFF's runtime, every algorithm.

The largest difference found (printed by the test) is 0: on these models the in-process
rounds reproduce TFF's bit for bit, and the tolerance below only allows for float rounding
of sums added in another order.
"""

import copy
import threading

import attr
import numpy as np
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow.core.protobuf import config_pb2
from tensorflow.core.protobuf import meta_graph_pb2
from tensorflow.core.protobuf import rewriter_config_pb2
from tensorflow.python.eager import context as tf_context
from tensorflow.python.grappler import tf_optimizer

from tests import tiny_models
from tff_flare.algorithms import registry
from tff_flare.execution import inprocess
from tff_flare.execution import modes
from tff_flare.tasks import models
from tff_flare.tasks import registry as tasks

_IDS = tiny_models.client_ids(3)


def _largest_difference(a, b) -> float:
  a, b = tf.nest.flatten(a), tf.nest.flatten(b)
  assert len(a) == len(b), (len(a), len(b))
  return max([
      float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
      for x, y in zip(a, b)
      if np.size(x)
  ] or [0.0])


class SameRoundsAsTffTest(tf.test.TestCase):

  def _compare(self, build, datasets, num_rounds, tolerance, names=registry.NAMES):
    largest = {}
    for name in names:
      process = build(name)
      if process.runs_only_on_tff:
        continue
      local = inprocess.InProcessProcess(process, num_threads=2)
      tff_state = process.initialize()
      state = local.set_model_weights(local.initialize(), process.get_model_weights(tff_state))
      tff_clients = [process.initial_client_state()] * len(datasets)
      clients = [local.initial_client_state()] * len(datasets)
      inputs = process.client_inputs(_IDS[:len(datasets)])
      difference = 0.0
      for round_num in range(num_rounds):
        if process.uses_test_loss:
          loss = 2.0 / (round_num + 1)
          tff_state = process.record_test_loss(tff_state, loss)
          state = local.record_test_loss(state, loss)
        ours = local.next(state, datasets, clients, inputs)
        theirs = process.next(tff_state, datasets, tff_clients, inputs)
        difference = max(
            difference,
            _largest_difference((ours.state, ours.client_states, ours.metrics),
                                (theirs.state, theirs.client_states, theirs.metrics)))
        state, clients = ours.state, ours.client_states
        tff_state, tff_clients = theirs.state, theirs.client_states
      local.close()
      largest[name] = difference
      self.assertLessEqual(difference, tolerance, msg=name)
    print('largest difference in-process vs TFF:', largest)
    return largest

  def test_every_algorithm_on_a_tiny_model(self):
    datasets = [tiny_models.classification_dataset(s, batch_size=2) for s in range(3)]
    largest = self._compare(tiny_models.tiny_process, datasets, 3, 1e-6)
    self.assertIn('mask_synchronized', largest)
    self.assertIn('ec_ffl', largest)

  def test_one_algorithm_per_part_on_the_digits_task(self):
    task = tasks.build_task('digits_demo', num_clients=3, batch_size=32)
    datasets = [task.train_data.create_tf_dataset_for_client(c) for c in _IDS]
    hparams = registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(
        0.1, momentum=0.9),
                                       keep_percent=1.0,
                                       total_clients=3,
                                       num_mask_draws=1)
    # Every algorithm on the tiny model (above); on a real model one per part that touches
    # the model's variables, and FedAvg.
    self._compare(lambda name: registry.build(name, task.model_fn, hparams),
                  datasets,
                  2,
                  1e-5,
                  names=tiny_models.PER_PART + ('fedavg',))

  def test_two_algorithms_side_by_side_on_a_small_gru(self):
    # As a run trains them: round by round, FedAvg then FLARE (every step regularized), on
    # a stateful GRU of the authors' kind (8 units), in-process and on TFF's runtime.
    model_fn = models.shakespeare_model_fn(seed=0, units=8)
    hparams = registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(0.5),
                                       keep_percent=1.0,
                                       tau=0.05,
                                       tau_decay=1.01,
                                       reg_steps='all',
                                       is_regularized=lambda name: 'embedding' not in name)
    rng = np.random.default_rng(0)
    characters = lambda: rng.integers(0, models.SHAKESPEARE_VOCAB_SIZE, (3, 8, 100))
    datasets = [tf.data.Dataset.from_tensor_slices(dict(x=characters(), y=characters()))]
    runs = {}
    for name in ('fedavg', 'flare'):
      process = registry.build(name, model_fn, hparams)
      local = inprocess.InProcessProcess(process, num_threads=2)
      tff_state = process.initialize()
      runs[name] = [
          process, local, tff_state,
          local.set_model_weights(local.initialize(), process.get_model_weights(tff_state)),
          [process.initial_client_state()], [local.initial_client_state()]
      ]
    for _ in range(2):
      for name, (process, local, tff_state, state, tff_clients, clients) in runs.items():
        inputs = process.client_inputs(_IDS[:1])
        ours = local.next(state, datasets, clients, inputs)
        theirs = process.next(tff_state, datasets, tff_clients, inputs)
        self.assertLessEqual(_largest_difference((ours.state, ours.client_states),
                                                 (theirs.state, theirs.client_states)),
                             1e-5,
                             msg=name)
        self.assertEqual(int(ours.metrics['client_work']['train']['num_batches']), 3)
        runs[name][2:] = [theirs.state, ours.state, theirs.client_states, ours.client_states]
    for _, local, *_ in runs.values():
      local.close()


class StreamedRoundTest(tf.test.TestCase):
  """A round adds each client's output as it comes and hands its new state on at once."""

  def test_sums_in_client_order_equal_add_n(self):
    # The streamed round adds one client at a time; a round added them with one AddN
    # before, whose CPU kernel groups them by 8: the same floats, bit for bit (a plain
    # left-to-right sum differs from 10 clients on).
    rng = np.random.default_rng(0)
    for count in range(1, 27):
      values = [
          dict(a=tf.constant(rng.normal(size=500).astype(np.float32) * 10.0**rng.integers(-6, 6)),
               n=tf.constant(1, tf.int64)) for _ in range(count)
      ]
      summed = inprocess.ClientOrderSum(count)
      for value in values:
        summed.add(value)
      self.assertAllEqual(summed.total['a'], tf.add_n([v['a'] for v in values]), msg=str(count))
      self.assertEqual(int(summed.total['n']), count)
    with self.assertRaisesRegex(ValueError, 'Fewer'):
      _ = inprocess.ClientOrderSum(3).total

  def test_a_sink_gets_every_state_and_few_clients_wait(self):
    process = tiny_models.tiny_process('flare')
    datasets = [tiny_models.classification_dataset(s, batch_size=2) for s in range(7)]
    ids = tiny_models.client_ids(7)
    inputs = process.client_inputs(ids)
    serial = inprocess.InProcessProcess(process, num_threads=1)
    state = serial.initialize()
    clients = [serial.initial_client_state()] * len(ids)
    first = serial.next(state, datasets, clients, inputs)
    started, sunk, waiting = [], {}, []

    class Recorded(list):  # The states, noting when each client starts.

      def __getitem__(self, index):
        started.append(index)
        return list.__getitem__(self, index)

    def sink(index, client_state):
      sunk[index] = client_state
      waiting.append(len(started) - len(sunk))

    streamed = inprocess.InProcessProcess(process, num_threads=2)
    second = streamed.next(state, datasets, Recorded(clients), inputs, client_state_sink=sink)
    self.assertIsNone(second.client_states)
    self.assertEqual(sorted(sunk), list(range(len(ids))))
    self.assertLessEqual(max(waiting), streamed.num_threads + 1)
    expected = tf.nest.flatten((first.state, first.client_states, first.metrics))
    got = tf.nest.flatten((second.state, [sunk[i] for i in range(len(ids))], second.metrics))
    self.assertLen(got, len(expected))
    for a, b in zip(expected, got):
      self.assertAllEqual(a, b)
    serial.close()
    streamed.close()

  def test_processes_of_one_model_share_the_client_models(self):
    with modes.build_execution('inprocess', num_threads=2) as execution:
      bound = [execution.bind(tiny_models.tiny_process(name)) for name in ('flare', 'fedavg')]
      datasets = [tiny_models.classification_dataset(s, batch_size=2) for s in range(4)]
      for local, name in zip(bound, ('flare', 'fedavg')):
        process = tiny_models.tiny_process(name)
        local.next(local.initialize(), datasets, [local.initial_client_state()] * 4,
                   process.client_inputs(_IDS[:3] + ['client_3']))
      models = [set(local._client_work) for local in bound]  # pylint: disable=protected-access
      self.assertNotEmpty(models[0])
      self.assertLessEqual(len(models[0] | models[1]), 2)  # One model a thread, for both.


def _memory_optimization() -> int:
  """This thread's Grappler memory optimizer setting for the functions it calls."""
  return _function_config().graph_options.rewrite_options.memory_optimization


def _function_config() -> config_pb2.ConfigProto:
  """The `ConfigProto` this thread's function calls are optimized with."""
  config = config_pb2.ConfigProto()
  config.ParseFromString(tf_context.context().function_call_options.config_proto_serialized)
  return config


def _largest_constants(concrete, config: config_pb2.ConfigProto, size: int = 64 * 32) -> list:
  """The shapes of the `Const` nodes of at least `size` elements in `concrete`'s graph as
  Grappler optimizes it with `config` (its functions' bodies included)."""
  meta_graph = tf.compat.v1.train.export_meta_graph(graph_def=concrete.graph.as_graph_def(),
                                                    graph=concrete.graph)
  fetch = meta_graph_pb2.CollectionDef()
  fetch.node_list.value.extend(t.name for t in concrete.outputs)
  meta_graph.collection_def['train_op'].CopyFrom(fetch)
  optimized = tf_optimizer.OptimizeGraph(config, meta_graph)
  nodes = list(optimized.node) + [n for f in optimized.library.function for n in f.node_def]
  shapes = [
      [d.size for d in n.attr['value'].tensor.tensor_shape.dim] for n in nodes if n.op == 'Const'
  ]
  return [shape for shape in shapes if np.prod(shape or [1]) >= size]


class GraphRewritesTest(tf.test.TestCase):
  """Grappler's free-RAM-dependent AddN rewrite and its constant folding are off wherever
  clients train."""

  def test_the_setting_holds_inside_and_is_restored(self):
    before = _memory_optimization()
    self.assertNotEqual(before, rewriter_config_pb2.RewriterConfig.NO_MEM_OPT)
    with inprocess.fixed_graph_rewrites():
      self.assertEqual(_memory_optimization(), rewriter_config_pb2.RewriterConfig.NO_MEM_OPT)
    self.assertEqual(_memory_optimization(), before)

  def test_a_client_work_keeps_no_model_sized_constant(self):
    # Grappler's constant folding made the momentum's initial zeros and a non-finite client's
    # zeros `Const` nodes, which an instantiated function keeps materialized. The client
    # work's graph optimized as the in-process engine calls it has none; with TF's default
    # options it has them (so this test can tell).
    process = registry.build('flare', tiny_models.softmax_model_fn(64, 32),
                             tiny_models.tiny_hparams())
    local = inprocess.InProcessProcess(process, num_threads=1)
    state = inprocess._to_tensors(local.initialize())  # pylint: disable=protected-access
    model = local._models.take()  # pylint: disable=protected-access
    traced = local._client_work_of(model)  # pylint: disable=protected-access
    concrete = traced.get_concrete_function(
        state.global_model_weights,
        local.round_params(state),
        tiny_models.classification_dataset(0, num_features=64, num_classes=32),
        inprocess._to_tensors(local.initial_client_state()),  # pylint: disable=protected-access
        tf.constant(process.client_inputs(_IDS[:1])[0]))
    with inprocess.fixed_graph_rewrites():
      engine = _function_config()
    self.assertEqual(_largest_constants(concrete, engine), [])
    self.assertIn([64, 32], _largest_constants(concrete, config_pb2.ConfigProto()))
    local.close()

  def test_clients_in_threads_and_the_round_run_without_it(self):
    process = tiny_models.tiny_process('ec_fedprox')
    functions = process.round_functions
    seen = []

    def recorded(function):

      def run(*args):  # Python runs this when the function is traced, in the calling thread.
        seen.append((function.__name__, threading.current_thread().name, _memory_optimization()))
        return function(*args)

      run.__name__ = function.__name__
      return run

    process = copy.copy(process)
    process.round_functions = attr.evolve(functions,
                                          client_work=recorded(functions.client_work),
                                          round_params=recorded(functions.round_params))
    local = inprocess.InProcessProcess(process, num_threads=2)
    datasets = [tiny_models.classification_dataset(s, batch_size=2) for s in range(4)]
    local.next(local.initialize(), datasets, [local.initial_client_state()] * 4,
               process.client_inputs(_IDS + ['client_3']))
    local.close()
    threads = {thread for name, thread, _ in seen if name == 'client_work'}
    self.assertTrue(any(t.startswith('tff_flare_client') for t in threads), msg=seen)
    self.assertIn('round_params', {name for name, _, _ in seen})  # In the caller's thread.
    self.assertEqual({setting for _, _, setting in seen},
                     {rewriter_config_pb2.RewriterConfig.NO_MEM_OPT},
                     msg=seen)
    self.assertNotEqual(_memory_optimization(), rewriter_config_pb2.RewriterConfig.NO_MEM_OPT)


class TracingTest(tf.test.TestCase):

  def test_every_function_is_traced_once_over_the_rounds(self):
    # TF warns about "retracing" when several processes' workers trace functions of the same
    # Python code; each function object must still be traced only once, whatever the round
    # and its (new, same-spec) datasets.
    for name in registry.NAMES:
      process = tiny_models.tiny_process(name)
      if process.runs_only_on_tff:
        continue
      local = inprocess.InProcessProcess(process, num_threads=2)
      state = local.initialize()
      clients = [local.initial_client_state()] * 3
      inputs = process.client_inputs(_IDS)
      for round_num in range(3):
        if process.uses_test_loss:
          state = local.record_test_loss(state, 2.0 / (round_num + 1))
        datasets = [
            tiny_models.classification_dataset(10 * round_num + s, batch_size=2) for s in range(3)
        ]
        output = local.next(state, datasets, clients, inputs)
        state, clients = output.state, output.client_states
      client_work = list(local._client_work.values())  # pylint: disable=protected-access
      self.assertNotEmpty(client_work, msg=name)
      for run in client_work:
        self.assertEqual(run.experimental_get_tracing_count(), 1, msg=name)
      self.assertEqual(local._update_server.experimental_get_tracing_count(), 1, msg=name)  # pylint: disable=protected-access
      self.assertEqual(local._round_params.experimental_get_tracing_count(), 1, msg=name)  # pylint: disable=protected-access
      local.close()


class ModesTest(tf.test.TestCase):

  def test_tff_algorithms_run_on_tff_in_the_in_process_mode(self):
    model_fn = tiny_models.softmax_model_fn()
    hparams = registry.Hyperparameters(client_optimizer=tff.learning.optimizers.build_sgdm(0.5))
    with modes.build_execution('inprocess') as execution:
      ours = registry.build('fedavg', model_fn, hparams)
      theirs = registry.build('tff_fedavg', model_fn, hparams)
      self.assertEqual(execution.where(ours), 'in-process')
      self.assertIn("TFF's local runtime", execution.where(theirs))
      self.assertIsInstance(execution.bind(ours), inprocess.InProcessProcess)
      bound = execution.bind(theirs)
      output = bound.next(bound.initialize(), [tiny_models.classification_dataset(0)],
                          [bound.initial_client_state()], theirs.client_inputs(['client_0']))
      self.assertIn('loss', output.metrics['client_work']['train'])

  def test_bad_options(self):
    for args, kwargs, message in ((('cluster',), {}, 'Unknown execution'),
                                  (('inprocess', ['h:1']), {}, 'execution is inprocess'),
                                  (('remote', []), {}, 'at least one worker'),
                                  (('inprocess',), dict(num_threads=0), 'client threads'),
                                  (('local',), dict(timeout_s=0), 'worker timeout')):
      with self.assertRaisesRegex(ValueError, message):
        modes.build_execution(*args, **kwargs)


if __name__ == '__main__':
  tf.test.main()
