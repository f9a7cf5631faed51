// The chi-square distribution's survival function for the statistical tests (no runtime library):
// sf(x; k) = Q(k/2, x/2), the regularized upper incomplete gamma function, by its power series
// (x < a + 1) or its continued fraction (modified Lentz), with ln Gamma exact for the integer and
// half-integer a that integer degrees of freedom give.

/** The suite's false-alarm rate per assertion, as tests/stats.py's ALPHA. */
export const ALPHA = 1e-6;

function lnGammaHalf(a) {
  // a = n or n + 1/2: Gamma(n) = (n - 1)!, Gamma(n + 1/2) = sqrt(pi) * prod_{i < n} (i + 1/2)
  if (!(a > 0) || !Number.isInteger(2 * a)) throw new RangeError(`a must be a positive multiple of 1/2, got ${a}`);
  let sum = Number.isInteger(a) ? 0 : 0.5 * Math.log(Math.PI);
  for (let t = Number.isInteger(a) ? 1 : 0.5; t < a; t += 1) sum += Math.log(t);
  return sum;
}

function lowerSeries(a, x) {
  // P(a, x) = x^a e^-x / Gamma(a + 1) * sum_n x^n / ((a + 1) ... (a + n))
  let term = 1 / a;
  let sum = term;
  for (let n = 1; n < 10_000; n++) {
    term *= x / (a + n);
    sum += term;
    if (term < sum * 1e-16) break;
  }
  return sum * Math.exp(-x + a * Math.log(x) - lnGammaHalf(a));
}

function upperFraction(a, x) {
  // Q(a, x) = e^-x x^a / Gamma(a) * 1 / (x + 1 - a - 1(1 - a) / (x + 3 - a - 2(2 - a) / (x + 5 - a - ...)))
  const tiny = 1e-300;
  let b = x + 1 - a;
  let c = 1 / tiny;
  let d = 1 / b;
  let h = d;
  for (let i = 1; i < 10_000; i++) {
    const an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (Math.abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-16) break;
  }
  return Math.exp(-x + a * Math.log(x) - lnGammaHalf(a)) * h;
}

/** P(X > x) for X chi-square with k (integer) degrees of freedom. */
export function chiSquareSf(x, k) {
  if (!Number.isInteger(k) || k < 1) throw new RangeError(`k must be an integer >= 1, got ${k}`);
  if (x <= 0) return 1;
  const a = k / 2;
  const half = x / 2;
  return half < a + 1 ? 1 - lowerSeries(a, half) : upperFraction(a, half);
}

/**
 * The p-value of observed counts against expected ones, rows of cells whose totals are fixed by the
 * design (one constraint per row): sum (o - e)^2 / e on cells - rows degrees of freedom.
 */
export function chiSquarePValue(observed, expected) {
  let stat = 0;
  let cells = 0;
  observed.forEach((row, r) => row.forEach((o, c) => {
    const e = expected[r][c];
    stat += (o - e) ** 2 / e;
    cells += 1;
  }));
  return chiSquareSf(stat, cells - observed.length);
}
