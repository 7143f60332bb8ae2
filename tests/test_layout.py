"""The architecture, held by tests: who may import whom, and a library that is inert on import.

  algorithms  never import tasks, simulation, execution, experiment or the binaries;
  tasks       never import algorithms;
  tff_flare   (the library) never imports a binary (`experiments`, `benchmarks`).
"""

import ast
import os
import pathlib
import signal
import subprocess
import sys

import tensorflow as tf

ROOT = pathlib.Path(__file__).resolve().parent.parent
BINARIES = ('experiments', 'benchmarks')
FORBIDDEN = {
    'tff_flare/algorithms':
        ('tff_flare.tasks', 'tff_flare.simulation', 'tff_flare.execution', 'tff_flare.experiment') +
        BINARIES,
    'tff_flare/tasks': ('tff_flare.algorithms',) + BINARIES,
    'tff_flare':
        BINARIES,
}


def imported_modules(path: pathlib.Path) -> set[str]:
  """Every module `path` imports (`from a import b` counts as `a.b` and `a`)."""
  modules: set[str] = set()
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      modules.update(alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom) and node.module:
      modules.add(node.module)
      modules.update(f'{node.module}.{alias.name}' for alias in node.names)
  return modules


def _library_modules() -> list[str]:
  return sorted('.'.join(p.relative_to(ROOT).with_suffix('').parts).replace('.__init__', '')
                for p in (ROOT / 'tff_flare').rglob('*.py'))


class ImportRulesTest(tf.test.TestCase):

  def test_layers_import_only_what_they_may(self):
    violations = []
    for folder, forbidden in FORBIDDEN.items():
      for path in sorted((ROOT / folder).rglob('*.py')):
        for module in imported_modules(path):
          if any(module == f or module.startswith(f + '.') for f in forbidden):
            violations.append(f'{path.relative_to(ROOT)} imports {module}')
    self.assertEmpty(violations)

  def test_the_rule_would_catch_a_violation(self):
    path = pathlib.Path(self.get_temp_dir()) / 'bad.py'
    path.write_text('from tff_flare.tasks import models\nimport experiments.presets\n')
    self.assertContainsSubset({'tff_flare.tasks.models', 'experiments.presets'},
                              imported_modules(path))


_INERT_CHECK = r'''
import signal, subprocess, sys, threading
import tensorflow as tf
import tensorflow_federated as tff
from tensorflow_federated.python.core.impl.executor_stacks import executor_factory
before = dict(sigint=signal.getsignal(signal.SIGINT), sigterm=signal.getsignal(signal.SIGTERM),
              sighup=signal.getsignal(signal.SIGHUP), threads=threading.active_count(),
              hook=sys.unraisablehook)
import importlib
for name in sys.argv[1:]:
  importlib.import_module(name)
after = dict(sigint=signal.getsignal(signal.SIGINT), sigterm=signal.getsignal(signal.SIGTERM),
             sighup=signal.getsignal(signal.SIGHUP), threads=threading.active_count(),
             hook=sys.unraisablehook)
assert before == after, (before, after)
assert executor_factory.subprocess is subprocess, 'TFF patched'
assert after['sigint'] is signal.default_int_handler
print('INERT', len(sys.argv) - 1)
'''


class InertImportTest(tf.test.TestCase):

  def test_importing_every_library_module_changes_nothing(self):
    modules = _library_modules()
    self.assertIn('tff_flare.execution.cleanup', modules)
    # The check starts as a terminal's program does, with SIGINT at its default (a shell's
    # background job starts with it ignored, and then Python installs no handler of its own).
    result = subprocess.run([sys.executable, '-c', _INERT_CHECK] + modules,
                            capture_output=True,
                            text=True,
                            timeout=300,
                            check=False,
                            cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL='3'),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    self.assertIn(f'INERT {len(modules)}', result.stdout, result.stderr[-3000:])

  def test_importing_the_package_loads_no_task_table_or_data_source(self):
    # `simulate` and its types are loaded at their first use (they validate a run against the
    # task table): a user who only builds processes does not load them.
    check = '''
import sys
import tff_flare
loaded = sorted(m for m in sys.modules if m.startswith(('tff_flare.tasks', 'tff_flare.experiment')))
assert not loaded, loaded
assert callable(tff_flare.simulate) and issubclass(tff_flare.ConfigError, ValueError)
assert 'tff_flare.tasks.registry' in sys.modules
namespace = {}
exec('from tff_flare import *', namespace)
assert set(tff_flare.__all__) <= set(namespace), set(tff_flare.__all__) - set(namespace)
assert set(tff_flare.__all__) <= set(dir(tff_flare))
try:
  tff_flare.simulte
except AttributeError as e:
  assert "no attribute 'simulte'" in str(e), e
print('LAZY')
'''
    result = subprocess.run([sys.executable, '-c', check],
                            capture_output=True,
                            text=True,
                            timeout=300,
                            check=False,
                            cwd=ROOT,
                            env=dict(os.environ, PYTHONPATH=str(ROOT), TF_CPP_MIN_LOG_LEVEL='3'))
    self.assertIn('LAZY', result.stdout, result.stderr[-3000:])


if __name__ == '__main__':
  tf.test.main()
