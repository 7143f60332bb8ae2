"""Tests of `tff_flare.experiment.config`: the one validation, and what a resume may change."""

import os

from absl.testing import parameterized
import tensorflow as tf

from tff_flare.experiment import config as config_lib


def _config(output_dir, **overrides):
  return config_lib.ExperimentConfig(output_dir=output_dir, **overrides)


class ValidateTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.named_parameters(
      ('unknown_algorithm', dict(algorithms=('flare', 'fedsgd')),
       r"Unknown algorithms \['fedsgd'\]"),
      ('repeated_algorithm', dict(algorithms=('ec', 'ec')), 'named twice'),
      ('unknown_task', dict(task='mnist_resnet'), 'Unknown task'),
      ('nan_learning_rate', dict(learning_rate=float('nan')), 'learning_rate must be a finite'),
      ('inf_tau', dict(tau=float('inf')), 'tau must be a finite'),
      ('nan_alpha', dict(alpha=float('nan')), 'alpha must be a finite'),
      ('zero_learning_rate', dict(learning_rate=0.0), 'learning_rate must be > 0'),
      ('momentum_one', dict(momentum=1.0), r'momentum must be in \[0, 1\)'),
      ('keep_percent', dict(keep_percent=0.0), r'keep_percent must be in \(0, 100\]'),
      ('tau_decay', dict(tau_decay=0.0), 'tau_decay'),
      ('topk_rule', dict(topk_rule='per_tensor'),
       'topk_rule must be one of authors, exact, global'),
      ('percentile', dict(mask_percentile=101.0), 'mask_percentile'),
      ('reg_steps_word', dict(reg_steps='often'), 'reg_steps'),
      ('keep_probability', dict(keep_probability=1.5), 'keep probability q'),
      ('weighting', dict(client_weighting='by_size'), 'by_size'),
      ('rounds', dict(rounds=0), 'rounds must be an int >= 1'),
      ('batch_size', dict(batch_size=-1), 'batch_size'),
      ('local_steps', dict(local_steps=0), r'local_steps must be an int in \[1, 65536\]'),
      ('local_steps_and_epochs', dict(local_steps=5, local_epochs=2), 'takes no local epochs'),
      ('clients_per_round', dict(clients_per_round=11), r'clients_per_round \(11\) must be in'),
      ('sampler', dict(client_sampling='round_robin'), 'Unknown client sampling'),
      ('partition', dict(partition='pathological'), 'Unknown partition'),
      ('source_for_images', dict(task='mnist_cnn', source='text'), "Unknown source 'text'"),
      ('source_for_digits', dict(source='npz'), 'ships with scikit-learn'),
      ('storage', dict(client_state_storage='cloud'), 'client_state_storage'),
      ('execution', dict(execution='cluster'), 'Unknown execution'),
      ('model_aggregator', dict(model_aggregator='median'), 'Unknown model aggregator'),
      ('clipping_without_norm', dict(model_aggregator='clipping'), 'needs aggregator_norm'),
      ('zeroing_zero_norm', dict(model_aggregator='zeroing',
                                 aggregator_norm=0.0), 'needs aggregator_norm'),
      ('norm_without_clipping', dict(aggregator_norm=1.0), 'applies to model_aggregator=clip'),
      ('factory_for_ef21', dict(algorithms=('ec', 'ef21'),
                                model_aggregator='tff_mean'), 'ef21 aggregate.s. their own way'),
      ('workers_without_remote', dict(workers=('h:1',)), 'execution is inprocess'),
      ('threads', dict(execution='inprocess', client_threads=0), 'client threads'),
      # Zero used to mean "the task's default" silently (issue 19).
      ('zero_clients', dict(num_clients=0), r'num_clients must be an int >= 1'),
      ('zero_per_round', dict(clients_per_round=0), r'clients_per_round must be an int >= 1'),
      ('zero_total', dict(total_clients=0), r'total_clients must be an int >= 1'),
      ('negative_seed', dict(seed=-1), r'seed must be an int in \[0, 2\^31\), got -1'),
      # A path beside a source that ignores it: refused by the settings, before any run (was:
      # when the task was built, so a grid started each of its cells to be refused).
      ('data_path_beside_tfds', dict(task='mnist_cnn', source='tfds', data_path='/d/m.npz'),
       r'^data_path=/d/m\.npz is read by npz or imagefolder, not by source=tfds'),
      ('data_dir_beside_keras', dict(task='mnist_cnn', source='keras',
                                     data_dir='/d'), r'^data_dir=/d is not read by source=keras'),
      # Paths the system refuses by their form (was: an OSError's message, exit 5).
      ('long_name', dict(task='mnist_cnn', source='npz', data_path='/d/' + 'n' * 256),
       r'^data_path /d/n+\.\.\.n+ has a name of 256 bytes; file systems take at most 255\.$'),
      ('long_path', dict(task='mnist_cnn', data_dir='/d' * 2048),
       r'^data_dir .* is 4096 bytes long; paths may be at most 4095\.$'),
      ('huge_seed', dict(seed=2**63), r'seed must be an int in \[0, 2\^31\)'),
      # Numbers past what the run's arithmetic holds (int32 counters, float32 values).
      ('huge_learning_rate', dict(learning_rate=1e39), r'learning_rate must be .* float32'),
      ('subnormal_learning_rate', dict(learning_rate=1e-45), r'learning_rate must be .*1\.2e-38'),
      ('subnormal_tau', dict(tau=1e-40), r'tau must be .* float32'),
      ('huge_qsgd_levels', dict(algorithms=('qsgd_ef',), qsgd_levels=10**39),
       r'qsgd_levels must be an int below 2\^31 \(the run counts in int32\)'),
      ('huge_rounds', dict(rounds=2**31),
       r'rounds must be an int below 2\^31 \(the run counts in int32\), got 2147483648\.'),
      ('huge_epochs', dict(local_epochs=2**40), 'local_epochs must be an int below 2\\^31'),
      ('huge_worker_timeout', dict(worker_timeout_s=1e308),
       r'worker timeout must be in \(0, 604800\] seconds'),
      ('negative_model_seed', dict(model_seed=-3), r'model_seed must be an int in \[0, 2\^31\)'),
      ('no_algorithms', dict(algorithms=()), 'algorithms is empty: name at least one of flare'),
      ('double_softmax_elsewhere', dict(double_softmax=False),
       'digits_demo does not take double_softmax'),
      # Options a task would ignore (issue 19: the rest of the kind of digits' partition).
      ('partition_of_the_play', dict(task='shakespeare_gru',
                                     partition='iid'), 'shakespeare_gru does not take partition'),
      ('batch_of_the_play', dict(task='shakespeare_gru',
                                 batch_size=16), 'shakespeare_gru does not take batch_size'),
      ('alpha_without_dirichlet', dict(task='mnist_cnn', partition='iid', alpha=0.5),
       r'alpha applies to partition=dirichlet only \(partition is iid\)'),
      ('ratio_without_skew', dict(task='mnist_cnn',
                                  ratio=10.0), 'ratio applies to partition=quantity_skew only'),
      ('text_evaluation_of_images', dict(
          task='mnist_cnn', text_evaluation='full'), 'mnist_cnn does not take text_evaluation'),
      # A flag given a string (from a preset, a script): 'no' is true, so the run went on.
      ('flag_given_a_string', dict(allow_nonfinite_rounds='no'),
       r"^allow_nonfinite_rounds must be True or False, got 'no'\.$"),
      ('optional_flag_given_a_number', dict(
          task='mnist_cnn', double_softmax=0), r'^double_softmax must be True or False, got 0\.$'))
  def test_bad_values_are_one_clear_error(self, overrides, message):
    with self.assertRaisesRegex(config_lib.ConfigError, message):
      config_lib.validate(_config(self.get_temp_dir(), **overrides))

  def test_a_runs_flag_given_a_string_is_refused_for_simulate_too(self):
    # `simulate`'s settings (a RunSettings) are checked by validate_run, not validate.
    with self.assertRaisesRegex(config_lib.ConfigError,
                                "^allow_nonfinite_rounds must be True or False, got 'no'"):
      config_lib.validate_run(config_lib.RunSettings(allow_nonfinite_rounds='no'), 3)

  def test_defaults_and_authors_settings_are_valid(self):
    config_lib.validate(_config(self.get_temp_dir()))
    config_lib.validate(
        _config(self.get_temp_dir(),
                task='mnist_cnn',
                clients_per_round=3,
                client_sampling='python_random',
                reg_steps='all',
                algorithms=('flare', 'ec', 'ef21_dense', 'ec_ffl')))
    config_lib.validate(
        _config(self.get_temp_dir(), task='mnist_cnn', double_softmax=False, model_seed=3))

  def test_unwritable_output_dir(self):
    blocker = os.path.join(self.get_temp_dir(), 'a_file')
    with open(blocker, 'w') as f:
      f.write('x')
    with self.assertRaisesRegex(config_lib.ConfigError, 'is not writable'):
      config_lib.validate(_config(f'{blocker}/sub'))
    # The file itself: said so (it was "another program is checking the directory").
    with self.assertRaisesRegex(config_lib.ConfigError, 'a_file is a file, not a directory'):
      config_lib.validate(_config(blocker))


class CompareForResumeTest(tf.test.TestCase):

  def test_results_changing_fields_are_refused_by_name(self):
    recorded = config_lib.as_dict(_config('out', tau=0.05, keep_percent=0.001))
    with self.assertRaisesRegex(config_lib.ConfigError,
                                r'keep_percent: 0.001 then, 0.01 now; tau: 0.05 then, 0.5 now'):
      config_lib.compare_for_resume(recorded, _config('out', tau=0.5, keep_percent=0.01))

  def test_rounds_evaluation_checkpoints_and_execution_may_change(self):
    recorded = config_lib.as_dict(_config('out', rounds=10))
    changed = config_lib.compare_for_resume(
        recorded,
        _config('out',
                rounds=30,
                eval_every=5,
                checkpoint_every=2,
                execution='local',
                client_threads=2))
    self.assertEqual(
        changed,
        dict(rounds=[10, 30],
             eval_every=[10, 5],
             checkpoint_every=[10, 2],
             execution=['inprocess', 'local'],
             client_threads=[None, 2]))
    self.assertEqual(config_lib.compare_for_resume(recorded, _config('out', rounds=10)), {})

  def test_the_model_seed_and_the_fixed_cnn_are_results_changing(self):
    recorded = config_lib.as_dict(_config('out', task='mnist_cnn'))
    for field, value in (('model_seed', 1), ('double_softmax', False)):
      with self.assertRaisesRegex(config_lib.ConfigError, f'{field}: None then, {value} now'):
        config_lib.compare_for_resume(recorded, _config('out', task='mnist_cnn', **{field: value}))
    # A run recorded before these fields existed resumes with their defaults.
    old = {k: v for k, v in recorded.items() if k not in ('model_seed', 'double_softmax')}
    self.assertEqual(config_lib.compare_for_resume(old, _config('out', task='mnist_cnn')), {})

  def test_local_epochs_are_results_changing_for_every_algorithm(self):
    # E repeats every client's data whatever trains, though only EC-FFL declares the knob.
    recorded = config_lib.as_dict(_config('out', algorithms=('flare', 'fedavg')))
    with self.assertRaisesRegex(config_lib.ConfigError, 'local_epochs: 1 then, 3 now'):
      config_lib.compare_for_resume(recorded,
                                    _config('out', algorithms=('flare', 'fedavg'), local_epochs=3))

  def test_the_topk_rule_is_results_changing_and_defaults_to_the_authors(self):
    recorded = config_lib.as_dict(_config('out'))
    with self.assertRaisesRegex(config_lib.ConfigError, "topk_rule: 'authors' then, 'global' now"):
      config_lib.compare_for_resume(recorded, _config('out', topk_rule='global'))
    old = {k: v for k, v in recorded.items() if k != 'topk_rule'}  # Recorded before the knob.
    self.assertEqual(config_lib.compare_for_resume(old, _config('out')), {})
    with self.assertRaisesRegex(config_lib.ConfigError, 'topk_rule'):
      config_lib.compare_for_resume(old, _config('out', topk_rule='exact'))

  def test_masking_weighted_by_its_old_knob_resumes_only_so_weighted(self):
    masked = dict(algorithms=('mask_none',))
    old = {
        k: v
        for k, v in config_lib.as_dict(_config('out', **masked)).items()
        if k != 'client_weighting'
    }
    for weighting in ('uniform', 'num_examples'):
      recorded = dict(old, mask_weighting=weighting)
      self.assertEqual(
          config_lib.compare_for_resume(recorded,
                                        _config('out', client_weighting=weighting, **masked)), {})
    with self.assertRaisesRegex(config_lib.ConfigError,
                                "client_weighting: 'num_examples' then, 'uniform' now"):
      config_lib.compare_for_resume(dict(old, mask_weighting='num_examples'),
                                    _config('out', **masked))

  def test_a_knob_added_since_counts_as_its_default(self):
    # A run made before `qsgd_levels` existed (default 4) resumes; another value is refused.
    qsgd = dict(algorithms=('qsgd_ef',))
    old = config_lib.as_dict(_config('out', **qsgd))
    del old['qsgd_levels']
    self.assertEqual(config_lib.compare_for_resume(old, _config('out', **qsgd)), {})
    with self.assertRaisesRegex(config_lib.ConfigError, 'qsgd_levels: 4 then, 3 now'):
      config_lib.compare_for_resume(old, _config('out', qsgd_levels=3, **qsgd))
    # A knob that none of the run's algorithms takes is not compared.
    without = config_lib.as_dict(_config('out', qsgd_levels=8))
    self.assertEqual(config_lib.compare_for_resume(without, _config('out')), {})


if __name__ == '__main__':
  tf.test.main()
