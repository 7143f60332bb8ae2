"""Tests of `tff_flare.simulation.files`: the one writer of the project's files."""

import os
import pathlib
import tempfile

import tensorflow as tf

from tff_flare.simulation import files


class ReadTest(tf.test.TestCase):

  def test_reads_a_file_and_refuses_what_a_read_would_wait_on(self):
    base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))
    (base / 'page.md').write_text('é one')
    self.assertEqual(files.read_text(base / 'page.md'), 'é one')
    self.assertEqual(files.read_bytes(base / 'page.md'), 'é one'.encode())
    files.check_file(base / 'page.md')
    files.check_file(base / 'absent')  # Nothing there: nothing to refuse.
    with self.assertRaises(FileNotFoundError):
      files.read_text(base / 'absent')
    os.mkfifo(base / 'pipe')  # Was: a read that never returned.
    for call in (files.read_text, files.read_bytes, files.check_file):
      with self.assertRaisesRegex(files.NotAFileError, r'pipe is a pipe, a socket or a device'):
        call(base / 'pipe')
      with self.assertRaisesRegex(files.NotAFileError, 'is a folder, not a file'):
        call(base)
    self.assertIsInstance(files.NotAFileError('x'), OSError)  # Callers' OSError handlers.


class WriteFileTest(tf.test.TestCase):

  def setUp(self):
    super().setUp()
    self.base = pathlib.Path(tempfile.mkdtemp(dir=self.get_temp_dir()))

  def test_writes_whole_and_replaces(self):
    path = self.base / 'page.md'
    files.write_file(path, 'one')
    files.write_file(path, b'two')
    self.assertEqual(path.read_text(), 'two')
    self.assertEqual(os.listdir(self.base), ['page.md'])  # No temporary left.

  def test_nothing_is_written_through_a_link(self):
    outside = self.base / 'outside'
    outside.mkdir()
    target = outside / 'victim.md'
    target.write_text('kept')
    results = self.base / 'results'
    results.mkdir()
    (results / 'README.md').symlink_to(target)
    (results / 'figure').symlink_to(outside)
    with self.assertRaisesRegex(files.LinkedPathError, 'README.md is a symbolic link'):
      files.write_file(results / 'README.md', 'page')
    with self.assertRaisesRegex(files.LinkedPathError, 'figure is a symbolic link'):
      files.write_file(results / 'figure' / 'victim.md', 'table', within=results)
    self.assertEqual(target.read_text(), 'kept')
    self.assertEqual(sorted(os.listdir(outside)), ['victim.md'])
    for link in ('README.md', 'figure'):  # TF's cleanup of the temp folder fails on links.
      (results / link).unlink()

  def test_a_failed_write_leaves_the_old_file_and_no_temporary(self):
    path = self.base / 'summary.json'
    path.write_text('old')

    with self.assertRaises(TypeError):  # Fails after the temporary file is made.
      files.write_file(path, memoryview)
    self.assertEqual(path.read_text(), 'old')
    self.assertEqual(os.listdir(self.base), ['summary.json'])


if __name__ == '__main__':
  tf.test.main()
