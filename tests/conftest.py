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
