"""Tests of `tff_flare.simulation.memory`: sizes read off a process's types, the estimate's
arithmetic, the refusal and what a process may use (the refusal of a whole run, in a
subprocess: `tests/experiments/test_run_experiment.py`)."""

import collections
import dataclasses
import os
import pathlib
import tempfile
import time

import numpy as np
import tensorflow as tf
import tensorflow_federated as tff

from tests import tiny_models
from tff_flare.simulation import memory

# The tiny softmax model: a 4x3 kernel and 3 biases, float32.
_MODEL = (12 + 3) * 4


class SizesTest(tf.test.TestCase):

  def test_tff_type_bytes(self):
    spec = tff.types.StructType([
        ('a', tff.types.TensorType(np.float32, [3, 4])),
        ('b', tff.types.FederatedType(tff.types.TensorType(np.int64, [5]), tff.SERVER)),
        ('c', tff.types.SequenceType(tff.types.TensorType(np.float32, [2]))),
        ('d', tff.types.TensorType(np.float32, [None, 2]))
    ])
    self.assertEqual(memory.tff_type_bytes(spec), 48 + 40)

  def test_sizes_of_processes(self):
    flare = memory.process_sizes(tiny_models.tiny_process('flare'))
    self.assertEqual((flare.model, flare.client_state, flare.on_tff), (_MODEL, _MODEL, False))
    self.assertGreaterEqual(flare.server_state, _MODEL)
    fedavg = memory.process_sizes(tiny_models.tiny_process('fedavg'))
    self.assertEqual(fedavg.client_state, 0)
    self.assertTrue(memory.process_sizes(tiny_models.tiny_process('tff_fedavg')).on_tff)
    # No batch given: no activations known.
    self.assertEqual((flare.forward, flare.largest_activation), (0, 0))

  def test_forward_pass_grows_with_the_batch(self):
    model_fn = tiny_models.softmax_model_fn()
    batches = [
        memory.batch_spec(tiny_models.classification_dataset(0, 64, batch_size=b)) for b in (8, 64)
    ]
    self.assertEqual(batches[1]['x'].shape.as_list(), [64, 4])  # Read off the first batch.
    small_pass, large_pass = (memory.forward_tensors(model_fn, b) for b in batches)
    small, large = small_pass.total, large_pass.total
    # At least the logits and the probabilities ([B, 3] float32 each), and the weights read
    # not counted: 8 times the batch, about 8 times the bytes.
    self.assertGreaterEqual(small, 2 * 8 * 3 * 4)
    self.assertGreater(large, 6 * small)
    # The largest tensor: at least a [B, 3] float32, one of several.
    self.assertBetween(large_pass.largest, 64 * 3 * 4, large / 2)
    sizes = memory.process_sizes(tiny_models.tiny_process('flare'), large_pass)
    self.assertEqual((sizes.forward, sizes.largest_activation), (large, large_pass.largest))
    without = dataclasses.replace(sizes, forward=0)
    estimate = lambda s: memory.estimate_run(  # noqa: E731
        {'flare': s},
        clients_with_state=4,
        clients_per_round=4,
        threads=2,
        storage='memory',
        execution='inprocess',
        base=0)
    self.assertEqual(
        estimate(sizes).round - estimate(without).round, 2 * memory.ACTIVATIONS_PER_FORWARD * large)

  def test_batch_spec_of_an_empty_dataset(self):
    empty = tf.data.Dataset.from_tensor_slices(np.zeros((0, 4), np.float32)).batch(2)
    self.assertIsNone(memory.batch_spec(empty))

  def test_a_model_that_cannot_take_the_batch_counts_nothing(self):
    wrong = collections.OrderedDict(x=tf.TensorSpec([8, 5], tf.float32),
                                    y=tf.TensorSpec([8, 1], tf.int32))
    self.assertEqual(memory.forward_tensors(tiny_models.softmax_model_fn(), wrong),
                     memory.ForwardPass())


def _sizes(**kinds):
  model = 100 * 2**20
  return {
      name: memory.ProcessSizes(model=model,
                                server_state=model,
                                client_state=model if kind == 'stateful' else 0,
                                on_tff=kind == 'tff') for name, kind in kinds.items()
  }


# A round of 10 clients with states in memory, 2 threads, in-process, with evaluation.
_FULL_ROUND = dict(clients_with_state=10,
                   clients_per_round=10,
                   threads=2,
                   storage='memory',
                   execution='inprocess',
                   evaluates=True)


class EstimateTest(tf.test.TestCase):

  def _estimate(self, sizes, **changes):
    options = dict(clients_with_state=10,
                   clients_per_round=10,
                   threads=2,
                   storage='memory',
                   execution='inprocess',
                   base=2**30,
                   evaluates=True)
    options.update(changes)
    return memory.estimate_run(sizes, **options)

  def test_states_on_disk_leave_the_estimate(self):
    sizes = _sizes(flare='stateful', ec='stateful')
    in_memory, on_disk = self._estimate(sizes), self._estimate(sizes, storage='disk')
    self.assertEqual(in_memory.resident - on_disk.resident, 2 * 10 * 100 * 2**20)
    self.assertEqual(in_memory.round, on_disk.round)

  def test_the_floor_counts_each_threads_largest_activation(self):
    mib = 2**20
    sizes = {
        'flare':
            memory.ProcessSizes(model=100 * mib,
                                server_state=100 * mib,
                                client_state=100 * mib,
                                on_tff=False,
                                forward=30 * mib,
                                largest_activation=8 * mib)
    }
    # base + server state + 10 states + 2 threads x (weights, gradient, state, the largest
    # tensor of a step) + the sum; not the rest of a step's tensors, nor the evaluation's.
    floor = 2**30 + 100 * mib + 10 * 100 * mib + 2 * (300 + 8) * mib + 100 * mib
    self.assertEqual(self._estimate(sizes).floor, floor)
    self.assertEqual(self._estimate(sizes, evaluation_forward=200 * mib).floor, floor)
    self.assertEqual(self._estimate(sizes, threads=1).floor, floor - 308 * mib)
    self.assertEqual(self._estimate(sizes, storage='disk').floor, floor - 10 * 100 * mib)
    # The estimate stays above its floor.
    self.assertGreater(self._estimate(sizes).total, self._estimate(sizes).floor)

  def test_more_threads_more_memory_and_models_shared(self):
    sizes = _sizes(flare='stateful', fedavg='plain')
    self.assertLess(self._estimate(sizes, threads=1).total, self._estimate(sizes, threads=2).total)
    # Two algorithms of one model share the client models: FedAvg adds its server state.
    alone = self._estimate(_sizes(flare='stateful'))
    self.assertEqual(self._estimate(sizes).resident - alone.resident, 100 * 2**20)

  def test_each_algorithm_after_the_first_adds_what_the_allocator_keeps(self):
    # Measured on the FC: one round of 1, 3 and 5 algorithms at 4.55, 5.67 and 6.37 GiB.
    one = self._estimate(_sizes(flare='stateful'), storage='disk')
    three = self._estimate(_sizes(flare='stateful', ec='stateful', ef21='stateful'), storage='disk')
    self.assertEqual(three.round - one.round, 2 * 2 * memory.KEPT_MODELS_PER_ALGORITHM_AND_THREAD *
                     100 * 2**20)  # 2 threads.
    three_one_thread = self._estimate(_sizes(flare='stateful', ec='stateful', ef21='stateful'),
                                      storage='disk',
                                      threads=1)
    one_one_thread = self._estimate(_sizes(flare='stateful'), storage='disk', threads=1)
    self.assertEqual(three_one_thread.round - one_one_thread.round,
                     2 * memory.KEPT_MODELS_PER_ALGORITHM_AND_THREAD * 100 * 2**20)
    # TFF's own algorithms run in TFF's worker, not in this process's allocator.
    self.assertEqual(
        self._estimate(_sizes(flare='stateful', tff_fedavg='tff'), storage='disk').round, one.round)

  def test_the_system_allocator_gives_each_round_back(self):
    # Measured on the FC (docs/performance.md): with the C library's allocator the process
    # holds no more after five algorithms' rounds than after one, and TFF's round runs beside
    # the states, not beside the in-process rounds' memory.
    flare = _sizes(flare='stateful')
    three = _sizes(flare='stateful', ec='stateful', ef21='stateful')
    system = dict(storage='disk', pooling=False)
    self.assertEqual(self._estimate(three, **system).round, self._estimate(flare, **system).round)
    self.assertGreater(
        self._estimate(three, storage='disk').round,
        self._estimate(flare, storage='disk').round)
    with_tff = _sizes(flare='stateful', tff_fedavg='tff')
    pooled, given_back = self._estimate(with_tff), self._estimate(with_tff, pooling=False)
    self.assertEqual(pooled.tff, given_back.tff)
    in_process = self._estimate(flare).round
    self.assertEqual(pooled.round, in_process)  # The driver's share is the smaller here.
    self.assertEqual(given_back.round + given_back.tff,
                     max(in_process, given_back.tff + 2 * 100 * 2**20))
    self.assertLess(given_back.total, pooled.total)

  def test_which_allocator_pools(self):
    env = lambda onednn=None, bfc=None: {  # pylint: disable=g-long-lambda
        name: value
        for name, value in (('TF_ENABLE_ONEDNN_OPTS', onednn), ('TF_CPU_ALLOCATOR_USE_BFC', bfc))
        if value is not None
    }
    # A value TensorFlow does not read as a boolean ('no', ' 0', 'off') leaves its default.
    for environ in (env(), env(bfc='false'), env(onednn='1'), env('0', 'true'), env('no', '0'),
                    env(' 0', 'false')):
      self.assertTrue(memory.allocator_pools(environ), environ)
    for environ in (env(onednn='0'), env('False', 'FALSE'), env('0', 'off')):
      self.assertFalse(memory.allocator_pools(environ), environ)

  def test_which_malloc_returns_and_the_margin_it_gives(self):
    system = {'TF_ENABLE_ONEDNN_OPTS': '0', 'TF_CPU_ALLOCATOR_USE_BFC': 'false'}
    returning = dict(system, MALLOC_MMAP_THRESHOLD_='1048576', MALLOC_TRIM_THRESHOLD_='0')
    self.assertEqual(returning, memory.SYSTEM_ALLOCATOR)
    self.assertTrue(memory.malloc_returns(returning))
    self.assertTrue(memory.malloc_returns(dict(returning, MALLOC_MMAP_THRESHOLD_='65536')))
    for environ in (system, dict(returning, MALLOC_MMAP_THRESHOLD_='33554432'),
                    dict(returning,
                         MALLOC_TRIM_THRESHOLD_='-1'), dict(returning, MALLOC_TRIM_THRESHOLD_='')):
      self.assertFalse(memory.malloc_returns(environ), environ)
    self.assertEqual(memory.estimate_margin(returning), memory.RETURNING_MARGIN)
    self.assertEqual(memory.allocator_name(returning),
                     "TensorFlow's system allocator, malloc returning what it frees")
    # malloc's settings do not matter while TensorFlow's allocator pools.
    pooled = dict(returning, TF_CPU_ALLOCATOR_USE_BFC='true')
    self.assertEqual(memory.estimate_margin(pooled), memory.MARGIN)
    self.assertEqual(memory.allocator_name(pooled), "TensorFlow's pooling allocator")
    self.assertEqual(memory.estimate_margin(system), memory.MARGIN)
    self.assertEqual(memory.allocator_name(system), "TensorFlow's system allocator")
    # A process's own: as it started (what glibc read), not a variable set since.
    started = dict(memory.start_environment())
    later = {'TFF_FLARE_SET_AFTER_START': '1'}
    if not memory.malloc_returns(started):
      later.update(memory.RETURNING_MALLOC)
    saved = {name: os.environ.get(name) for name in later}
    os.environ.update(later)
    try:
      self.assertNotIn('TFF_FLARE_SET_AFTER_START', memory.start_environment())
      self.assertTrue(memory.malloc_returns(os.environ))
      self.assertEqual(memory.malloc_returns(), memory.malloc_returns(started))
    finally:
      for name, value in saved.items():
        if value is None:
          del os.environ[name]
        else:
          os.environ[name] = value
    self.assertEqual(memory.start_environment()['PATH'], os.environ['PATH'])

  def test_an_evaluation_larger_than_a_step_adds_its_activations(self):
    # VGG11 trained at batch 8 and evaluated at batch 500 (the image tasks' least): estimated
    # 3.42 GiB against 4.69 measured when only the training steps' activations counted.
    mib = 2**20
    sizes = {
        'flare':
            memory.ProcessSizes(model=mib,
                                server_state=mib,
                                client_state=mib,
                                on_tff=False,
                                forward=10 * mib)
    }
    steps = self._estimate(sizes)
    # Two threads' steps hold 20 MiB; an evaluation of 15 MiB fits in it, one of 50 does not.
    self.assertEqual(self._estimate(sizes, evaluation_forward=15 * mib).round, steps.round)
    self.assertEqual(
        self._estimate(sizes, evaluation_forward=50 * mib).round - steps.round, 30 * mib)
    self.assertEqual(
        self._estimate(sizes, evaluation_forward=50 * mib, evaluates=False).round, steps.round)

  def test_tff_runtime_counted_only_where_it_runs_here(self):
    sizes = _sizes(tff_fedavg='tff')
    self.assertGreater(self._estimate(sizes).tff, memory.TFF_WORKER_BASE)
    self.assertEqual(self._estimate(sizes, execution='remote').tff, 0)

  def test_refusal_names_what_fits(self):
    sizes = _sizes(flare='stateful', ec='stateful')
    common = _FULL_ROUND
    estimate, available, refusal = memory.plan(sizes, budget=2**50, **common)
    self.assertIsNone(refusal)
    base = memory.resident_bytes()
    disk = memory.estimate_run(sizes, **dict(common, storage='disk', base=base)).total
    alone = memory.estimate_run(_sizes(flare='stateful'), **dict(common, base=base)).total
    budget = max(disk, alone) + 2**26  # The resident memory moves a little meanwhile.
    _, available, refusal = memory.plan(sizes, budget=budget, **common)
    self.assertEqual(available, budget)
    self.assertIn(f'more than the {available / memory.GIB:.1f} GiB', refusal)
    self.assertIn('client_state_storage=disk (', refusal)
    self.assertIn('fewer algorithms at once (alone: flare', refusal)
    self.assertNotIn('\n', refusal)
    self.assertNotIn('--',
                     refusal)  # Settings by name: a flag of the binaries, an argument of simulate.
    _, _, refusal = memory.plan(sizes, budget=2**20, **common)  # Nothing fits.
    self.assertIn('What fits: nothing of these settings', refusal)
    # A small budget is printed as it was given (was '0.0 GiB' for 0.05).
    _, _, refusal = memory.plan(sizes, budget=int(0.05 * memory.GIB), **common)
    self.assertIn('more than the 0.05 GiB it may use', refusal)

  def test_gib_keeps_two_significant_digits_below_a_tenth(self):
    for num_bytes, text in ((12.34 * memory.GIB, '12.3'), (0.1 * memory.GIB, '0.1'),
                            (0.05 * memory.GIB, '0.05'), (0.0123 * memory.GIB, '0.012'), (0, '0')):
      self.assertEqual(memory.gib(num_bytes), text)

  def test_subrounds_bound_tffs_worker_and_a_refusal_names_them(self):
    sizes = _sizes(tff_fedavg='tff')
    whole = self._estimate(sizes)
    in_five = self._estimate(sizes, tff_subrounds=5)  # 10 clients: 2 a subround.
    # The worker holds 2 clients' values, not 10, and the mergeable context's own.
    self.assertEqual(whole.tff - in_five.tff,
                     (8 * memory.TFF_MODELS_PER_CLIENT - memory.SUBROUND_MODELS) * 100 * 2**20)
    self.assertLess(in_five.total, whole.total)
    common = _FULL_ROUND
    base = memory.resident_bytes()
    in_two = memory.estimate_run(sizes, **dict(common, base=base, tff_subrounds=2)).total
    _, _, refusal = memory.plan(sizes, budget=in_two + 2**26, **common, pooling=True)
    self.assertIn('What fits: tff_subrounds=2 (', refusal)

  def test_a_refusal_names_the_system_allocator_where_only_it_fits(self):
    # The authors' FC preset: four stateful algorithms, FedAvg, and TFF's FedAvg on its runtime.
    stateful = dict.fromkeys(('flare', 'ec', 'ef21_dense', 'ec_fedprox'), 'stateful')
    sizes = _sizes(**stateful, fedavg='plain', tff_fedavg='tff')
    common = dict(_FULL_ROUND, storage='disk')  # 2 threads: the pool keeps more of each.
    base = memory.resident_bytes()
    given_back = memory.estimate_run(sizes, **dict(common, base=base, pooling=False)).total
    pooled = min(
        memory.estimate_run(sizes, **dict(common, base=base, tff_subrounds=k)).total
        for k in range(1, 11))
    self.assertLess(given_back, pooled)  # No number of subrounds fits with the pool.
    _, _, refusal = memory.plan(sizes, budget=(given_back + pooled) // 2, **common, pooling=True)
    self.assertRegex(
        refusal, r'; the system allocator \(TF_ENABLE_ONEDNN_OPTS=0 '
        r'TF_CPU_ALLOCATOR_USE_BFC=false MALLOC_MMAP_THRESHOLD_=1048576 MALLOC_TRIM_THRESHOLD_=0 '
        r'in the environment; slower rounds\) \([0-9.]+ GiB\)\.$')
    self.assertNotIn('tff_subrounds=', refusal)
    # A lighter setting names only what it changes: with one thread asked, states on disk
    # are 'client_state_storage=disk' (was also '..., client_threads=1').
    in_memory = dict(common, storage='memory', threads=1)
    on_disk = memory.estimate_run(sizes, **dict(in_memory, base=base, storage='disk')).total
    _, _, refusal = memory.plan(sizes, budget=on_disk + 2**26, **in_memory, pooling=True)
    self.assertIn('What fits: client_state_storage=disk (', refusal)
    self.assertNotIn('client_threads=1', refusal)
    # Already on the system allocator, it is not named again ...
    _, _, refusal = memory.plan(sizes,
                                budget=given_back // 2,
                                **common,
                                pooling=False,
                                margin=memory.RETURNING_MARGIN)
    self.assertNotIn('system allocator', refusal)
    # ... but on the system allocator with malloc's defaults, the one that returns what it
    # frees is, where it fits (the estimate's margin: none where nothing is kept).
    returning = memory.estimate_run(
        sizes, **dict(common, base=base, pooling=False, margin=memory.RETURNING_MARGIN)).total
    self.assertAlmostEqual(given_back / returning, memory.MARGIN, delta=0.01)
    _, _, refusal = memory.plan(sizes,
                                budget=returning + 2**26,
                                **common,
                                pooling=False,
                                margin=memory.MARGIN)
    self.assertRegex(refusal, r'; the system allocator \(.* MALLOC_TRIM_THRESHOLD_=0 in the env')


class MeasuredTest(tf.test.TestCase):

  def test_page_cache_is_not_counted_as_used(self):
    # A cgroup's usage counts the files its members wrote; the kernel takes those pages back
    # before it kills, so they leave room (a run after one that wrote checkpoints was refused).
    folder = pathlib.Path(tempfile.mkdtemp())
    (folder / 'memory.stat').write_text('cache 300\nshmem 50\nfile 7000\nrss 9\n')
    self.assertEqual(memory._reclaimable(folder / 'memory.stat', 'file', 'shmem'), 6950)
    self.assertEqual(memory._reclaimable(folder / 'memory.stat', 'cache', 'shmem'), 250)
    self.assertEqual(memory._reclaimable(folder / 'missing', 'file', 'shmem'), 0)

  def test_this_process(self):
    before = memory.resident_bytes()
    self.assertGreater(before, 50 * 2**20)  # TensorFlow is loaded.
    with memory.PeakSampler(interval_s=0.01) as peak:
      held = np.ones(256 * 2**20 // 8)  # 256 MiB, touched.
      time.sleep(0.2)
      del held
      time.sleep(0.05)
    self.assertGreaterEqual(peak.peak_bytes(), before + 200 * 2**20)
    self.assertLess(memory.resident_bytes(), peak.peak_bytes())
    available = memory.available_bytes()
    self.assertIsNotNone(available)
    self.assertGreater(available, memory.resident_bytes())


if __name__ == '__main__':
  tf.test.main()
