// The dashboard: the view of the current selection (collection, key, window, the marginals charted
// over time and the windows they span) -> Plotly charts. Served, each change of selection asks the
// server for its view (viewUrl); a static page holds one view per collection and key (boot.views).
// window.dashboardReady / dashboardRenders / dashboardQueries let tests wait for a render or a query;
// dashboardFirstRender is when the first view was drawn (ms since navigation), dashboardChartsAt when
// its charts were: a served page loads Plotly (boot.plotlyUrl) only after that first view is on
// screen, and charts drawn before Plotly is there wait for it (the latest per chart).
(function () {
  "use strict";
  const boot = window.LDP_BOOT;
  const state = { data: null, collection: null, dims: null, window: "", sets: null, span: null, versus: "previous",
    tablesEstimator: "consistent" };
  window.dashboardReady = false;
  window.dashboardRenders = 0;
  window.dashboardQueries = 0;

  const pending = new Map();   // chart id -> the latest Plotly.react arguments, until Plotly is loaded
  let plotlyAsked = false;

  function plot(id, traces, layout, options) {
    if (window.Plotly) Plotly.react(id, traces, layout, options);
    else pending.set(typeof id === "string" ? id : id.id, [id, traces, layout, options]);
  }

  function purge(chart) {
    if (window.Plotly) Plotly.purge(chart);
    else pending.delete(chart.id);
  }

  function chartsDrawn() {
    if (window.dashboardChartsAt === undefined) window.dashboardChartsAt = performance.now();
    window.dashboardReady = true;
  }

  function loadPlotly() {   // after the first view is painted: two frames, then the script
    if (plotlyAsked) return;
    plotlyAsked = true;
    requestAnimationFrame(() => requestAnimationFrame(() => {
      const script = document.createElement("script");
      script.src = boot.plotlyUrl;
      script.onload = () => {
        pending.forEach((args) => Plotly.react(...args));
        pending.clear();
        chartsDrawn();
      };
      script.onerror = () => { $("problems").textContent = "the charts' library (" + boot.plotlyUrl + ") did not load"; };
      document.head.appendChild(script);
    }));
  }

  const $ = (id) => document.getElementById(id);
  const iso = (ms) => new Date(ms).toISOString().replace(".000Z", "Z");
  const setName = (r) => r.labels.join(" & ");
  const fmt = (v, digits) => (v === null || v === undefined ? "–" : Number(v).toFixed(digits));
  const config = { displaylogo: false, responsive: true };
  // what a chart shows: the row's display value, projected into the possible range (older rows
  // without display fields show the unbiased estimate); a projected value is marked with "*"
  const shownOf = (r, value, field) => (r[field] === undefined || r[field] === null ? value : r[field]);
  const mark = (r) => (r.out_of_range ? "*" : "");
  const frequencyShown = (r) => shownOf(r, r.frequency, "display_frequency");
  const frequencyLow = (r) => shownOf(r, r.ci_low / r.n_reports, "display_low");
  const frequencyHigh = (r) => shownOf(r, r.ci_high / r.n_reports, "display_high");
  const estimateShown = (r) => shownOf(r, r.estimate, "display_estimate");
  const lowShown = (r) => shownOf(r, r.ci_low, "display_low");
  const highShown = (r) => shownOf(r, r.ci_high, "display_high");
  // a withheld row is held back below the privacy guard (cause "privacy"; rows written before the
  // cause existed are all of that kind) or as not precise enough to publish (cause "precision")
  const privacyHeld = (r) => (r.cause || "privacy") === "privacy";
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf"];  // Plotly's default colorway: each band takes its line's colour
  // past the palette, series differ by dash, then by marker: (colour, dash, symbol) is unique for 400 series
  const DASHES = ["solid", "dash", "dot", "dashdot"];
  const SYMBOLS = ["circle", "square", "diamond", "triangle-up", "x", "cross", "star", "triangle-down", "pentagon",
    "hourglass"];
  const PATTERNS = ["", "/", "\\", "x", ".", "+", "-", "|"];
  const styleOf = (i) => ({ color: PALETTE[i % PALETTE.length],
    dash: DASHES[Math.floor(i / PALETTE.length) % DASHES.length],
    symbol: SYMBOLS[Math.floor(i / (PALETTE.length * DASHES.length)) % SYMBOLS.length],
    pattern: PATTERNS[Math.floor(i / PALETTE.length) % PATTERNS.length] });  // for bars

  // every chart: room above the plot for the toolbar (the legend starts below it), tick labels that
  // push the margins instead of being cut
  function layoutOf(extra) {
    const out = Object.assign({ margin: { t: 36, r: 10, b: 10, l: 10 }, legend: { y: 1, yanchor: "top" } }, extra);
    out.xaxis = Object.assign({ automargin: true }, extra.xaxis || {});
    out.yaxis = Object.assign({ automargin: true }, extra.yaxis || {});
    return out;
  }

  function duration(seconds) {
    const units = [[86400, "d"], [3600, "h"], [60, "min"], [1, "s"]];
    for (const [size, name] of units) if (seconds >= size && seconds % size === 0) return seconds / size + " " + name;
    return seconds + " s";
  }

  function windowText(w) {
    if (!w) return "";
    if (w.type === "global") return "one global window";
    if (w.type === "sliding") return "sliding windows of " + duration(w.size_seconds) + " every " +
      duration(w.period_seconds);
    return "fixed windows of " + duration(w.size_seconds);
  }

  function el(tag, text) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function fillTable(table, header, rows) {
    table.replaceChildren();
    const head = el("tr");
    header.forEach((h) => head.appendChild(el("th", h)));
    table.appendChild(head);
    rows.forEach((cells) => {
      const tr = el("tr");
      cells.forEach((c) => tr.appendChild(el("td", c)));
      table.appendChild(tr);
    });
    if (!rows.length) {  // an empty table says so
      const tr = el("tr");
      const td = el("td", "none");
      td.colSpan = header.length;
      td.className = "empty";
      tr.appendChild(td);
      table.appendChild(tr);
    }
  }

  function info() {
    return state.data.collections.find((c) => c.collection === state.collection) || null;
  }

  function intervalText(kind, level) {
    const pct = Math.round(level * 1000) / 10 + "%";
    return kind === "simultaneous" ? pct + " simultaneous (Šidák)" : pct + " per estimate";
  }

  // a series' rows by window, with a gap (null) at each window of the collection between its first and
  // last row that it has no row in (withheld, or held back as imprecise): the line breaks there
  function withGaps(rows) {
    if (!rows.length) return rows;
    const have = new Set(rows.map((r) => r.window_start));
    const first = rows[0].window_start;
    const last = rows[rows.length - 1].window_start;
    const gaps = state.data.windows.filter((s) => s > first && s < last && !have.has(s))
      .map((s) => ({ window_start: s, gap: true }));
    return rows.concat(gaps).sort((a, b) => a.window_start - b.window_start);
  }
  const orNull = (f) => (r) => (r.gap ? null : f(r));

  // the time axis of rows starting at ``starts`` (ms): one window alone gets a window's span on either side
  // (Plotly's autorange around a single date is a millisecond wide: ticks at 23:59:59.9995)
  function timeAxis(starts) {
    const axis = { title: { text: "window start (UTC)" }, type: "date" };
    const distinct = Array.from(new Set(starts.filter((s) => s !== null && s !== undefined)));
    if (distinct.length === 1) {
      const c = info();
      const w = c && c.window;
      const span = 1000 * ((w && (w.period_seconds || w.size_seconds)) || 86400);
      axis.range = [iso(distinct[0] - span), iso(distinct[0] + span)];
    }
    return axis;
  }

  // series over time with a band each: rows grouped by name, in the given order of names
  function seriesOverTime(chart, names, rows, nameOf, value, low, high, yTitle, emptyText) {
    const traces = [];
    names.forEach((name, i) => {
      const mine = withGaps(rows.filter((r) => nameOf(r) === name).sort((a, b) => a.window_start - b.window_start));
      if (!mine.length) return;
      const x = mine.map((r) => iso(r.window_start));
      const lo = mine.map(orNull(low));
      const hi = mine.map(orNull(high));
      const st = styleOf(i);
      // the band: one closed shape per run of windows between gaps (a null ends a shape)
      const band = { x: [], y: [] };
      let run = [];
      mine.concat([{ gap: true }]).forEach((r, j) => {
        if (!r.gap) { run.push(j); return; }
        if (run.length) {
          band.x.push(...run.map((k) => x[k]), ...run.slice().reverse().map((k) => x[k]), null);
          band.y.push(...run.map((k) => hi[k]), ...run.slice().reverse().map((k) => lo[k]), null);
        }
        run = [];
      });
      traces.push({ x: band.x, y: band.y, fill: "toself",
        mode: "lines", line: { width: 0 }, fillcolor: st.color, opacity: 0.2, hoverinfo: "skip", showlegend: false,
        legendgroup: name, name: name + " band", meta: { role: "band", set: name } });
      // a window alone between gaps has no band to draw: its interval is an error bar
      const alone = mine.map((r, j) => !r.gap && (j === 0 || mine[j - 1].gap) &&
        (j === mine.length - 1 || mine[j + 1].gap));
      const y = mine.map(orNull(value));
      traces.push({ x, y, mode: "lines+markers", name, legendgroup: name,
        line: { color: st.color, dash: st.dash }, marker: { color: st.color, symbol: st.symbol },
        error_y: { type: "data", array: y.map((v, j) => (alone[j] ? hi[j] - v : null)),
          arrayminus: y.map((v, j) => (alone[j] ? v - lo[j] : null)), color: st.color, thickness: 1, width: 3 },
        meta: { role: "estimate", set: name, style: st },
        customdata: mine.map((r, j) => [lo[j], hi[j], r.gap ? null : r.n_reports]),
        hovertemplate: "%{y:.4f} [%{customdata[0]:.4f}, %{customdata[1]:.4f}] n=%{customdata[2]}<extra>" +
          name + "</extra>" });
    });
    plot(chart, traces, layoutOf({ xaxis: timeAxis(rows.map((r) => r.window_start)),
      yaxis: { title: { text: yTitle } }, annotations: traces.length ? [] : [{ text: emptyText, showarrow: false,
        xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }), config);
  }

  function collections() {
    const d = state.data;
    return d.collections_named || (d.collection ? [d.collection] : []);
  }

  // the values of each dimension among the window's keys
  function dimensionValues() {
    const keys = {};
    state.data.keys.forEach((dims) => {
      Object.entries(dims).forEach(([k, v]) => { (keys[k] = keys[k] || new Set()).add(v); });
    });
    const out = {};
    Object.keys(keys).sort().forEach((k) => { out[k] = Array.from(keys[k]).sort(); });
    return out;
  }

  const sameKey = (a, b) => Object.keys(a).length === Object.keys(b).length &&
    Object.keys(a).every((k) => a[k] === b[k]);

  function selected(r) {
    return r.collection === state.data.collection && sameKey(r.dimensions, state.data.dims);
  }

  function currentWindow() {
    return state.data.window;
  }

  // the view of the current selection: asked of the server, or a static page's own
  function staticView() {
    const views = boot.views;
    const names = Object.keys(views);
    const wanted = names.find((k) => {
      const [c, d] = JSON.parse(k);
      return c === state.collection && state.dims && sameKey(d, state.dims);
    }) || names.find((k) => JSON.parse(k)[0] === state.collection) || names[0];
    return views[wanted];
  }

  function query() {
    const q = new URLSearchParams();
    if (state.collection) q.set("collection", state.collection);
    if (state.dims) q.set("dims", JSON.stringify(state.dims));
    if (state.window !== "") q.set("window", String(state.window));
    if (state.sets !== null) q.set("sets", JSON.stringify(state.sets.map((name) => state.setLabels[name] ||
      name.split(" & "))));
    if (state.span !== null) q.set("span", String(state.span));
    return boot.viewUrl + "?" + q.toString();
  }

  let lastBody = null;
  function load() {
    if (!boot.viewUrl) {
      state.data = staticView();
      render();
      return Promise.resolve();
    }
    const url = query();
    window.dashboardQueries += 1;
    return fetch(url, { cache: "no-cache" })   // revalidated with the ETag: unchanged views cost a 304
      .then((response) => {
        if (!response.ok) throw new Error("view.json: HTTP " + response.status);
        return response.text();
      })
      .then((body) => {  // redraw only when the view changed
        if (body === lastBody) return;
        lastBody = body;
        state.data = JSON.parse(body);
        render();
      })
      .catch((err) => { $("status").textContent = "could not load the view: " + err.message; });
  }

  function setOptions(select, values, labelOf, current) {
    select.replaceChildren();
    values.forEach((v) => {
      const o = el("option", labelOf(v));
      o.value = String(v);
      select.appendChild(o);
    });
    if (current !== undefined && values.map(String).includes(String(current))) select.value = String(current);
  }

  function renderFilters() {
    const d = state.data;
    state.collection = d.collection;
    setOptions($("collection-filter"), collections(), (v) => v, state.collection);

    // one select per dimension, kept across renders (a user's click never lands on a replaced element)
    const dims = dimensionValues();
    const box = $("dimension-filters");
    Array.from(box.querySelectorAll("select")).forEach((select) => {
      if (!(select.dataset.dimension in dims)) box.removeChild(select.parentNode);
    });
    Object.entries(dims).forEach(([k, values]) => {
      let select = $("dimension-filter-" + k);
      if (!select) {
        const label = el("label", k + " ");
        select = el("select");
        select.id = "dimension-filter-" + k;
        select.dataset.dimension = k;
        select.addEventListener("change", () => { changeKey(k, select.value); });
        label.appendChild(select);
        box.appendChild(label);
      }
      const shown = Array.from(select.options).map((o) => o.value);
      if (shown.join("\u0000") !== values.join("\u0000")) setOptions(select, values, (v) => v);
      select.value = d.dims[k];
    });
    state.dims = d.dims;

    const windowSelect = $("window-filter");
    const starts = boot.viewUrl ? d.windows.slice().reverse() : (d.window === null ? [] : [d.window]);
    setOptions(windowSelect, starts, (v) => iso(v) + (v === d.latest_complete ? " (latest complete)" : ""),
      d.window);
    state.window = d.window === d.latest_complete ? "" : d.window;

    const spanSelect = $("span-filter");
    setOptions(spanSelect, boot.viewUrl ? d.spans : [d.span], (v) => v + " windows", d.span);

    state.setLabels = {};
    d.sets_available.forEach((labels) => { state.setLabels[labels.join(" & ")] = labels; });
    const available = boot.viewUrl ? d.sets_available.map((labels) => labels.join(" & "))
      : d.sets.map((labels) => labels.join(" & "));
    // a static page charts the chosen sets among those it holds; a served view charts what it was asked
    state.chartedSets = !boot.viewUrl && state.sets !== null ? state.sets : d.sets.map((labels) => labels.join(" & "));
    const marginalSelect = $("marginal-filter");
    setOptions(marginalSelect, available, (v) => v);
    Array.from(marginalSelect.options).forEach((o) => { o.selected = state.chartedSets.includes(o.value); });
    filterSets($("marginal-search").value);
  }

  // the picker shows the sets whose name holds the search text (selected ones always)
  function filterSets(text) {
    const q = (text || "").trim().toLowerCase();
    Array.from($("marginal-filter").options).forEach((o) => {
      o.hidden = Boolean(q) && !o.selected && !o.value.toLowerCase().includes(q);
    });
  }

  // a dimension's value changed: the key with that value and the others kept if published, else
  // the first key with that value
  function changeKey(dim, value) {
    const want = Object.assign({}, state.dims, { [dim]: value });
    const keys = state.data.keys;
    state.dims = keys.find((k) => sameKey(k, want)) || keys.find((k) => k[dim] === value) || want;
    load();
  }

  function renderMarginals(marginals) {
    seriesOverTime("chart-marginals", state.chartedSets, marginals, setName, frequencyShown, frequencyLow, frequencyHigh,
      "estimated frequency",
      "no marginals published for this selection");
    const c = info();
    const kinds = Array.from(new Set(marginals.map((r) => r.interval || "per_cell")));
    const oneWay = state.data.sets_available.filter((s) => s.length === 1).length;
    const charted = state.chartedSets.length;
    const shown = state.sets === null && charted < oneWay ? " Charted: " + charted + " of the " + oneWay +
      " one-way marginals (the first by bit); choose others in the picker." : "";
    $("marginal-interval").textContent = (c ? "Bands: " + kinds.map((k) => intervalText(k, c.level)).join(", ") +
      " intervals" + (kinds.includes("simultaneous") ? ", holding for all marginals of a window together" : "") +
      "." : "") + shown;
  }

  const conditionalName = (r) => "P(" + r.of.join(" & ") + " | " + r.given.join(" & ") + ")";
  const meanName = (r) => "mean " + r.feature + (r.given.length ? " | " + r.given.join(" & ") : "");

  function renderConditionals(rows, windowStart) {
    const c = info();
    const none = c && c.conditionals === 0 && !rows.length;
    $("conditionals-table").style.display = none ? "none" : "";
    if (absent("chart-conditionals", none ? "This collection publishes no conditionals: add conditionals: [{of: " +
      "[a_label], given: [b_label]}] (or all_pairs) to its config to chart P(A | B)." : null)) return;
    const names = Array.from(new Set(rows.map(conditionalName))).sort();
    seriesOverTime("chart-conditionals", names, rows, conditionalName, estimateShown, lowShown, highShown,
      "estimated conditional frequency", "no conditionals published for this selection");
    fillTable($("conditionals-table"), ["conditional", "estimate", "interval", "unbiased estimate", "t_given"],
      rows.filter((r) => r.window_start === windowStart).sort((a, b) => conditionalName(a).localeCompare(
        conditionalName(b))).map((r) => [conditionalName(r), fmt(estimateShown(r), 4) + mark(r),
        fmt(lowShown(r), 4) + " – " + fmt(highShown(r), 4), fmt(r.estimate, 4), fmt(r.given_count, 0)]));
  }

  function renderMeans(rows, windowStart) {
    const c = info();
    const none = c && c.numeric && !Object.keys(c.numeric).length && !rows.length;
    $("means-table").style.display = none ? "none" : "";
    if (absent("chart-means", none ? "This collection has no numeric features: add one, such as {name: " +
      "session_minutes, type: numeric, low: 0, high: 120}, to its config to chart its mean." : null)) return;
    const names = Array.from(new Set(rows.map(meanName))).sort();
    seriesOverTime("chart-means", names, rows, meanName, estimateShown, lowShown, highShown,
      "estimated mean", "no numeric features in this selection");
    fillTable($("means-table"), ["mean", "range", "estimate", "interval", "unbiased estimate", "reports (t_given)"],
      rows.filter((r) => r.window_start === windowStart).sort((a, b) => meanName(a).localeCompare(meanName(b)))
        .map((r) => [meanName(r), r.low + " – " + r.high, fmt(estimateShown(r), 2) + mark(r),
          fmt(lowShown(r), 2) + " – " + fmt(highShown(r), 2), fmt(r.estimate, 2), fmt(r.given_count, 0)]));
  }

  const KIND_NAMES = { marginals: "marginal", conditionals: "conditional", means: "mean" };

  // the change table: the selection against the previous window, or against another value of a
  // dimension in the same window (entries precomputed by the dashboard command, as compare does)
  function renderChanges(windowStart) {
    const here = state.data.changes.filter((c) => selected(c) && c.window_start === windowStart);
    const options = new Map();
    here.forEach((c) => options.set(c.versus, c.versus === "previous" ? "the previous window (" +
      c.versus_label + ")" : c.versus_label.replace("=", " = ")));
    if (!options.has(state.versus)) state.versus = options.has("previous") ? "previous" :
      (options.size ? Array.from(options.keys())[0] : "previous");
    setOptions($("compare-with"), Array.from(options.keys()), (v) => options.get(v), state.versus);
    const entries = here.filter((c) => c.versus === state.versus);
    const rows = [];
    let compared = 0;
    entries.forEach((e) => {
      compared += e.changes.length;
      e.changes.filter((c) => c.significant).forEach((c) => rows.push([e, c]));
    });
    rows.sort((a, b) => Math.abs(b[1].z) - Math.abs(a[1].z));
    const fdr = entries.length ? entries[0].fdr : null;
    const how = " (Benjamini-Hochberg at FDR " + fdr + " per kind; standard errors add, as in ldp-marginals " +
      "compare). Largest first.";
    if (!entries.length) {
      $("changes-note").textContent = "Nothing to compare with: no earlier window and no other dimension value " +
        "of this selection.";
    } else if (state.versus === "previous") {
      $("changes-note").textContent = rows.length + " of " + compared + " estimates changed significantly since " +
        entries[0].versus_label + how;
    } else {
      $("changes-note").textContent = rows.length + " of " + compared + " estimates differ significantly from " +
        entries[0].versus_label + " in this window" + how;
    }
    const versus = state.versus === "previous" ? "before" : entries.length ? entries[0].versus_label : "versus";
    fillTable($("changes-table"), ["kind", "estimate", versus, "selected", "change", "z", "interval of the change"],
      rows.slice(0, 20).map(([e, c]) => [KIND_NAMES[e.kind], c.labels.join(" & "), fmt(c.first, 4), fmt(c.second, 4),
        (c.difference >= 0 ? "+" : "") + fmt(c.difference, 4), fmt(c.z, 2),
        fmt(c.ci_low, 4) + " – " + fmt(c.ci_high, 4)]));
  }

  const PHI_CELL = 13;   // px per bit on the heatmap: room for a label of 10 px on each row and column

  // the phi heatmap: every bit labelled, at least PHI_CELL px per bit; past the panel's width it keeps
  // that size and scrolls inside its panel. Pairs of one categorical feature are blank (null).
  function renderCorrelations(windowStart) {
    const entry = state.data.correlations.find((c) => selected(c) && c.window_start === windowStart);
    const traces = entry ? [{ type: "heatmap", z: entry.z, x: entry.labels, y: entry.labels, zmin: -1, zmax: 1,
      colorscale: "RdBu", reversescale: true, meta: { role: "phi" }, hoverongaps: false,
      hovertemplate: "%{y} / %{x}: phi=%{z:.3f}<extra></extra>" }] : [];
    const n = entry ? entry.labels.length : 0;
    const size = n > 24 ? 10 : 11;
    const chart = $("chart-correlations");
    const labelPx = entry ? Math.ceil(0.62 * size * Math.max(...entry.labels.map((l) => l.length))) + 12 : 0;
    const side = n * PHI_CELL;
    const height = Math.max(360, side + 36 + labelPx + 10);
    const width = side + labelPx + 100;   // the plot, the y labels, the colour bar
    const wide = width > chart.parentNode.clientWidth;
    chart.style.width = wide ? width + "px" : "";
    chart.style.height = height + "px";
    plot(chart, traces, layoutOf({ height, width: wide ? width : undefined, autosize: !wide,
      xaxis: { dtick: 1, tickfont: { size }, tickangle: -90 },
      yaxis: { autorange: "reversed", dtick: 1, tickfont: { size } },
      annotations: traces.length ? [] : [{ text: "needs the 1- and 2-way marginals of a published window",
        showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }), config);
  }

  // which tables the panel shows: the consistent ones by default (the run's, when it published them)
  const TABLE_LABELS = {
    consistent: (method) => "Consistent tables (" + method + "): non-negative, each table sums to one and " +
      "tables agree on the features they share; intervals: the unbiased ones clipped to [0, 1].",
    unbiased: () => "Unbiased estimates: each cell's estimate with its closed-form variance; cells can fall " +
      "below 0 (shown projected into [0, 1], marked *).",
    missing: () => "Unbiased estimates: this run published no consistent tables.",
  };

  function renderTables(unbiased, consistent) {
    const c0 = info();
    const none = c0 && c0.groups && !c0.groups.length && !unbiased.length && !consistent.length;
    $("table-cells").style.display = none ? "none" : "";
    const wanted = state.tablesEstimator;
    const which = wanted === "consistent" && !consistent.length && unbiased.length ? "missing" : wanted;
    const tables = which === "consistent" ? consistent : unbiased;
    const isConsistent = which === "consistent";
    $("tables-estimator").value = wanted;
    $("tables-label").textContent = none ? "" : TABLE_LABELS[which](
      Array.from(new Set(consistent.map((r) => r.method))).sort().join(", ") || "none");
    if (absent("chart-tables", none ? "This collection has no feature groups: add groups: [[feature_a, feature_b]] " +
      "to its config to publish their joint tables." : null)) return;
    const groups = new Map();
    tables.forEach((r) => {
      const g = r.group.join(" × ");
      if (!groups.has(g)) groups.set(g, []);
      groups.get(g).push(r);
    });
    const traces = [];
    const rows = [];
    const c = info();
    const level = c ? c.level : 0.95;
    const shownY = isConsistent ? (r) => r.frequency : frequencyShown;
    const lowOf = isConsistent ? (r) => r.frequency_low : frequencyLow;
    const highOf = isConsistent ? (r) => r.frequency_high : frequencyHigh;
    Array.from(groups.keys()).sort().forEach((g, gi) => {
      const cells = groups.get(g).sort((a, b) => a.cell.join().localeCompare(b.cell.join()));
      const x = cells.map((r) => r.cell.map((v, i) => r.group[i] + "=" + v).join(", "));
      const y = cells.map(shownY);
      const st = styleOf(gi);   // bars past the palette take a fill pattern as well
      traces.push({ type: "bar", name: g, x, y, meta: { role: "table", group: g, style: st,
        estimator: isConsistent ? "consistent" : "unbiased" },
        marker: { color: st.color, pattern: { shape: st.pattern } },
        error_y: { type: "data", array: cells.map((r, i) => highOf(r) - y[i]),
          arrayminus: cells.map((r, i) => y[i] - lowOf(r)) } });
      cells.forEach((r, i) => rows.push(isConsistent ?
        [x[i], fmt(y[i], 4), fmt(lowOf(r), 4) + " – " + fmt(highOf(r), 4),
          intervalText(r.interval || "per_cell", level), r.method] :
        [x[i], fmt(r.estimate, 1), fmt(y[i], 4) + mark(r), fmt(lowOf(r), 4) + " – " + fmt(highOf(r), 4),
          intervalText(r.interval || "per_cell", level)]));
    });
    // a cell's label is one line per feature, upright: rotated whole, labels of three long names left the chart
    const categories = Array.from(new Set(traces.flatMap((t) => t.x)));
    plot("chart-tables", traces, layoutOf({ yaxis: { title: { text: isConsistent ? "consistent frequency" :
      "estimated frequency" } }, xaxis: { tickangle: 0, tickvals: categories,
      ticktext: categories.map((x) => x.split(", ").join("<br>")) },
      barmode: "group", showlegend: traces.length > 1,
      annotations: traces.length ? [] : [{ text: "no feature groups in this selection", showarrow: false,
        xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }), config);
    fillTable($("table-cells"), isConsistent ? ["cell", "frequency", "interval", "interval kind", "method"] :
      ["cell", "estimate", "frequency", "interval", "interval kind"], rows);
  }

  function renderExtremes(extremes) {
    const c = info();
    if (absent("chart-extremes", c && c.extremes && !c.extremes.length && !extremes.length ?
      "This collection has no OR/AND estimates: add extremes: [{name: any_beta, op: or, features: [a, b]}] to its " +
      "config to chart them." : null)) return;
    const names = Array.from(new Set(extremes.map((r) => r.name))).sort();
    const traces = names.map((name, i) => {
      const rows = withGaps(extremes.filter((r) => r.name === name).sort((a, b) => a.window_start - b.window_start));
      const y = rows.map(orNull(estimateShown));
      const st = styleOf(i);
      return { x: rows.map((r) => iso(r.window_start)), y, mode: "lines+markers",
        line: { color: st.color, dash: st.dash }, marker: { color: st.color, symbol: st.symbol },
        name: name + " (" + rows[0].op.toUpperCase() + ")", meta: { role: "extreme", name, style: st },
        error_y: { type: "data", array: rows.map((r, i) => (r.gap ? null : highShown(r) - y[i])),
          arrayminus: rows.map((r, i) => (r.gap ? null : y[i] - lowShown(r))) } };
    });
    plot("chart-extremes", traces, layoutOf({ xaxis: timeAxis(extremes.map((r) => r.window_start)),
      yaxis: { title: { text: "estimated reports (OR: union size)" } },
      annotations: traces.length ? [] : [{ text: "the job produced no OR/AND estimates for this selection",
        showarrow: false, xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }), config);
  }

  const MECHANISMS = { symmetric: "symmetric", optimized_unary: "optimized unary (OUE)", rappor: "RAPPOR",
    unrelated_question: "unrelated question", "p/q": "randomized response" };
  // a bit's channel: its mechanism as configured, and p, q
  function bitChannel(c, i) {
    const mech = c.mechanisms && c.mechanisms[i] ? (MECHANISMS[c.mechanisms[i]] || c.mechanisms[i]) + " " : "";
    return mech + "p=" + fmt(c.p[i], 4) + ", q=" + fmt(c.q[i], 4);
  }

  // the channels by feature (a categorical label is feature=value): one row per feature, its bits and
  // their channel, or each value's where they differ
  function channelsByFeature(c) {
    const features = new Map();
    c.labels.forEach((label, i) => {
      const name = label.split("=")[0];
      if (!features.has(name)) features.set(name, []);
      features.get(name).push(i);
    });
    return Array.from(features.entries()).map(([name, bits]) => {
      const texts = bits.map((i) => bitChannel(c, i));
      return [name, String(bits.length), texts.every((t) => t === texts[0]) ? texts[0]
        : bits.map((i, k) => c.labels[i].slice(name.length + 1) + ": " + texts[k]).join("; ")];
    });
  }

  function memoText(ch) {
    // a memoized kind: a permanent response per value (ε∞ for all its reports), each report re-randomized (ε₁)
    return ch.memoize ? "; memoized: a value's permanent response ε∞ = " + fmt(ch.epsilon_infinity, 3) +
      ", each report ε₁ = " + fmt(ch.epsilon_1, 3) : "";
  }

  function channelText(c) {
    // a channel kind randomizes the whole report (collections.json "channel")
    if (c.channel && c.channel.kind === "hadamard") {
      return "Hadamard sampling: " + c.channel.slots + " of " + c.channel.coefficients + " parity coefficients a report (" +
        c.channel.weights + " weights) over " + c.labels.length + " bits, the whole report ε = " + fmt(c.channel.epsilon, 3) +
        memoText(c.channel);
    }
    if (c.channel && c.channel.kind === "subset") {
      return "Subset randomized response: " + c.channel.width + " of " + c.labels.length + " bits a report, their " +
        "pattern sent true with probability " + fmt(c.channel.keep, 3) + ", the whole report ε = " + fmt(c.channel.epsilon, 3) +
        memoText(c.channel);
    }
    const kinds = new Set(c.labels.map((_, i) => bitChannel(c, i)));
    if (kinds.size === 1) return bitChannel(c, 0) + " on each of " + c.p.length + " bits";
    return kinds.size + " channels over " + c.p.length + " bits: by feature below";
  }

  // a panel that does not apply to the collection: one line saying what config would fill it
  function absent(chartId, text) {
    const chart = $(chartId);
    let note = $(chartId + "-absent");
    if (!note) {
      note = el("p");
      note.id = chartId + "-absent";
      note.className = "absent";
      chart.parentNode.insertBefore(note, chart);
    }
    note.textContent = text || "";
    note.style.display = text ? "" : "none";
    chart.style.display = text ? "none" : "";
    if (text) purge(chart);
    return Boolean(text);
  }

  function promiseText(p) {
    if (!p) return "none stated";
    if (p.model === "local") return "local DP" + (p.epsilon != null ? ", ε ≤ " + p.epsilon : "");
    return "sufficient DP, ε = " + p.epsilon + ", η = " + p.eta + " (needs ≥ " +
      p.smallest_crowd.toLocaleString("en-US") + " reports)";
  }

  function epsilonsText(c) {
    // epsilon over time (collections.json "epsilons"; absent in outputs of older releases)
    const e = c.epsilons;
    if (!e) return "";
    const num = (v) => (v == null ? "∞" : fmt(v, 3));
    let text = "ε₁ " + num(e.epsilon_1) + ", ε∞ " + num(e.epsilon_infinity);
    const reports = (n) => n.toLocaleString("en-US") + (n === 1 ? " report" : " reports");
    if (e.enforced) {
      // what the job publishes of a device (its bounds per slice x the slices of a day / month)
      text += "; enforced: day " + num(e.enforced.epsilon_per_day) + " (" + reports(e.enforced.reports_per_day) +
        "), month " + num(e.enforced.epsilon_per_month) + " (" + reports(e.enforced.reports_per_month) + ")";
      if (e.declared) {
        text += "; declared " + e.declared.reports_per_day + "/day (not enforced): day " +
          num(e.declared.epsilon_per_day) + ", month " + num(e.declared.epsilon_per_month);
      }
    } else if (e.reports_per_day != null) {
      // an older release stated only the declared rate's figures
      text += "; declared " + e.reports_per_day + "/day (not enforced): day " + num(e.epsilon_per_day) +
        ", month " + num(e.epsilon_per_month);
    } else if ("enforced" in e) {
      text += "; per report only (no device bound)";
    }
    return text + " (unit: " + (c.unit || "report") + ")";
  }

  function renderPrivacy(rows, windowStart) {
    const withheld = rows.filter(privacyHeld);
    const imprecise = rows.filter((r) => !privacyHeld(r) && r.window_start === windowStart);
    $("precision-held").textContent = imprecise.length ? imprecise.length + " estimate(s) of this window held " +
      "back as not precise enough to publish (not a privacy holdback): " +
      imprecise.map((r) => r.reason).join("; ") + "." : "";
    const c = info();
    fillTable($("privacy-table"), ["collection", "channels", "local ε (whole report)", "promise", "windows",
      "min_reports", "ε over time (one device)"],
      c ? [[c.collection, channelText(c), fmt(c.local_epsilon, 3), promiseText(c.privacy), windowText(c.window),
        String(c.min_reports), epsilonsText(c)]] : []);
    const byFeature = c && !c.channel && new Set(c.labels.map((_, i) => bitChannel(c, i))).size > 1;
    $("channels-table").style.display = byFeature ? "" : "none";
    fillTable($("channels-table"), ["feature", "bits", "channel"], byFeature ? channelsByFeature(c) : []);
    const kindOrder = { marginals: 0, means: 1, tables: 2 };
    fillTable($("precision-table"), ["estimate", "reports", "planned half-width (worst case)", "measured half-width",
      "interval"],
      state.data.precision.filter((p) => p.window_start === windowStart)
        .sort((a, b) => kindOrder[a.kind] - kindOrder[b.kind] || a.label.localeCompare(b.label))
        .map((p) => [p.label, String(p.n_reports), fmt(p.planned, 4), fmt(p.measured, 4),
          intervalText(p.interval, c ? c.level : 0.95)]));
    const published = new Map(state.data.published);
    const starts = Array.from(published.keys()).sort((a, b) => a - b);
    // the chart: windows withheld whole; the table also lists the statistics withheld alone (client extremes)
    const held = withheld.filter((r) => (r.statistic || "all") === "all")
      .sort((a, b) => a.window_start - b.window_start);
    const min = c ? c.min_reports : null;
    const traces = [
      { type: "bar", name: "published", x: starts.map(iso), y: starts.map((s) => published.get(s)),
        meta: { role: "published" } },
      { type: "bar", name: "withheld", x: held.map((r) => iso(r.window_start)), y: held.map((r) => r.n_reports),
        marker: { color: "#c0392b" }, meta: { role: "withheld" } },
    ];
    const shapes = min === null ? [] : [{ type: "line", xref: "paper", x0: 0, x1: 1, y0: min, y1: min,
      line: { dash: "dash", color: "#c0392b" } }];
    plot("chart-reports", traces, layoutOf({ barmode: "overlay", shapes,
      xaxis: { type: "category", categoryorder: "category ascending", title: { text: "window start (UTC)" } },
      yaxis: { title: { text: "reports per window" } },
      annotations: starts.length || held.length ? [] : [{ text: "no windows for this selection", showarrow: false,
        xref: "paper", yref: "paper", x: 0.5, y: 0.5 }] }), config);
    fillTable($("withheld-table"), ["window start", "window end", "withheld", "reports", "min_reports", "reason"],
      withheld.slice().sort((a, b) => a.window_start - b.window_start).map((r) => [iso(r.window_start),
        iso(r.window_end), (r.statistic || "all").replace("_", " "), String(r.n_reports), String(r.min_reports),
        r.reason]));
  }

  function render() {
    renderFilters();
    const marginals = state.data.marginals.filter(selected);
    const windowStart = currentWindow();
    renderMarginals(marginals);
    renderCorrelations(windowStart);
    const inWindow = (r) => selected(r) && r.window_start === windowStart;
    renderTables(state.data.tables.filter(inWindow), (state.data.consistent_tables || []).filter(inWindow));
    renderExtremes(state.data.extremes.filter(selected));
    renderConditionals(state.data.conditionals.filter(selected), windowStart);
    renderMeans(state.data.means.filter(selected), windowStart);
    renderChanges(windowStart);
    renderPrivacy(state.data.withheld.filter(selected), windowStart);
    const s = state.data.summary;
    const c = info();
    $("window-kind").textContent = c ? windowText(c.window) + "; intervals at " + c.level : "";
    $("status").textContent = state.data.windows.length + " windows; showing " +
      (windowStart === null ? "none" : iso(windowStart) + (windowStart === state.data.latest_complete ?
        " (the latest complete)" : "")) + (state.data.range ? ", charts from " + iso(state.data.range[0]) : "") +
      (s ? "; " + s.reports_counted + " reports counted, " + s.reports_dead_lettered + " dead-lettered" : "") +
      (boot.dataUrl ? "; new data at " + new Date().toLocaleTimeString() : "");
    // files that could not be read are named here; the rest of the page shows what could
    $("problems").textContent = (state.data.problems || []).join("\n");
    // a window and key whose earlier release was kept (the release ledger withheld this run's rows there)
    $("kept").textContent = (state.data.notes || []).join("\n");
    $("bounded").textContent = boot.bounded || "";
    window.dashboardRenders += 1;
    if (window.dashboardFirstRender === undefined) window.dashboardFirstRender = performance.now();
    if (window.Plotly) chartsDrawn();
    else loadPlotly();
  }

  function listen() {
    $("collection-filter").addEventListener("change", (e) => {
      state.collection = e.target.value; state.dims = null; state.window = ""; state.sets = null; load();
    });
    $("window-filter").addEventListener("change", (e) => {
      state.window = Number(e.target.value) === state.data.latest_complete ? "" : Number(e.target.value); load();
    });
    $("span-filter").addEventListener("change", (e) => { state.span = Number(e.target.value); load(); });
    $("marginal-search").addEventListener("input", (e) => { filterSets(e.target.value); });
    $("compare-with").addEventListener("change", (e) => { state.versus = e.target.value; render(); });
    $("tables-estimator").addEventListener("change", (e) => { state.tablesEstimator = e.target.value; render(); });
    $("marginal-filter").addEventListener("change", (e) => {
      state.sets = Array.from(e.target.selectedOptions).map((o) => o.value);
      if (boot.viewUrl) load(); else render();
    });
  }

  function poll() {   // a served page looks for new windows of its selection
    load().finally(() => setTimeout(poll, boot.refreshSeconds * 1000));
  }

  listen();
  if (boot.viewUrl) poll(); else load();
})();
