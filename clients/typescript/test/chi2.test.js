// The chi-square survival function of the statistical tests, against exact forms.
import assert from "node:assert/strict";
import { test } from "node:test";

import { chiSquarePValue, chiSquareSf } from "./chi2.js";

test("even degrees of freedom: sf(x; 2m) = exp(-x/2) sum_{i<m} (x/2)^i / i! exactly", () => {
  for (const k of [2, 4, 10, 30, 120]) {
    for (const x of [0.01, 0.5, 1, 3, 10, 40, 100, 150, 300]) {
      let term = 1;
      let sum = 1;
      for (let i = 1; i < k / 2; i++) {
        term *= x / 2 / i;
        sum += term;
      }
      const exact = Math.exp(-x / 2) * sum;
      assert.ok(Math.abs(chiSquareSf(x, k) - exact) <= 1e-12 + 1e-9 * exact, `k=${k} x=${x}: ${chiSquareSf(x, k)} vs ${exact}`);
    }
  }
});

test("odd degrees of freedom: the 5% critical values of 1 and 3 degrees (1.959964^2 and 7.814728)", () => {
  // 1.959963984540054 is the normal 97.5% quantile, so P(Z^2 > its square) = 0.05 exactly
  assert.ok(Math.abs(chiSquareSf(1.959963984540054 ** 2, 1) - 0.05) < 1e-12);
  // sf(x; 3) = sf(x; 1) + sqrt(2x/pi) exp(-x/2): at 7.814727903251178 it is 0.05 (the table's value)
  assert.ok(Math.abs(chiSquareSf(7.814727903251178, 3) - 0.05) < 1e-12);
  // and a monotone tail: bigger statistics are less likely
  assert.ok(chiSquareSf(60, 11) < chiSquareSf(50, 11) && chiSquareSf(50, 11) < chiSquareSf(40, 11));
});

test("the p-value counts one constraint per row", () => {
  // 2 rows of 2 cells: 2 degrees of freedom, so sf = exp(-stat/2)
  const p = chiSquarePValue([[60, 40], [45, 55]], [[50, 50], [50, 50]]);
  assert.ok(Math.abs(p - Math.exp(-(4 + 1) / 2)) < 1e-12);
});
