"""Hyperparameters declared once: each knob's default, help text and check, beside its concept.

A `Knob` is declared in the module of what it tunes (`sparsification.KEEP_PERCENT`,
`schedules.TAU`, ...). Everything else is made from it:

  * an algorithm's parameters are a frozen dataclass of knobs (`flare.FlareParams`: fields
    `knob.field()`, checked when built, `check_fields`), and the registry row of an
    algorithm is its builder and that class (`registry.ALGORITHMS`);
  * every knob of every algorithm is a field of `registry.Knobs` (the same `knob.field()`,
    held to the Params' declarations at import), which the experiment configuration
    (`experiment.config.ExperimentConfig`) inherits, checked once by its `validate`;
  * the binaries' flags and their help are generated from the configuration's fields
    (`experiments/config_flags.py`).

So a new knob is one `Knob`, one field in the Params of each algorithm that takes it and one
in `registry.Knobs`.
"""

import dataclasses
from collections.abc import Callable
import math
from typing import Any, TypeGuard

import attrs
import numpy as np

HELP, CHECK, HOST_ONLY = 'help', 'check', 'host_only'

# The arithmetic a setting reaches: ints become TensorFlow's int32 counters, shapes and seeds;
# floats become float32 (learning rates, strengths, percents). A number outside these ranges
# would not fail: it would overflow or round to 0 there and train something else.
INT_LIMIT = 2**31
FLOAT32_MAX = 3.4028234663852886e38
FLOAT32_TINY = 1.1754943508222875e-38  # The smallest normal float32 (CPUs flush less to 0).


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
  check: Callable[[Any], None] | None = None

  def field(self, default: Any = dataclasses.MISSING) -> Any:
    """A dataclass field of this knob (optionally with another default)."""
    return dataclasses.field(default=self.default if default is dataclasses.MISSING else default,
                             metadata={
                                 HELP: self.help,
                                 CHECK: self.check
                             })


def setting(default: Any,
            help_text: str,
            check: Callable[[Any], None] | None = None,
            *,
            host_only: bool = False) -> Any:
  """A dataclass field that is no algorithm's knob (the task, the rounds, ...), with help.

  `host_only`: a number only Python computes with (a timeout, a memory budget), which its own
  check bounds; `check_fields` does not hold it to TensorFlow's ranges."""
  return dataclasses.field(default=default,
                           metadata={
                               HELP: help_text,
                               CHECK: check,
                               HOST_ONLY: host_only
                           })


def check_representable(name: str, value: Any) -> None:
  """Refuses a number the run's arithmetic does not hold (`INT_LIMIT`, float32's range).

  Ints must be in [-2^31, 2^31); floats finite, and 0 or of magnitude in [1.2e-38, 3.4e38].
  Anything else (bools, strings, None) passes.

  Raises:
    ValueError: naming `name`, the value and the range.
  """
  if isinstance(value, bool):
    return
  if isinstance(value, int) and not -INT_LIMIT <= value < INT_LIMIT:
    # The bound it crossed: a count >= 1 told "[-2^31, 2^31)" would read as if -5 were fine.
    bound = 'below 2^31' if value > 0 else 'of at least -2^31'
    raise ValueError(f'{name} must be an int {bound} (the run counts in int32), got {value}.')
  if isinstance(value, float) and not (math.isfinite(value) and
                                       (value == 0 or FLOAT32_TINY <= abs(value) <= FLOAT32_MAX)):
    raise ValueError(f'{name} must be a finite number, 0 or of magnitude in [1.2e-38, 3.4e38] '
                     f'(the run computes in float32), got {value}.')


def as_python(value: Any) -> Any:
  """A numpy scalar (`np.int64(3)` from an `np.arange`, `np.float32(0.5)`) as the Python number
  it holds; anything else as it is. The one conversion of numpy numbers at the entries."""
  return value.item() if isinstance(value, np.generic) else value


def as_python_numbers(instance) -> None:
  """Replaces each numpy scalar field of a dataclass instance (`np.int64(3)` from an
  `np.arange`, `np.float32(0.5)`) by the Python number it holds, so that it passes the int
  checks (`is_int`) and goes into `config.json` as a number."""
  for field in dataclasses.fields(instance):
    value = getattr(instance, field.name)
    if isinstance(value, np.generic):
      object.__setattr__(instance, field.name, as_python(value))  # Frozen ones too.


def is_flag(annotation: Any) -> bool:
  """Whether a field or parameter is declared a flag: `bool`, or `bool | None`."""
  return annotation in (bool, 'bool', bool | None, 'bool | None')


def check_flag(name: str, value: Any) -> None:
  """Refuses a flag given another value than True or False (`'no'` would be true)."""
  if not isinstance(value, bool):
    raise ValueError(f'{name} must be True or False, got {value!r}.'[:160])


def check_kinds(instance, fields=None) -> None:
  """Checks the kind of every field of a dataclass instance (or of `fields`): a flag is a
  bool (`check_flag`), a number is representable (`check_representable`, but for a
  `host_only` setting).

  Raises:
    ValueError: the first field refused.
  """
  for field in dataclasses.fields(instance) if fields is None else fields:
    value = getattr(instance, field.name)
    if is_flag(field.type) and value is not None:
      check_flag(field.name, value)
    if not field.metadata.get(HOST_ONLY):
      check_representable(field.name, value)


def check_fields(instance) -> None:
  """Checks every field of a dataclass instance: its kind (`check_kinds`), then its own check
  (its `metadata['check']`).

  Raises:
    ValueError: the first field refused.
  """
  check_kinds(instance)
  for field in dataclasses.fields(instance):
    check = field.metadata.get(CHECK)
    value = getattr(instance, field.name)
    if check is not None and value is not None:
      check(value)


class Params:
  """The base of an algorithm's parameters: a frozen dataclass of knobs, each checked when
  built (`check_fields`).

    @dataclasses.dataclass(frozen=True)
    class FlareParams(hyperparameters.Params):
      keep_percent: float = sparsification.KEEP_PERCENT.field()
  """

  def __post_init__(self) -> None:
    as_python_numbers(self)
    check_fields(self)


def help_of(field: dataclasses.Field) -> str:
  return field.metadata.get(HELP, '')


def is_int(value: Any) -> TypeGuard[int]:
  """Whether `value` is a Python int and not a bool (the one test of an int setting)."""
  return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> TypeGuard[int | float]:
  """Whether `value` is a Python int or float and not a bool."""
  return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_int(name: str, minimum: int) -> Callable[[Any], None]:
  """A check that a value is an int (not a bool) >= `minimum`."""

  def check(value) -> None:
    if not is_int(value) or value < minimum:
      raise ValueError(f'{name} must be an int >= {minimum}, got {value!r}.')

  return check


def check_number(name: str, minimum: float, *, inclusive: bool = True) -> Callable[[Any], None]:
  """A check that a value is a finite number >= `minimum` (> with `inclusive=False`)."""

  def check(value) -> None:
    if not is_number(value) or value != value:
      raise ValueError(f'{name} must be a number, got {value!r}.')
    if value < minimum or (not inclusive and value == minimum):
      raise ValueError(f'{name} must be {">=" if inclusive else ">"} {minimum}, got {value}.')

  return check
