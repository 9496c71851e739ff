"""What the cluster shell tests read back of a finished run (imported by their checks).

load(T): every task of the server whose socket is T/carma.sock, with its attempts (GET
/v1/tasks?all=1, then GET /v1/tasks/ID). check(name, cond) prints PASS/FAIL and remembers a
failure (ok()). overlaps(detail) lists, per (node, GPU), the pairs of attempts that ran there at
the same time, as (node, gpu, first task, second task).
"""
import json
import subprocess

_ok = True


def _get(T, path):
    out = subprocess.run(["curl", "-sf", "--unix-socket", f"{T}/carma.sock",
                          f"http://localhost{path}"], capture_output=True, text=True).stdout
    return json.loads(out)


def load(T):
    return [_get(T, f"/v1/tasks/{t['id']}") for t in _get(T, "/v1/tasks?all=1")["tasks"]]


def check(name, cond):
    global _ok
    print(("PASS " if cond else "FAIL ") + name)
    _ok = _ok and bool(cond)


def ok():
    return _ok


def overlaps(detail):
    spans = {}
    for t in detail:
        for a in t["attempt_list"]:
            for g in a["gpus"]:
                spans.setdefault((a["node"], g), []).append(
                    (a["started_at"], a["ended_at"] or 1e18, t["name"]))
    out = []
    for (node, g), s in spans.items():
        s.sort()
        for (a0, a1, an), (b0, b1, bn) in zip(s, s[1:]):
            if b0 < a1:
                out.append((node, g, an, bn))
    return out
