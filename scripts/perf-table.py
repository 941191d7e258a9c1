#!/usr/bin/env python3
"""perf-table.py: markdown tables comparing Warren and RabbitMQ, with ratios.

  perf-table.py TITLE WARREN_SUMMARY RABBIT_SUMMARY
      two warren-perf JSON summary lines (the lines starting with {"summary"): rates and
      end-to-end/confirm latencies of one run (perf-compare.sh).
  perf-table.py TITLE PART WARREN RABBIT [PART WARREN RABBIT ...]
      one table with the rows of each part, in order (perf-cluster.sh, declare-compare.sh,
      perf-sustained.sh):
        single   a summary line: published/confirmed/consumed msg/s, e2e and confirm p50/p99
        sustained  the summary line of the best run of a search for the rate a queue sustains
                 (bench-lib.sh's sustained_search; empty: none passed): consumed msg/s, rate asked
        multi    a summary line of a many-queue run: consumed msg/s, confirm p99, e2e p99
        multi_sustained  the same for a many-queue run (the rate is the producers' total)
        rate     a summary line with "cpu_s" added (CPU seconds of all the broker's processes
                 over the run): e2e and confirm p50/p99, consumed msg/s, CPU per message
        declare  declare_measure's object (bench-lib.sh): seconds, added VmRSS and RssAnon
"""
import json
import sys


def ms(key, sub):
    return lambda d: d["summary"][key][sub] / 1000


def field(key):
    return lambda d: d["summary"][key]


def run_desc(s):
    return f'{s["size"]:,} B, confirm {s["confirm"]}, prefetch {s["prefetch"]}, {s["duration_s"]:.0f} s'


def single(w, r):
    p, notes[p] = "1 queue: ", run_desc(w["summary"])
    return [(p + "published msg/s", field("send_rate")), (p + "confirmed msg/s", field("confirm_rate")),
            (p + "consumed msg/s", field("receive_rate")),
            (p + "end-to-end p50 ms", ms("latency_e2e_us", "p50")), (p + "end-to-end p99 ms", ms("latency_e2e_us", "p99")),
            (p + "confirm p50 ms", ms("latency_confirm_us", "p50")), (p + "confirm p99 ms", ms("latency_confirm_us", "p99"))]


def sustained(w, r):
    s = (w or r or {"summary": {"queues": 1}})["summary"]  # either side may have no run
    if s["queues"] == 1:
        p, total = "1 queue, sustained: ", ""
        notes[p] = "the best run of a search over --rate with the consumer keeping pace"
    else:
        p, total = f'{s["queues"]} queues, sustained: ', " total"
        notes[p] = f'{s["producers"]} producers, {s["consumers"]} consumers, the best run of a search over the total --rate with every consumer keeping pace'
    return [(p + "consumed msg/s" + total, field("receive_rate")),
            (p + "at --rate msg/s (-: unlimited)", lambda d: d["summary"]["rate_limit"] or float("nan"))]


def multi(w, r):
    s = w["summary"]
    p = f'{s["queues"]} queues: '
    notes[p] = f'{s["producers"]} producers, {s["consumers"]} consumers, {run_desc(s)}'
    return [(p + "consumed msg/s total", field("receive_rate")),
            (p + "confirm p99 ms", ms("latency_confirm_us", "p99")), (p + "end-to-end p99 ms", ms("latency_e2e_us", "p99"))]


def rate(w, r):
    s = w["summary"]
    p, notes[p] = f'{s["rate_limit"]:,.0f} msg/s: ', "fixed rate, 1 queue, " + run_desc(s)
    return [(p + "consumed msg/s", field("receive_rate")),
            (p + "end-to-end p50 ms", ms("latency_e2e_us", "p50")), (p + "end-to-end p99 ms", ms("latency_e2e_us", "p99")),
            (p + "confirm p50 ms", ms("latency_confirm_us", "p50")), (p + "confirm p99 ms", ms("latency_confirm_us", "p99")),
            (p + "broker CPU s, all processes", lambda d: d["cpu_s"]),
            (p + "broker CPU µs per message consumed", lambda d: 1e6 * d["cpu_s"] / d["summary"]["received"] if d["summary"]["received"] else float("nan"))]


def declare(w, r):
    p = f'declare {w["queues"]:,}: '
    notes[p] = f'{w["queues"]:,} quorum queues declared one after another by one client'
    return [(p + "seconds", lambda d: d["seconds"]),
            (p + "added VmRSS, 3 nodes, MiB", lambda d: (d["rss_kb_after"] - d["rss_kb_before"]) / 1024),
            (p + "added RssAnon, 3 nodes, MiB", lambda d: (d["anon_kb_after"] - d["anon_kb_before"]) / 1024)]


notes = {}  # row prefix -> what the part ran, printed under the table
PARTS = {"single": single, "sustained": sustained, "multi": multi, "multi_sustained": sustained, "rate": rate, "declare": declare}


def num(v):
    if v != v:  # NaN
        return "-"
    return f"{v:,.1f}" if abs(v) >= 10 or v == 0 else f"{v:.2f}"


def main(argv):
    title, rest = argv[1], argv[2:]
    if len(rest) == 2:  # the original form: two summary lines
        rest = ["single"] + rest
    if not rest or len(rest) % 3:
        sys.exit(__doc__)
    print(f"| {title} | Warren | RabbitMQ 3.10.8 | Warren / RabbitMQ |")
    print("| --- | ---: | ---: | ---: |")
    for i in range(0, len(rest), 3):
        part, w = rest[i], json.loads(rest[i + 1]) if rest[i + 1] else None  # none passed
        r = json.loads(rest[i + 2]) if rest[i + 2] else None  # not measured (BROKERS=warren)
        if part not in PARTS:
            sys.exit(f"perf-table.py: unknown part {part!r} (one of {', '.join(PARTS)})")
        rows = PARTS[part](w or r, r)  # row names from whichever broker ran (BROKERS=rabbit)
        if len(rest) == 3 and part in ("single", "sustained"):  # one part: the prefix is noise
            rows = [(name.split(": ", 1)[1], get) for name, get in rows]
        for name, get in rows:
            a, b = get(w) if w else float("nan"), get(r) if r else float("nan")
            ratio = f"{a / b:.2f}" if b and a == a and b == b else "-"
            print(f"| {name} | {num(a)} | {num(b)} | {ratio} |")
    if len(rest) > 3:
        print()
        print("; ".join(f"{p.rstrip(': ')}: {n}" for p, n in notes.items()))


if __name__ == "__main__":
    main(sys.argv)
