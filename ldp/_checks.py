"""Parameter validation shared by the core: ValueErrors that name the parameter and its value."""
from __future__ import annotations

import math
import numbers


def check_probability(name: str, value, *, open_low: bool = False, open_high: bool = False) -> float:
    """Return ``value`` as a float in [0, 1] (or the open interval asked for), else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {name}={value!r}")
    v = float(value)
    low_ok = v > 0.0 if open_low else v >= 0.0
    high_ok = v < 1.0 if open_high else v <= 1.0
    if not (math.isfinite(v) and low_ok and high_ok):
        lo = "(0" if open_low else "[0"
        hi = "1)" if open_high else "1]"
        raise ValueError(f"{name} must be in {lo}, {hi}, got {name}={value!r}")
    return v


def check_positive(name: str, value, *, allow_zero: bool = False, allow_inf: bool = False) -> float:
    """Return ``value`` as a float > 0 (or >= 0), else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {name}={value!r}")
    v = float(value)
    if math.isnan(v) or (math.isinf(v) and not allow_inf) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"{name} must be {bound}, got {name}={value!r}")
    return v


def check_int(name: str, value, *, minimum: int = 0) -> int:
    """Return ``value`` as an int >= ``minimum``, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{name} must be an integer, got {name}={value!r}")
    v = int(value)
    if v < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {name}={value!r}")
    return v


def check_level(level) -> float:
    """A confidence level strictly between 0 and 1."""
    return check_probability("level", level, open_low=True, open_high=True)
