"""Tests of `tff_flare.algorithms.schedules` against hand-computed tau examples."""

from absl.testing import parameterized
import tensorflow as tf

from tff_flare.algorithms import schedules


class TauScheduleTest(tf.test.TestCase, parameterized.TestCase):

  @parameterized.parameters((0.5, 1.05, 0, 0.476), (0.5, 1.05, 10, 0.292), (0.5, 1.05, 50, 0.0415),
                            (0.05, 1.1, 0, 0.0455), (0.05, 1.1, 10, 0.0175),
                            (0.05, 1.01, 100, 0.0183))
  def test_spec_examples(self, tau, decay, round_num, expected):
    self.assertAllClose(schedules.tau_at_round(tau, decay, round_num), expected, rtol=2e-3)
    self.assertAllClose(schedules.tau_at_round_tf(tau, decay, round_num), expected, rtol=2e-3)

  def test_round_zero_is_already_decayed(self):
    self.assertEqual(schedules.tau_at_round(1.0, 2.0, 0), 0.5)

  def test_tf_equals_python_in_float32(self):
    for r in range(0, 1000, 37):
      self.assertEqual(float(schedules.tau_at_round_tf(0.05, 1.01, r)),
                       float(tf.constant(schedules.tau_at_round(0.05, 1.01, r), tf.float32)))

  @parameterized.parameters((-0.1, 1.1), (0.1, 0.0), (0.1, -2.0), (float('inf'), 1.1))
  def test_invalid(self, tau, decay):
    with self.assertRaises(ValueError):
      schedules.validate_tau(tau, decay)


if __name__ == '__main__':
  tf.test.main()
