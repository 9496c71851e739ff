#!/usr/bin/env python3
"""The goal table of issue 19: the paper's ten policies and `carma` under each world.

Runs `carma simulate --json` for every trace (the four built-in ones and gen:400,gap=60 with
seeds 1-3), every world (model; measured; measured + bias 0.25 + noise 0.1) and both histories
(warm, cold), and prints Markdown: per world and trace the makespan (h), mean completion time (h)
and out-of-memory crashes of every policy, then carma's figures against the goals.

    bench/world_table.py [path/to/carma] > world-table.md

The paper's policies do not read history, so their figures are the same under warm and cold.
"""
import json
import subprocess
import sys

CARMA = sys.argv[1] if len(sys.argv) > 1 else "build/carma"
PAPER = ["exclusive", "oracle-FF", "oracle-BF", "oracle-MAGM", "oracle-LUG",
         "OR-RR", "OR-MAGM", "OR-LUG", "EST-MAGM", "EST-LUG"]
NON_ORACLE = [p for p in PAPER if not p.startswith("oracle-")]
TRACES = [("t1", 1), ("t2", 1), ("mix-90", 1), ("heavy-60", 1),
          ("gen:400,gap=60", 1), ("gen:400,gap=60", 2), ("gen:400,gap=60", 3)]
WORLDS = [("model", []),
          ("measured", ["--world", "measured"]),
          ("measured+bias 0.25+noise 0.1",
           ["--world", "measured", "--world-bias", "0.25", "--world-noise", "0.1"])]


def simulate(trace, seed, world_args, history, policies):
    out = subprocess.run([CARMA, "simulate", "--quiet", "--json", "--trace", trace,
                          "--seed", str(seed), "--history", history, "--policy",
                          ",".join(policies)] + world_args,
                         check=True, capture_output=True, text=True).stdout
    return {r["policy"]: r for r in json.loads(out)["results"]}


def h(seconds):
    return f"{seconds / 3600:.2f}"


def main():
    goals = []
    for world, args in WORLDS:
        print(f"\n#### World: {world}\n")
        print("| trace | " + " | ".join(PAPER) + " | carma warm | carma cold |")
        print("|---|" + "---|" * (len(PAPER) + 2))
        for trace, seed in TRACES:
            name = trace if not trace.startswith("gen") else f"{trace} seed {seed}"
            paper = simulate(trace, seed, args, "cold", PAPER)
            warm = simulate(trace, seed, args, "warm", ["carma"])["carma"]
            cold = simulate(trace, seed, args, "cold", ["carma"])["carma"]
            cells = [f"{h(paper[p]['makespan_s'])} / {h(paper[p]['mean_jct_s'])} / "
                     f"{paper[p]['oom_crashes']}" for p in PAPER]
            for r in (warm, cold):
                cells.append(f"**{h(r['makespan_s'])}** / {h(r['mean_jct_s'])} / {r['oom_crashes']}")
            print(f"| {name} | " + " | ".join(cells) + " |")
            best = min(NON_ORACLE, key=lambda p: paper[p]["makespan_s"])
            goals.append((world, name, best, paper[best]["makespan_s"],
                          paper["oracle-MAGM"]["mean_jct_s"], warm, cold))
        print("\nCells: makespan h / mean completion time h / out-of-memory crashes.")
    print("\n#### carma against the goals\n")
    print("| world | trace | best non-oracle (makespan h) | carma warm makespan ratio | "
          "warm mean JCT / oracle-MAGM's | warm OOM | cold makespan ratio | "
          "cold mean JCT / oracle-MAGM's | cold OOM |")
    print("|---|---|---|---|---|---|---|---|---|")
    for world, name, best, best_s, magm_jct, warm, cold in goals:
        row = [world, name, f"{best} ({h(best_s)})"]
        for r in (warm, cold):
            row += [f"{r['makespan_s'] / best_s:.3f}", f"{r['mean_jct_s'] / magm_jct:.3f}",
                    str(r["oom_crashes"])]
        print("| " + " | ".join(row) + " |")


if __name__ == "__main__":
    main()
