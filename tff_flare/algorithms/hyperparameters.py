"""Hyperparameters declared once: each knob's default, help text and check, beside its concept.

A `Knob` is declared in the module of what it tunes (`sparsification.KEEP_PERCENT`,
`schedules.TAU`, ...). Everything else is made from it:

  * an algorithm's parameters are a frozen dataclass of knobs (`flare.FlareParams`: fields
    `knob.field()`, checked when built, `check_fields`), and the registry row of an
    algorithm is its builder and that class (`registry.ALGORITHMS`);
  * the experiment configuration holds the same knobs as fields
    (`experiment.config.ExperimentConfig`), checked once by its `validate`;
  * the binaries' flags and their help are generated from the configuration's fields
    (`experiments/config_flags.py`).

So a new knob is one `Knob` and one field in the Params of each algorithm that takes it.
"""

import dataclasses
from collections.abc import Callable
from typing import Any, Optional

import attrs

HELP, CHECK = 'help', 'check'


@attrs.frozen
class Knob:
  """A hyperparameter: its default, one line of help, and its check.

  Attributes:
    default: the value when none is given (None: the task's default, where the help says so).
    help: what it is, in the paper's terms (e.g. "R: percent of each tensor's entries a
      client sends").
    check: `value -> None`, raises `ValueError` with a message naming the knob; not called
      for None.
  """

  default: Any
  help: str
  check: Optional[Callable[[Any], None]] = None

  def field(self, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field of this knob (optionally with another default)."""
    return dataclasses.field(default=self.default if default is dataclasses.MISSING else default,
                             metadata={HELP: self.help, CHECK: self.check})


def setting(default: Any, help_text: str, check: Optional[Callable[[Any], None]] = None) -> Any:
  """A dataclass field that is no algorithm's knob (the task, the rounds, ...), with help."""
  return Knob(default, help_text, check).field()


def check_fields(instance) -> None:
  """Runs the check of every field of a dataclass instance (its `metadata['check']`).

  Raises:
    ValueError: the first field whose value its check refuses.
  """
  for field in dataclasses.fields(instance):
    check = field.metadata.get(CHECK)
    value = getattr(instance, field.name)
    if check is not None and value is not None:
      check(value)


def help_of(field: dataclasses.Field) -> str:
  return field.metadata.get(HELP, '')


def check_int(name: str, minimum: int) -> Callable[[Any], None]:
  """A check that a value is an int (not a bool) >= `minimum`."""

  def check(value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
      raise ValueError(f'{name} must be an int >= {minimum}, got {value!r}.')

  return check


def check_number(name: str, minimum: float, *, inclusive: bool = True
                 ) -> Callable[[Any], None]:
  """A check that a value is a finite number >= `minimum` (> with `inclusive=False`)."""

  def check(value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value:
      raise ValueError(f'{name} must be a number, got {value!r}.')
    if value < minimum or (not inclusive and value == minimum):
      raise ValueError(f'{name} must be {">=" if inclusive else ">"} {minimum}, got {value}.')

  return check
