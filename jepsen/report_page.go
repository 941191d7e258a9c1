package main

import "html/template"

// pageTemplate is the report page. Everything is inline (the charts are
// SVG, the style CSS) and nothing needs a script: the fault and operation
// logs and the schedule fold with <details>.
var pageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Warren chaos run, seed {{.Seed}}: {{.Status}}</title>
<style>
:root { --ink: #1f2933; --muted: #616e7c; --rule: #e4e7eb; --bg: #f5f7fa; --card: #ffffff;
  --pass: #1f8a4c; --fail: #c62828; --incomplete: #b7791f; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
  font: 14px/1.45 -apple-system, "Segoe UI", "DejaVu Sans", Helvetica, Arial, sans-serif; }
main { max-width: 1280px; margin: 0 auto; padding: 24px 28px 48px; }
header { display: flex; align-items: baseline; gap: 18px; flex-wrap: wrap; }
h1 { font-size: 22px; margin: 0; font-weight: 600; }
h2 { font-size: 16px; margin: 0 0 10px; font-weight: 600; }
.status { font-weight: 700; padding: 4px 12px; border-radius: 4px; color: #fff; font-size: 15px; }
.status.pass { background: var(--pass); } .status.fail { background: var(--fail); } .status.incomplete { background: var(--incomplete); }
.facts { color: var(--muted); margin: 6px 0 18px; }
.facts b { color: var(--ink); font-weight: 600; }
.card { background: var(--card); border: 1px solid var(--rule); border-radius: 6px; padding: 16px 18px; margin-bottom: 18px; }
.cols { display: grid; grid-template-columns: 1fr 1fr; gap: 18px; }
.cols .card { margin-bottom: 0; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--rule); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: .03em; }
td.num { text-align: right; font-variant-numeric: tabular-nums; width: 5em; }
td.means { color: var(--muted); }
.ok { color: var(--pass); font-weight: 700; } .bad { color: var(--fail); font-weight: 700; }
tr.failed td { background: #fdecea; }
.examples { margin: 0; padding-left: 16px; font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; }
pre { font: 12px/1.4 ui-monospace, "DejaVu Sans Mono", monospace; white-space: pre-wrap; margin: 8px 0 0; }
details summary { cursor: pointer; font-weight: 600; }
svg.timeline { width: 100%; height: auto; display: block; font-family: inherit; }
svg .panel-title { font-size: 14px; font-weight: 600; fill: var(--ink); }
svg .note { font-size: 11px; fill: var(--muted); }
svg .row-name { font-size: 11px; fill: var(--ink); }
svg .tick, svg .legend { font-size: 11px; fill: var(--muted); }
svg .grid { stroke: #edf0f3; stroke-width: 1; }
svg .hgrid { stroke: #e4e7eb; stroke-width: 1; }
svg .row-rule { stroke: #f0f2f4; }
svg .fault-shade { opacity: .13; }
svg .after-run { fill: #eef1f4; }
svg .op-line { stroke: #52606d; stroke-width: 1; stroke-dasharray: 3 3; opacity: .55; }
svg .op { fill: #3e4c59; } svg .op.failed { fill: var(--fail); }
svg .fault-label { font-size: 10px; fill: #fff; font-weight: 600; }
svg .fault-label.outside { font-weight: 600; }
svg .line { stroke-width: 1.6; fill: none; stroke-linejoin: round; }
svg .published { stroke: #3b73b9; } svg .confirmed { stroke: #2f9e5b; } svg .delivered { stroke: #9b59b6; stroke-dasharray: 4 2; }
svg .p50 { stroke: #2f9e5b; } svg .p99 { stroke: #d64545; }
.kinds { display: flex; flex-wrap: wrap; gap: 4px 14px; margin-top: 8px; color: var(--muted); font-size: 12px; }
.kinds span::before { content: ""; display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 5px; background: var(--c); vertical-align: -1px; }
</style>
</head>
<body>
<main>
<header>
<h1>Warren chaos run</h1>
<span class="status {{.StatusClass}}">{{.Status}}</span>
</header>
<p class="facts">seed <b>{{.Seed}}</b> · <b>{{.Nodes}}</b> nodes · began <b>{{.Began}}</b> · lasted <b>{{.Span}}</b> (clients, then healing, drain and checks)
{{- if .FaultCounts}} · faults:{{range .FaultCounts}} <b>{{.Name}} {{.Value}}</b>{{end}}{{end}}</p>

<section class="card">
{{.Timeline}}
<div class="kinds">{{range .Kinds}}<span style="--c: {{.Value}}">{{.Name}}</span>{{end}}<span style="--c: #eef1f4">after the producers stopped: healing, drain, checks</span></div>
</section>

<section class="card">
<h2>Verdict</h2>
<table class="verdict">
<thead><tr><th>check</th><th>what it finds</th><th>count</th><th>result</th><th>examples</th></tr></thead>
<tbody>
{{range .Verdicts}}<tr class="{{if .Pass}}passed{{else}}failed{{end}}" data-check="{{.Check}}">
<td>{{.Check}}</td><td class="means">{{.Means}}</td><td class="num">{{.Count}}</td>
<td>{{if .Pass}}<span class="ok">pass</span>{{else}}<span class="bad">FAIL</span>{{end}}</td>
<td>{{if .Examples}}<ul class="examples">{{range .Examples}}<li>{{.}}</li>{{end}}</ul>{{end}}</td></tr>
{{end}}</tbody>
</table>
</section>

<div class="cols">
<section class="card">
<h2>Counted, not judged</h2>
<table><tbody>
{{range .Counts}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>
{{end}}</tbody></table>
</section>
<section class="card">
<h2>Flags</h2>
<table><tbody>
{{range .Flags}}<tr><td>{{.Name}}</td><td>{{.Value}}</td></tr>
{{else}}<tr><td>not recorded</td></tr>
{{end}}</tbody></table>
</section>
</div>
<p></p>

<section class="card">
<details{{if le (len .FaultLog) 30}} open{{end}}>
<summary>Faults ({{len .FaultLog}})</summary>
<table>
<thead><tr><th>at</th><th>held</th><th>fault</th><th>nodes</th><th>shape</th><th>error</th></tr></thead>
<tbody>
{{range .FaultLog}}<tr><td>{{.At}}</td><td>{{.Held}}</td><td>{{.Kind}}</td><td>{{.Nodes}}</td><td>{{.Shape}}</td><td class="bad">{{.Error}}</td></tr>
{{end}}</tbody></table>
</details>
</section>

<section class="card">
<details{{if le (len .OpLog) 30}} open{{end}}>
<summary>Operator commands ({{len .OpLog}})</summary>
<table>
<thead><tr><th>at</th><th>command</th><th>outcome</th></tr></thead>
<tbody>
{{range .OpLog}}<tr><td>{{.At}}</td><td>{{.Command}}</td><td>{{.Outcome}}</td></tr>
{{end}}</tbody></table>
</details>
</section>

<section class="card">
<details>
<summary>Schedule as it happened ({{len .Events}} events)</summary>
<pre>{{range .Events}}{{.}}
{{end}}</pre>
</details>
<details>
<summary>Verdict as printed</summary>
<pre>{{.VerdictText}}</pre>
</details>
</section>
</main>
</body>
</html>
`))
