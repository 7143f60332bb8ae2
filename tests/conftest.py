"""Test-session hooks: no TFF worker process outlives the test run."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

from tff_flare import runtime  # pylint: disable=g-import-not-at-top,wrong-import-position


def pytest_sessionfinish(session, exitstatus):
  del session, exitstatus
  runtime.stop_local_workers()
