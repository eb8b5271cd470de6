// robofollow view: draws the page from the JSON embedded in index.html (file:// cannot fetch).
// Every number comes computed from Python (evaluation/view/page_data.py); this file only lays them out.
// Routes (the URL's hash): #table, #cell/RUN/SCENE/LEVEL, #trial/RUN/TRIAL, #compare/RUN, #run/RUN, #controls/RUN.
// Instruction controls (eval --controls) are trials of their own: never in Table 1, a cell's own list, or a
// comparison; they are listed apart in each cell and summed up under #controls/RUN.
"use strict";

const DATA = JSON.parse(document.getElementById("view-data").textContent);
const RUNS = Object.fromEntries(DATA.runs.map((r) => [r.key, r]));
const SCENES = ["S1", "S2", "S3", "S4", "mean"];
const METRICS = ["IS", "ES", "CR"];
const SVG = "http://www.w3.org/2000/svg";

// h("td", {class: "x"}, "text", child, ...): an element; strings become text nodes (never parsed as HTML).
function h(tag, attrs, ...kids) {
  const el = tag.startsWith("svg:") ? document.createElementNS(SVG, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) if (v !== null && v !== undefined) el.setAttribute(k, v);
  for (const kid of kids.flat(Infinity)) if (kid !== null && kid !== undefined && kid !== false)
    el.append(typeof kid === "string" || typeof kid === "number" ? String(kid) : kid);
  return el;
}
const link = (href, ...kids) => h("a", { href }, ...kids);
const f1 = (x) => Number(x).toFixed(1);
const signed = (x) => (x >= 0 ? "+" : "") + f1(x);
const interval = (ci, method) => `[${f1(ci[0])}, ${f1(ci[1])}]` + (method === "Wilson bound at the mean" ? "*" : "");
const enc = encodeURIComponent;

function runTitle(run) {
  return [run.label, ...run.tags.map((t) => h("span", { class: "tag" }, t))];
}

// ---- Table 1 ---------------------------------------------------------------------------------------------
function metricCell(run, scene, level, metric) {
  const c = ((run.cells[scene] || {})[level]) || null;
  const at = { "data-run": run.key, "data-scene": scene, "data-level": level, "data-metric": metric };
  if (!c) return h("td", { ...at, class: "missing" }, "–");
  const extra = metric === "CR" ? `${c.CR_k}/${c.n} ` : "";
  return h("td", at, h("span", { class: "v" }, f1(c[metric])),
    h("span", { class: "ci" }, extra + interval(c[`${metric}_ci95`], c[`${metric}_method`])));
}

function nCell(run, scene, level) {
  const c = ((run.cells[scene] || {})[level]) || null;
  if (!c) return h("td", { class: "missing" }, "–");
  const at = { "data-run": run.key, "data-scene": scene, "data-level": level, "data-metric": "n" };
  return h("td", at, scene === "mean" ? `n=${c.n}` : link(`#cell/${run.key}/${scene}/${level}`, `n=${c.n}`));
}

function table1() {
  const levels = DATA.levels;
  const head = h("thead", {},
    h("tr", {}, h("th", { rowspan: 2, class: "l" }, "model"), h("th", { rowspan: 2, class: "l" }, "family"),
      h("th", { rowspan: 2, class: "l" }, "scene"), levels.map((l) => h("th", { colspan: 4 }, l))),
    h("tr", {}, levels.map(() => [...METRICS, "n"].map((m) => h("th", {}, m)))));
  const body = h("tbody");
  const scenesOfRuns = SCENES.filter((s) => DATA.runs.some((r) => r.cells[s]));
  for (const run of DATA.runs) {
    for (const scene of SCENES.filter((s) => run.cells[s])) {
      body.append(h("tr", { class: "run" + (scene === "mean" ? " mean" : "") },
        h("td", { class: "l" }, link(`#run/${run.key}`, ...runTitle(run))), h("td", { class: "l" }, "this run"),
        h("td", { class: "l" }, scene),
        levels.map((l) => [...METRICS.map((m) => metricCell(run, scene, l, m)), nCell(run, scene, l)])));
    }
  }
  for (const model of DATA.published) {
    for (const scene of scenesOfRuns) {
      const cells = model.cells[scene] || {};
      body.append(h("tr", { class: "published" + (scene === "mean" ? " mean" : "") },
        h("td", { class: "l" }, model.name), h("td", { class: "l" }, model.family,
          h("span", { class: "ci" }, "published, no intervals")), h("td", { class: "l" }, scene),
        levels.map((l) => cells[l] ? [...METRICS.map((m) => h("td", {}, f1(cells[l][m]))),
          h("td", { class: "n" }, `n=${cells[l].n}`)]
          : [h("td", { colspan: 4, class: "missing" }, "–")])));
    }
  }
  return [h("h2", {}, "Table 1: intent (IS), execution (ES) and completion (CR), %, by scene and level"),
    marks(), h("table", { class: "t1", id: "table1" }, head, body),
    h("p", { class: "note" }, DATA.footnote + ". Published models: the paper's Table 1 (results.csv); their n is " +
      "the protocol's (every task of the cell, 10 rounds), no intervals were published; their rows are the scenes the " +
      "runs hold and the paper's mean row (over its four scenes). n links to the cell's trials.")];
}

function marks() {
  const lines = [];
  for (const run of DATA.runs) if (run.control_trials) lines.push(h("p", { class: "note controls-note" },
    `${run.label}: ${run.control_trials} instruction-control trials are not in Table 1 (true instructions only); `,
    run.controls ? link(`#controls/${run.key}`, "the controls") : "they have no true partner in this run"));
  for (const run of DATA.runs) for (const m of run.marks) lines.push(h("p", { class: "warn" }, `${run.label}: ${m}`));
  for (const w of DATA.not_comparable) lines.push(h("p", { class: "warn" }, `not comparable: ${w}`));
  return lines;
}

// ---- a cell's trials -------------------------------------------------------------------------------------
function verdict(t) {
  return h("span", { class: t.complete ? "ok" : "bad" }, t.verdict);
}

function markText(mark) {
  if (!mark) return "";
  return [mark.verdict, mark.progress !== undefined ? `${mark.progress}%` : null, mark.note].filter((x) => x !== null
    && x !== undefined && x !== "").join(", ");
}

function cellView(runKey, scene, level) {
  const run = RUNS[runKey];
  const c = run && run.cells[scene] && run.cells[scene][level];
  if (!c) return notFound();
  const inCell = run.trials.filter((t) => t.scene === scene && t.level === level);
  const trials = inCell.filter((t) => !t.control), controls = inCell.filter((t) => t.control);
  const controlRows = controls.map((t) => h("tr", { "data-control": t.control },
    h("td", { class: "l" }, link(`#trial/${run.key}/${enc(t.id)}`, t.id)), h("td", { class: "l" }, t.control),
    h("td", { class: "l" }, t.partner ? link(`#trial/${run.key}/${enc(t.partner)}`, t.partner) : ""),
    h("td", { class: "l" }, t.instruction), h("td", {}, f1(t.IS)), h("td", {}, f1(t.ES)), h("td", { class: "l" }, verdict(t)),
    h("td", {}, t.files.video ? "video" : "")));
  const rows = trials.map((t) => h("tr", {},
    h("td", { class: "l" }, link(`#trial/${run.key}/${enc(t.id)}`, t.id)), h("td", {}, t.round), h("td", {}, t.seed),
    h("td", { class: "l" }, t.instruction), h("td", {}, f1(t.IS)), h("td", {}, f1(t.ES)), h("td", { class: "l" }, verdict(t)),
    h("td", { class: "l" }, t.failed_stage || ""), h("td", { class: "l" }, markText(t.mark)),
    h("td", {}, t.attempts.length ? String(t.attempts.length + 1) : "1"), h("td", {}, t.files.video ? "video" : "")));
  return [h("h2", {}, `${scene} / ${level} — `, ...runTitle(run)),
    h("p", {}, `n = ${c.n} trials of ${c.tasks} tasks; IS ${f1(c.IS)} ${interval(c.IS_ci95, c.IS_method)}, ` +
      `ES ${f1(c.ES)} ${interval(c.ES_ci95, c.ES_method)}, CR ${f1(c.CR)} (${c.CR_k}/${c.n}) ${interval(c.CR_ci95)}`),
    h("table", { id: "trials" }, h("thead", {}, h("tr", {}, ["trial", "round", "seed", "instruction", "IS", "ES",
      "verdict", "failed stage", "operator mark", "attempts", ""].map((x) => h("th", { class: "l" }, x)))),
      h("tbody", {}, rows)),
    h("p", { class: "note" }, DATA.footnote),
    controls.length ? [h("h3", {}, "Instruction controls of this cell (not in the numbers above)"),
      h("table", { id: "control-trials" }, h("thead", {}, h("tr", {}, ["trial", "control", "true trial (partner)",
        "instruction shown", "IS", "ES", "verdict", ""].map((x) => h("th", { class: "l" }, x)))), h("tbody", {}, controlRows)),
      run.controls ? h("p", {}, link(`#controls/${run.key}`, "what the controls measure, with n and intervals")) : null]
      : null];
}

// ---- one trial -------------------------------------------------------------------------------------------
function timeline(tl) {
  // The last point (the verdict when the trial was scored) gets a band of its own, FINAL wide, at the right.
  const W = 640, left = 150, right = 12 + (tl.final ? 44 : 0), top = 10, plotH = 110, row = 18, FINAL = 40;
  const H = top + plotH + 24 + row * tl.stages.length + 8;
  const pts = tl.points, tMax = Math.max(pts[pts.length - 1].t, 1e-6);
  const x = (t) => left + (W - left - right) * (t / tMax);
  const y = (v) => top + plotH * (1 - v);
  const svg = h("svg:svg", { class: "timeline", width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: "img",
    "aria-label": "stage timeline" });
  for (const v of [0, 0.5, 1]) {
    svg.append(h("svg:line", { x1: left, x2: W - right, y1: y(v), y2: y(v), stroke: "#ddd" }),
      h("svg:text", { x: left - 6, y: y(v) + 4, "text-anchor": "end" }, `${v * 100}%`));
  }
  for (const [key, colour] of [["is", "var(--is)"], ["es", "var(--es)"]]) {
    let d = "";
    pts.forEach((p, i) => { d += (i ? ` H${x(p.t)} V${y(p[key])}` : `M${x(p.t)} ${y(p[key])}`); });
    svg.append(h("svg:path", { d, fill: "none", stroke: colour, "stroke-width": 2, class: `line-${key}` }));
  }
  svg.append(h("svg:text", { x: 6, y: y(0.8) }, "IS (blue)"), h("svg:text", { x: 6, y: y(0.6) }, "ES (orange)"));
  tl.stages.forEach((name, k) => {
    const y0 = top + plotH + 24 + row * k;
    svg.append(h("svg:text", { x: 6, y: y0 + 12 }, name.length > 22 ? name.slice(0, 21) + "…" : name));
    pts.forEach((p, i) => {
      const last = i + 1 === pts.length;
      const x0 = last && tl.final ? W - right + 4 : x(p.t);
      const x1 = !last ? x(pts[i + 1].t) : (tl.final ? x0 + FINAL : Math.min(W - right, x0 + 6));
      const state = tl.states[p.s[k]];
      svg.append(h("svg:rect", { x: x0, y: y0, width: Math.max(1, x1 - x0), height: row - 4, fill: `var(--${state})`,
        class: `stage-${state}`, "shape-rendering": "crispEdges" }, h("svg:title", {}, `${name}: ${state} at ${p.t.toFixed(2)} s`)));
    });
  });
  if (tl.final) svg.append(h("svg:text", { x: W - right + 4, y: top + plotH + 16 }, "verdict"));
  svg.append(h("svg:text", { x: W - right, y: top + plotH + 16, "text-anchor": "end" }, `${tMax.toFixed(1)} s`),
    h("svg:text", { x: left, y: top + plotH + 16 }, "0 s"));
  return svg;
}

function stageTable(t) {
  return h("table", { class: "stages" }, h("thead", {}, h("tr", {}, ["stage", "intent", "execution", "max", "reason"]
    .map((x) => h("th", { class: "l" }, x)))), h("tbody", {}, t.phases.map((p) => {
    const state = p.exec >= p.max - 1e-9 && p.max > 0 ? "done" : "missed";
    return h("tr", {}, h("td", { class: "l" }, h("span", { class: `state ${state}` }, state), " ", p.name),
      h("td", {}, p.intent.toFixed(2)), h("td", {}, p.exec.toFixed(2)), h("td", {}, p.max.toFixed(2)),
      h("td", { class: "l" }, p.exec_reason === "ok" && p.intent_reason === "ok" ? "ok"
        : `intent: ${p.intent_reason}; execution: ${p.exec_reason}`));
  })));
}

function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.filter(([, v]) => v !== null && v !== undefined && v !== "")
    .map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

function pairedLinks(run, t) {
  const out = [];
  for (const cmp of DATA.comparisons) {
    for (const [side, other] of [["a", "b"], ["b", "a"]]) {
      if (cmp[side] !== run.key) continue;
      const pair = cmp.pairs.find((p) => p[side] === t.id);
      if (pair) out.push(link(`#trial/${cmp[other]}/${enc(pair[other])}`, `the same trial in ${RUNS[cmp[other]].label}`), " ");
    }
  }
  return out.length ? out : null;
}

const CONTROL_WHAT = {
  blank: "blank: the instruction left empty (language reliance)",
  shuffled: "shuffled: the instruction's words in another order (language reliance)",
  swap: "swap: another task's instruction on this layout, scored by that task's rules (instruction sensitivity)",
  paraphrase: "paraphrase: the same task in other words (paraphrase invariance)",
};

function controlFacts(run, t) {
  if (t.control) {
    const partner = t.partner && run.trials.find((x) => x.id === t.partner);
    const ov = t.original_verdict;
    return [["control", h("span", { class: "control" }, CONTROL_WHAT[t.control] || t.control)],
      ["true trial (partner)", partner ? [link(`#trial/${run.key}/${enc(partner.id)}`, partner.id), " — ",
        `“${partner.instruction}”: `, verdict(partner)] : (t.partner || "not in this run")],
      ["instruction from", t.control_source_task], ["scored as", t.scored_task],
      ["the true task's verdict", ov ? `${ov.completion_ok ? "complete" : "not complete"} (${ov.task}; IS ` +
        `${f1(100 * ov.intent_score)} / ES ${f1(100 * ov.exec_score)})` : null]];
  }
  const mine = run.trials.filter((x) => x.control && x.partner === t.id);
  return mine.length ? [["instruction controls", mine.map((c) => [link(`#trial/${run.key}/${enc(c.id)}`, c.control),
    " (", verdict(c), ") "])]] : [];
}

function trialView(runKey, id) {
  const run = RUNS[runKey];
  const t = run && run.trials.find((x) => x.id === id);
  if (!t) return notFound();
  const media = t.files.video
    ? h("video", { src: t.files.video, controls: "", preload: "auto", poster: t.files.sheet || null, muted: "" })
    : (t.files.sheet ? h("img", { class: "sheet", src: t.files.sheet, alt: "contact sheet" })
      : h("p", { class: "missing" }, "no video (the run was not recorded with --record --video)"));
  const history = t.attempts.length ? h("table", { class: "attempts" },
    h("thead", {}, h("tr", {}, ["attempt", "trial id", "IS", "ES", "verdict", "operator mark"].map((x) => h("th", {}, x)))),
    h("tbody", {}, [...t.attempts.map((a) => h("tr", {}, h("td", {}, a.attempt ?? ""), h("td", { class: "l" }, a.trial_id ?? ""),
      h("td", {}, f1(a.IS)), h("td", {}, f1(a.ES)), h("td", { class: "l" }, a.not_executed || (a.complete ? "complete" : "not complete")),
      h("td", { class: "l" }, markText(a.mark) + " (superseded by a redo)"))),
    h("tr", {}, h("td", {}, t.attempt), h("td", { class: "l" }, "(recorded)"), h("td", {}, f1(t.IS)), h("td", {}, f1(t.ES)),
      h("td", { class: "l" }, t.verdict), h("td", { class: "l" }, markText(t.mark)))])) : null;
  return [h("h2", {}, t.id, t.control ? h("span", { class: "tag" }, `control: ${t.control}`) : null, " — ", ...runTitle(run)),
    h("p", {}, link(`#cell/${run.key}/${t.scene}/${t.level}`, `back to ${t.scene} / ${t.level}`), " ",
      t.control ? null : pairedLinks(run, t)),
    h("div", { class: "trial" }, h("div", {}, media),
      h("div", {}, facts([["instruction", t.instruction], ...controlFacts(run, t), ["task", t.task], ["scene / level", `${t.scene} / ${t.level}`],
        ["round / seed", `${t.round} / ${t.seed}`], ["verdict", verdict(t)], ["IS / ES", `${f1(t.IS)} / ${f1(t.ES)}`],
        ["intent / execution", `${t.intent_ok ? "full" : "not full"} / ${t.exec_ok ? "full" : "not full"}`],
        ["fault", t.fault], ["failure", t.failed_stage ? `${t.failed_stage}: ${t.reason}` : null],
        ["operator mark", t.mark ? markText(t.mark) + (t.mark_disagrees ? " — disagrees with the verdict" : "") : "none"],
        ["attempt", t.attempts.length ? `${t.attempt} (a redo; history below)` : null],
        ["policy calls", t.policy_steps], ["wall time", t.wall_s !== null && t.wall_s !== undefined ? `${t.wall_s} s` : null],
        ["recording", t.files.mcap ? h("code", {}, t.files.mcap) : null]]))),
    h("h3", {}, "Stage timeline"),
    t.timeline ? timeline(t.timeline) : h("p", { class: "missing" },
      t.timeline_error || "no recording of this trial (run with --record): the final stage scores only"),
    h("h3", {}, "Final stage scores"), stageTable(t),
    history ? [h("h3", {}, "Redo history"), history] : null];
}

// ---- paired comparison -----------------------------------------------------------------------------------
function compareView(key) {
  const cmp = DATA.comparisons.find((c) => c.b === key);
  if (!cmp) return notFound();
  const a = RUNS[cmp.a], b = RUNS[cmp.b];
  const pct = (x) => f1(100 * x);
  const rows = cmp.cells.map((c) => h("tr", { "data-cell": c.cell }, h("td", { class: "l" }, c.cell), h("td", {}, c.pairs),
    ...["is", "es"].flatMap((m) => [h("td", {}, pct(c[`${m}_a`])), h("td", {}, pct(c[`${m}_b`])),
      h("td", {}, signed(100 * c[`${m}_diff`]), h("span", { class: "ci" },
        interval(c[`${m}_ci95`].map((v) => 100 * v), c[`${m}_method`])))]),
    h("td", {}, `${c.complete_a}/${c.pairs}`, h("span", { class: "ci" }, interval(c.complete_a_ci95.map((v) => 100 * v)))),
    h("td", {}, `${c.complete_b}/${c.pairs}`, h("span", { class: "ci" }, interval(c.complete_b_ci95.map((v) => 100 * v)))),
    h("td", {}, `${c.only_a}/${c.only_b}`), h("td", {}, c.mcnemar_p.toFixed(4))));
  const byId = (run) => Object.fromEntries(run.trials.map((t) => [t.id, t]));
  const ta = byId(a), tb = byId(b);
  const pairs = cmp.pairs.map((p) => {
    const x = ta[p.a], y = tb[p.b];
    return h("tr", {}, h("td", { class: "l" }, `${x.task} r${x.round}`), h("td", {}, `${x.scene}/${x.level}`),
      h("td", { class: "l" }, link(`#trial/${a.key}/${enc(x.id)}`, `${f1(x.IS)} / ${f1(x.ES)} `), verdict(x)),
      h("td", { class: "l" }, link(`#trial/${b.key}/${enc(y.id)}`, `${f1(y.IS)} / ${f1(y.ES)} `), verdict(y)));
  });
  return [h("h2", {}, "Paired comparison: B = ", ...runTitle(b), " against A = ", ...runTitle(a)),
    cmp.warnings.map((w) => h("p", { class: "warn" }, `not comparable: ${w}`)),
    h("p", {}, `${cmp.pairs.length} pairs (same task, round and seed); unpaired: ${cmp.only_a.length} of A, ` +
      `${cmp.only_b.length} of B. Differences are B − A in points.`),
    cmp.cells.length ? h("table", { id: "comparison" }, h("thead", {}, h("tr", {}, ["cell", "pairs", "IS A", "IS B",
      "IS Δ", "ES A", "ES B", "ES Δ", "complete A", "complete B", "A only/B only", "McNemar p"]
      .map((x) => h("th", {}, x)))), h("tbody", {}, rows)) : h("p", { class: "missing" }, "no trial in common"),
    h("p", { class: "note" }, cmp.footnote),
    h("h3", {}, "Pairs (IS / ES, %)"),
    h("table", { id: "pairs" }, h("thead", {}, h("tr", {}, ["task, round", "cell", `A: ${a.label}`, `B: ${b.label}`]
      .map((x) => h("th", { class: "l" }, x)))), h("tbody", {}, pairs))];
}

// ---- instruction controls ------------------------------------------------------------------------------
function controlsView(key) {
  const run = RUNS[key];
  if (!run || !run.controls) return notFound();
  const pct = (x) => f1(100 * x);
  const rows = run.controls.rows.map((r) => h("tr", { "data-control": r.control, "data-cell": `${r.scene}/${r.level}`,
    "data-measure": r.measure }, h("td", { class: "l" }, r.control), h("td", { class: "l" }, r.scene),
  h("td", { class: "l" }, r.level), h("td", { class: "l" }, r.measure), h("td", {}, r.n), h("td", {}, r.k === "" ? "" : `${r.k}/${r.n}`),
  h("td", {}, pct(r.value), h("span", { class: "ci" }, interval([100 * r.ci_lo, 100 * r.ci_hi], r.method))),
  h("td", {}, r.mcnemar_p === "" ? "" : Number(r.mcnemar_p).toFixed(4))));
  return [h("h2", {}, "Instruction controls: ", ...runTitle(run)),
    h("p", {}, `${run.control_trials} control trials beside ${run.trials_total} true-instruction trials. Language ` +
      "reliance (blank, shuffled): true − control; swap: the share completing the new task (follows_new) and still the " +
      "old one (still_old); paraphrase: the share keeping its verdict (same_verdict). Values in %."),
    h("table", { id: "controls" }, h("thead", {}, h("tr", {}, ["control", "scene", "level", "measure", "n (pairs)", "k",
      "value, 95% CI", "McNemar p"].map((x) => h("th", { class: "l" }, x)))), h("tbody", {}, rows)),
    h("p", { class: "note" }, run.controls.footnote)];
}

// ---- provenance ------------------------------------------------------------------------------------------
function runView(key) {
  const run = RUNS[key];
  if (!run) return notFound();
  const p = run.provenance;
  const show = (v) => (typeof v === "object" && v !== null ? JSON.stringify(v) : String(v));
  return [h("h2", {}, "Provenance: ", ...runTitle(run)),
    run.marks.map((m) => h("p", { class: "warn" }, m)),
    facts([["folder", h("code", {}, run.dir)], ["trials", `${run.trials_total} recorded, ${run.executed} executed` +
      (run.control_trials ? `; and ${run.control_trials} instruction-control trials` : "")],
      ...Object.entries(p).map(([k, v]) => [k, show(v)])]),
    h("p", {}, "Files: ", link(`runs/${key}/run.json`, "run.json"), " · ", link(`runs/${key}/results.json`, "results.json"),
      run.summary ? [" · ", link(`runs/${key}/summary.json`, "summary.json")] : null),
    h("details", {}, h("summary", {}, "the whole run.json"), h("pre", {}, JSON.stringify(run.record, null, 1)))];
}

// ---- routing ---------------------------------------------------------------------------------------------
function notFound() {
  return [h("h2", { class: "not-found" }, "Not in this view"), h("p", {}, link("#table", "back to Table 1"))];
}

function nav() {
  const el = document.getElementById("nav");
  el.replaceChildren(link("#table", "Table 1"), ...DATA.runs.map((r) => link(`#run/${r.key}`, `provenance: ${r.label}`)),
    ...DATA.runs.filter((r) => r.controls).map((r) => link(`#controls/${r.key}`, `controls: ${r.label}`)),
    ...DATA.comparisons.map((c) => link(`#compare/${c.b}`, `compare ${RUNS[c.b].label} with ${RUNS[c.a].label}`)));
  for (const a of el.querySelectorAll("a")) a.classList.toggle("active", a.getAttribute("href") === (location.hash || "#table"));
}

function route() {
  const parts = (location.hash.slice(1) || "table").split("/").map(decodeURIComponent);
  const views = { table: () => table1(), cell: () => cellView(parts[1], parts[2], parts[3]),
    trial: () => trialView(parts[1], parts.slice(2).join("/")), compare: () => compareView(parts[1]),
    run: () => runView(parts[1]), controls: () => controlsView(parts[1]) };
  const main = document.getElementById("main");
  main.replaceChildren(...[].concat((views[parts[0]] || notFound)()).flat(Infinity).filter((x) => x));
  main.dataset.route = parts.join("/");
  nav();
  window.scrollTo(0, 0);
}

window.addEventListener("hashchange", route);
route();
