"""tff_flare: FLARE and its error-feedback baselines as TensorFlow Federated processes."""

from tff_flare import runtime

runtime.install_cleanup()
