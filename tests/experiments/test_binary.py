"""Tests of `experiments.binary`: every binary's bad flag, and one run per exit status.

These start fresh interpreters (what a user meets is the whole program); the messages
themselves are checked in-process by the tests of the modules that raise them.
"""

import os
import pathlib
import resource
import signal
import subprocess
import sys
import time

import tensorflow as tf

from experiments import binary
from tff_flare.experiment import config as config_lib
from tff_flare.simulation import hooks

BINARIES = ('run_experiment', 'run_masking', 'run_masking_grid', 'demo', 'plot', 'reproduce',
            'worker', 'get_data')
# A flag of each that its --help must list (its own, or the configuration's it takes).
OWN_FLAG = dict(run_experiment='--tau_decay',
                run_masking='--keep_probability',
                run_masking_grid='--partitions',
                demo='--rounds',
                plot='--table_rounds',
                reproduce='--results_dir',
                worker='--port',
                get_data='--datasets')

# A bad value of each benchmark's (its list flags are checked before any work).
BENCHMARK_BAD_FLAGS = dict(central_mnist='--batch_size=0',
                           checkpoint_garbage='--saves=0',
                           checkpoint_memory='--layouts=files,zip',
                           client_state_memory='--storages=tape',
                           floor='--algorithms=flare,nosuch',
                           gpu_check='--modes=remote',
                           input_pipeline='--nosuch=1',
                           memory='--tasks=mnist_fcc',
                           round_time='--modes=local,workers=0:files')


def _start(module: str,
           *args: str,
           quiet: bool = True,
           file_size_limit: int = -1) -> subprocess.Popen:
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  if not quiet:  # As a user starts it: the binary itself keeps TensorFlow quiet.
    env.pop('TF_CPP_MIN_LOG_LEVEL')
  limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))
  module = module if '.' in module else f'experiments.{module}'
  return subprocess.Popen([sys.executable, '-m', module, *args],
                          env=env,
                          stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE,
                          text=True,
                          preexec_fn=limit if file_size_limit >= 0 else None)


def _finish(process: subprocess.Popen, timeout_s: float = 300) -> tuple[int, str, str]:
  stdout, stderr = process.communicate(timeout=timeout_s)
  return process.returncode, stdout, stderr


class BinaryTest(tf.test.TestCase):

  def assert_one_line(self, stderr: str, status: int, expected_status: int, start: str):
    self.assertEqual(status, expected_status, stderr[-2000:])
    lines = [line for line in stderr.splitlines() if line.strip()]
    self.assertLen(lines, 1, stderr[-2000:])
    self.assertStartsWith(lines[0], start)
    self.assertNotIn('Traceback', stderr)
    self.assertNotIn('Exception ignored', stderr)

  def test_every_binary_refuses_a_bad_flag_in_one_line(self):
    processes = {name: _start(name, '--no_such_flag=1') for name in BINARIES}
    for name, process in processes.items():
      status, _, stderr = _finish(process)
      self.assert_one_line(stderr, status, 2, 'error: ')
      self.assertIn('no_such_flag', stderr, name)

  def test_every_benchmark_refuses_a_bad_flag_in_one_line(self):
    folder = pathlib.Path(__file__).parents[2] / 'benchmarks'
    benchmarks = sorted(
        path.stem for path in folder.glob('*.py') if 'binary.run(main)' in path.read_text())
    self.assertCountEqual(benchmarks, BENCHMARK_BAD_FLAGS)
    for group in (benchmarks[:5], benchmarks[5:]):  # At most 5 interpreters at once.
      processes = {name: _start(f'benchmarks.{name}', BENCHMARK_BAD_FLAGS[name]) for name in group}
      for name, process in processes.items():
        status, _, stderr = _finish(process)
        self.assert_one_line(stderr, status, 2, 'error: ')
        self.assertIn(BENCHMARK_BAD_FLAGS[name].split('=')[0].lstrip('-'), stderr, name)

  def test_every_binary_lists_its_flags_on_help_and_exits_0_quietly(self):
    processes = {name: _start(name, '--help', quiet=False) for name in BINARIES}
    for name, process in processes.items():
      status, stdout, stderr = _finish(process)
      self.assertEqual(status, 0, name + stderr[-2000:])
      self.assertIn(OWN_FLAG[name] + ':', stdout, name)
      self.assertNotIn('--test_tmpdir', stdout, name)  # No absl or TF internals.
      self.assertNotIn('.py:', stdout, name)
      self.assertEqual(stderr.strip(), '', name)  # No TensorFlow line, no traceback.
    _, stdout, _ = _finish(_start('run_experiment', '--help'))
    self.assertIn('cnn_unavailable_3: mnist_cnn, R = 0.001 %', stdout)  # A line a preset.

  def test_one_run_per_exit_status(self):
    out = self.get_temp_dir()
    digits = ['--task=digits_demo', '--clients_per_round=3', '--execution=inprocess']
    runs = {
        2:
            _start('run_experiment', *digits, '--seed=-1', f'--output_dir={out}/bad'),
        3:
            _start('run_experiment', '--task=digits_demo', '--execution=remote',
                   '--workers=localhost:1', '--worker_timeout_s=1', f'--output_dir={out}/gone'),
        4:
            _start('run_experiment', *digits, '--algorithms=fedavg', '--rounds=1',
                   '--learning_rate=1e38', f'--output_dir={out}/huge'),
        # `ulimit -f 30`: a file of more than 30 KiB fails, as on a full disk.
        5:
            _start('run_experiment',
                   *digits,
                   '--algorithms=flare,ef21',
                   '--rounds=3',
                   '--checkpoint_every=1',
                   f'--output_dir={out}/full',
                   file_size_limit=30 << 10),
    }
    messages = {
        2: 'error: seed must be an int in [0, 2^31), got -1',
        3: 'error: TFF worker localhost:1: no worker answers',
        4: 'error: The model of fedavg after 1 rounds evaluates to test loss nan',
        5: 'error: The checkpoint after round 0 could not be written'
    }
    for expected, process in runs.items():
      status, _, stderr = _finish(process)
      self.assert_one_line(stderr, status, expected, messages[expected])
    # No half checkpoint: nothing in checkpoints/ after the failed first save.
    self.assertEqual(list((pathlib.Path(out) / 'full' / 'checkpoints').iterdir()), [])

  def test_bad_inputs_of_the_classes_fixed_are_one_line(self):
    out = pathlib.Path(self.get_temp_dir())
    (out / 'a_file').write_text('x')
    (out / 'run').mkdir()
    (out / 'latin1.flags').write_bytes(b'\xff--rounds=3\n')
    os.mkfifo(out / 'pipe')  # Was: absl's read of it blocked forever.
    (out / 'nested.flags').write_text(f'--rounds=1\n--flagfile={out}/pipe\n')
    cases = {
        'error: a flag file is not UTF-8 text':
            _start('plot', f'--flagfile={out}/latin1.flags'),
        r'error: --flagfile=.*/pipe is not a file \(a folder, a pipe or a device\?\)':
            _start('run_experiment', '--flagfile', f'{out}/pipe', f'--output_dir={out}/piped'),
        r'error: --flagfile=.*/pipe is not a file':
            _start('reproduce', f'--flagfile={out}/nested.flags'),
        # absl's own 'ERROR:: ' prefix dropped: one 'error:' on the line.
        r'^error: Unable to open flagfile: .*No such file or directory: .*/absent\.flags':
            _start('plot', f'--flagfile={out}/absent.flags'),
        'error: --results_dir=.*missing does not exist: no runs to summarize':
            _start('reproduce', '--summarize_only', f'--results_dir={out}/missing'),
        # A flag that would change nothing, and a round before the first (was: exit 0).
        'error: --table_rounds is the table of --seeds; without it there is none':
            _start('plot', str(out / 'run'), '--table_rounds=5', f'--output={out}/t.png'),
        r'error: --table_rounds takes rounds >= 0, got -5':
            _start('plot', '--seeds', str(out / 'run'), '--table_rounds=100,-5',
                   f'--output={out}/s.png'),
        'error: --output=.*x.txt must name a .png file':
            _start('plot', str(out / 'run'), f'--output={out}/x.txt'),
        'error: Output directory .*a_file is a file, not a directory':
            _start('run_experiment', f'--output_dir={out}/a_file'),
        r'error: learning_rate must be .*float32\), got 1e-45':
            _start('run_experiment', '--learning_rate=1e-45', f'--output_dir={out}/tiny'),
        r'error: The worker timeout must be in \(0, 604800\] seconds':
            _start('run_experiment', '--worker_timeout_s=1e308', f'--output_dir={out}/long'),
        # A path the system refuses by its form: exit 2, the path shown once (was: exit 5).
        r'error: Output directory .*\.\.\.a+/x has a name of 300 bytes; file systems take at '
        r'most 255\.$':
            _start('run_experiment', f'--output_dir={out}/{"a" * 300}/x'),
        r'error: --results_dir .*/b{10,}\.\.\.b+ is 5\d{3} bytes long; paths may be at most '
        r'4095\.$':
            _start('reproduce', '--list', f'--results_dir={out}/' + '/'.join(['b' * 200] * 25)),
    }
    for message, process in cases.items():
      status, _, stderr = _finish(process)
      self.assert_one_line(stderr, status, 2, 'error: ')
      self.assertRegex(stderr, message)
    self.assertFalse((out / 'tiny').exists())

  def test_nothing_is_written_on_stderr_after_the_error_line(self):
    # A native library writing on file descriptor 2 as the interpreter shuts down (gRPC's
    # 'Kick failed' once failed CI here): an atexit hook registered by `main` stands in.
    script = '\n'.join(('import atexit, os', 'from experiments import binary', 'def main(argv):',
                        "  atexit.register(os.write, 2, b'E0000 shutdown noise\\n')",
                        "  raise binary.BadInput('the one line')", 'binary.run(main)'))
    result = subprocess.run([sys.executable, '-c', script],
                            capture_output=True,
                            text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3'),
                            timeout=300)
    self.assert_one_line(result.stderr, result.returncode, 2, 'error: the one line')

  def test_ctrl_c_while_starting_is_one_line(self):
    process = _start('run_experiment', f'--output_dir={self.get_temp_dir()}/interrupted')
    time.sleep(1.5)  # Python is up; TensorFlow's import takes seconds more.
    process.send_signal(signal.SIGINT)
    status, _, stderr = _finish(process, 120)
    self.assert_one_line(stderr, status, 130, 'Interrupted')


class ExitStatusTest(tf.test.TestCase):

  def test_the_mapping(self):
    self.assertEqual(binary.exit_status(config_lib.ConfigError('x')), 2)
    self.assertEqual(binary.exit_status(hooks.NonFiniteEvaluationError('x')), 4)
    self.assertIsNone(binary.exit_status(RuntimeError('a bug keeps its traceback')))
    self.assertEqual(binary.one_line(ValueError('two\nlines Detected at node x\n y')), 'two lines')


if __name__ == '__main__':
  tf.test.main()
