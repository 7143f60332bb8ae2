"""Test-session hooks: no TFF worker outlives the run, and no phantom tests are collected."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
os.environ.setdefault('TF_CPU_ALLOCATOR_USE_BFC', 'true')  # As the binaries (experiments/).

from tff_flare.execution import cleanup  # pylint: disable=g-import-not-at-top,wrong-import-position

cleanup.mute_tff_shutdown_noise()  # TFF's own message at every interpreter exit.


def pytest_collection_modifyitems(session, config, items):
  """Drops `tf.test.TestCase.test_session`, a TF helper whose name pytest takes for a test
  (it would be reported as a skipped test in every test class)."""
  del session, config
  items[:] = [item for item in items if item.name != 'test_session']


def pytest_sessionfinish(session, exitstatus):
  del session, exitstatus
  cleanup.stop_local_workers()


def pytest_terminal_summary(terminalreporter, exitstatus, config):
  """Says so when the check against the authors' own code (`test_golden.py`) did not run:
  without its data it is skipped, and a skip is easy to miss among the dots."""
  del exitstatus, config
  skipped = [
      report for report in terminalreporter.stats.get('skipped', [])
      if 'test_golden' in report.nodeid
  ]
  if skipped:
    reason = skipped[0].longrepr[-1] if isinstance(skipped[0].longrepr, tuple) else ''
    terminalreporter.write_line(
        f'The golden check against the authors\' code did not run ({len(skipped)} tests '
        f'skipped: {reason}). Give it the data: ln -s <the shared folder> ../shared, or '
        'TFF_FLARE_SHARED=<folder>.',
        yellow=True,
        bold=True)
