#!/usr/bin/env python3
"""perf-table.py TITLE WARREN_SUMMARY RABBIT_SUMMARY: a markdown table comparing two
warren-perf JSON summary lines (the lines starting with {"summary"), with ratios."""
import json
import sys

title, w, r = sys.argv[1], json.loads(sys.argv[2])["summary"], json.loads(sys.argv[3])["summary"]
rows = [("published msg/s", "send_rate", None), ("confirmed msg/s", "confirm_rate", None),
        ("consumed msg/s", "receive_rate", None),
        ("end-to-end p50 ms", "latency_e2e_us", "p50"), ("end-to-end p99 ms", "latency_e2e_us", "p99"),
        ("confirm p50 ms", "latency_confirm_us", "p50"), ("confirm p99 ms", "latency_confirm_us", "p99")]
print(f"| {title} | Warren | RabbitMQ 3.10.8 | Warren / RabbitMQ |")
print("| --- | ---: | ---: | ---: |")
for name, key, sub in rows:
    a, b = (w[key][sub] / 1000, r[key][sub] / 1000) if sub else (w[key], r[key])
    print(f"| {name} | {a:,.1f} | {b:,.1f} | {a / b:.2f} |" if b else f"| {name} | {a:,.1f} | {b:,.1f} | - |")
