#!/usr/bin/env python3
"""Build data/workloads.csv, the simulator's workload catalog (python3 stdlib only).

Run from anywhere:  python3 data/build_workloads.py [--shared DIR] [--check]

Inputs (paths relative to the repository root; DIR defaults to ../shared, or $CARMA_SHARED):
  data/traces/*.csv                                    the four evaluation traces (in this repo)
  DIR/research/carma-spec.md                           Appendix A table of all .rad files
  DIR/data/profiles/carma_workload_catalog.csv         CARMA README workload table (ET, epochs)
  DIR/data/profiles/aegis_a100_40gb_solo_profiles.csv  AEGIS 1-GPU solo profiles (A100-40GB)
  DIR/data/profiles/startup_and_memory_rampup_facts.csv  dispatch -> first GPU activity facts
Two small tables below are copied from upstream files that are not in DIR (each is cited).

--check  rebuilds in memory and exits 1 if data/workloads.csv differs from the result.
"""
import argparse
import csv
import glob
import io
import math
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

HEADER = ("task_name,model,dataset,batch_size,gpus,t_solo_s,t_start_s,m_peak_mib,horus_mib,"
          "faketensor_mib,gpumemnet_mib,parameters,activations_per_sample,gpu_util,smact,smocc,"
          "drama,power_w,profile_source").split(",")

# ---------------------------------------------------------------------------------------------
# Family table, keyed by the training script of the .rad command (Appendix A, column 2).
#   model     : model name as written in the traces (data/traces/*.csv)
#   dataset   : dataset as in the CARMA README (spec section 4.2)
#   cat_model : model name in carma_workload_catalog.csv (README table), None if not listed
#   aegis     : AEGIS solo-profile id pattern ({B} = batch, {E} = epochs)
# ---------------------------------------------------------------------------------------------
FAMILIES = {
    "BERT_base_on_wiki.py": ("BERT_base", "WikiText-2", "BERT_base", "bert_base_wiki_bs{B}_1gpu"),
    "BERT_large_on_wiki.py": ("BERT_large", "WikiText-2", "BERT_large", "bert_large_wiki_bs{B}_1gpu"),
    "xlnet_base_cased.py": ("xlnet_base", "WikiText-2", "xlnet_base", None),
    "xlnet_large_cased.py": ("xlnet_large", "WikiText-2", "xlnet_large", None),
    "gpt2_large_on_wiki.py": ("gpt2_large", "WikiText-2", "gpt2_large", None),
    "Inception.py": ("inception_v3", "ImageNet", "inception", "inception_imagenet_bs{B}_1gpu"),
    "Xception.py": ("Xception", "ImageNet", "Xception", "xception_imagenet_bs{B}_1gpu"),
    "efficientNet.py": ("efficientnet_b0", "ImageNet", "efficientnet_b0", "efficientnet_imagenet_bs{B}_1gpu"),
    "mobilenet.py": ("mobilenet_v2", "ImageNet", "mobilenet_v2", "mobilenet_imagenet_bs{B}_1gpu"),
    "resnet50.py": ("resnet50", "ImageNet", "resnet50", "resnet50_imagenet_bs{B}_1gpu"),
    "vgg.py": ("vgg16", "ImageNet", "vgg16", "vgg16_imagenet_bs{B}_1gpu"),
    "UNet.py": ("UNet", "VOC", "UNet", "unet_voc_1gpu"),
    "train.py": ("MaskRCNN", "COCO", "MaskRCNN", "maskrcnn_coco_bs{B}_1gpu"),
    "dlrm_s_pytorch.py": ("DLRM", "Criteo", "DLRM", "dlrm_criteo_bs{B}_1gpu"),
    "mnist_train.py": ("mnist_cnn", "MNIST", None, "mnist_bs{B}_1gpu"),
    "efficientNet_cifar100.py": ("efficientnet_b0", "CIFAR-100", "efficientnet_b0", "efficientnet_cifar100_bs{B}_{E}e_1gpu"),
    "mobilenet_cifar100.py": ("S_mobilenetv3", "CIFAR-100", "S_mobilenetv3", "mobilenet_cifar100_bs{B}_{E}e_1gpu"),
    "resnet18_cifar100.py": ("resnet18", "CIFAR-100", "resnet18", "resnet18_cifar100_bs{B}_{E}e_1gpu"),
    "resnet34_cifar100.py": ("resnet34", "CIFAR-100", "resnet34", "resnet34_cifar100_bs{B}_{E}e_1gpu"),
}

# Batch size / epochs of the actual command where the .rad batch field (Appendix A L5) or the
# command line does not give it (spec section 4.2 notes and README table).
COMMAND_BATCH = {"UNet": 8, "maskrcnn": 8, "dlrm": 32768, "xlnet_large_cased_2": 4,
                 "xlnet_base_cased_2": 8, "gpt2_large_2": 8, "BERT_base": 32, "BERT_large": 8,
                 "mnist_train": 32}
COMMAND_EPOCHS = {"UNet": 90, "xlnet_base_cased_2": 8, "xlnet_large_cased_2": 3}

# AEGIS 2-GPU solo profiles (A100-40GB, activity-filtered means over the full run, per GPU).
# Source: ehsanyousefzadehasl/AEGIS:evaluation/profiling/solo/extracted/solo_profile_results_2gpu.csv
# (version at commit 2f2f5759647f84312fa116a52cb47ae2128786af); columns gputl_mean_full,
# smact_mean_full, smocc_mean_full, drama_mean_full, power_mean_full,
# gpu_memory_peak_full_mib, training_loop_time_s.  Tuples are (gpu_a, gpu_b).
# Not part of shared/data/profiles; copied here because it is the only A100 measurement of
# these three workloads.
AEGIS_2GPU = {
    "gpt2_large_wiki_bs8_2gpu": {
        "gputl": (96.53835616438356, 92.06301369863014),
        "smact": (0.8417742465753425, 0.7969191780821917),
        "smocc": (0.2687032876712329, 0.23589808219178082),
        "drama": (0.21393835616438356, 0.16131150684931508),
        "power": (261.9485068493151, 253.30284821917806),
        "mem": (28330, 16458), "loop_s": 3943.9},
    "xlnet_base_cased_wiki_bs8_2gpu": {
        "gputl": (92.16155291170945, 0.0),
        "smact": (0.8218036944270508, 0.0),
        "smocc": (0.31148371947401376, 0.0),
        "drama": (0.2084743268628679, 0.0),
        "power": (243.80203412648714, 62.103498434564806),
        "mem": (8988, 428), "loop_s": 3503.4},
    "xlnet_large_cased_wiki_bs4_2gpu": {
        "gputl": (92.44968238047475, 0.0),
        "smact": (0.8095580073553995, 0.0),
        "smocc": (0.3055369441658309, 0.0),
        "drama": (0.21269341357405552, 0.0),
        "power": (250.79259879638914, 61.823833834837835),
        "mem": (13806, 428), "loop_s": 3455.21},
}
AEGIS_2GPU_ID = {"gpt2_large_2": "gpt2_large_wiki_bs8_2gpu",
                 "xlnet_base_cased_2": "xlnet_base_cased_wiki_bs8_2gpu",
                 "xlnet_large_cased_2": "xlnet_large_cased_wiki_bs4_2gpu"}

# Per-workload dispatch -> first observed GPU activity (s), the 15 largest of 50 AEGIS 1-GPU
# solo runs. Source: ehsanyousefzadehasl/AEGIS:evaluation/paper_artifacts/tables/
# first_gpu_activity_delay_top_workloads.csv (commit ef7eec99d19a2af363fbe49418f553f479c96702),
# column ttfk_wait_seconds. Every other of the 50 workloads has a delay <= 8.908 s.
AEGIS_DELAY_TOP15 = {
    "gpt2_xl_wiki_bs2_1gpu": 37.90996389799693,
    "maskrcnn_coco_bs8_1gpu": 23.161335501994472,
    "bert_large_wiki_bs8_1gpu": 17.419454957998823,
    "bert_base_wiki_bs32_1gpu": 15.384848839996266,
    "vgg16_imagenet_bs64_1gpu": 10.013985247001983,
    "vgg16_imagenet_bs128_1gpu": 9.920411373022944,
    "vgg16_imagenet_bs32_1gpu": 9.899930458981544,
    "inception_imagenet_bs128_1gpu": 9.267761677998353,
    "resnet50_imagenet_bs128_1gpu": 9.120920926012332,
    "xception_imagenet_bs128_1gpu": 9.014980005013058,
    "inception_imagenet_bs32_1gpu": 8.982738408987643,
    "resnet50_imagenet_bs32_1gpu": 8.937296841992065,
    "xception_imagenet_bs64_1gpu": 8.934156973002246,
    "resnet50_imagenet_bs64_1gpu": 8.908026405988494,
}
# (the 15th entry, llama3_width_8layer_wiki_bs1_1gpu 55.48 s, is not a CARMA workload)

# Judgement calls for t_start where no A100 measurement exists (see data/README.md).
T_START_JUDGEMENT = {
    "xlnet_base_cased_2": ("bert_base_wiki_bs32_1gpu", "xlnet_base ~ BERT_base size; HF wiki pipeline"),
    "xlnet_large_cased_2": ("bert_large_wiki_bs8_1gpu", "xlnet_large ~ BERT_large size; HF wiki pipeline"),
    "gpt2_large_2": ("gpt2_xl_wiki_bs2_1gpu", "GPT-2 family; gpt2_large is about half of gpt2_xl"),
}

HORUS_CTX_MIB = 800.0   # spec section 3.2
HORUS_CAP = 40000
HORUS_TOL = 0.01


def fmt(x, nd=4):
    """Fixed-point with at most nd decimals, no trailing zeros."""
    if x is None or x == "":
        return ""
    if isinstance(x, int):
        return str(x)
    s = f"{x:.{nd}f}".rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


def read_traces():
    tasks, order = {}, []
    conflicts = []
    files = sorted(glob.glob(os.path.join(ROOT, "data", "traces", "*.csv")))
    if not files:
        sys.exit("no traces under data/traces/")
    for f in files:
        with open(f, newline="") as fh:
            for r in csv.DictReader(fh):
                name = r["task_name"]
                key = (r["model"], r["batch_size"], r["gpus"], r["standalone_minutes"],
                       r["memory_gb"], r["epochs"], r["class"])
                if name not in tasks:
                    tasks[name] = {"key": key, "files": {os.path.basename(f)}}
                    order.append(name)
                else:
                    if tasks[name]["key"] != key:
                        conflicts.append(f"{name}: {tasks[name]['key']} vs {key} in {os.path.basename(f)}")
                    tasks[name]["files"].add(os.path.basename(f))
    return tasks, conflicts


def read_appendix_a(spec_path):
    rows = {}
    with open(spec_path, encoding="utf-8") as fh:
        text = fh.read()
    start = text.index("## Appendix A")
    end = text.index("## Appendix B", start)
    for line in text[start:end].splitlines():
        if not line.startswith("| ") or ".rad |" not in line or line.startswith("| .rad |"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 11:
            raise ValueError(f"unexpected Appendix A row: {line}")
        rad, cmd, _mfile, _ds, bs, gpus, oracle, _oracle_v1, horus, fake, gmn = cells
        stem = rad[:-4]

        def num(v):
            return None if v in ("—", "-", "") else float(v)
        m = re.search(r"`\s*([^`\s]+\.py)", cmd)
        rows[stem] = {"script": os.path.basename(m.group(1)), "cmd": cmd, "bs_field": bs,
                      "gpus": int(gpus), "oracle": num(oracle), "horus": num(horus),
                      "fake": num(fake), "gmn": num(gmn)}
    return rows


def read_csv(path):
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def horus_fit(points):
    """Least-squares H = c + s*B; P=(c-800)*2^18, A=s*2^18-P (spec 3.2). Returns (P, A)."""
    n = len(points)
    mb = sum(b for b, _ in points) / n
    mh = sum(h for _, h in points) / n
    sxx = sum((b - mb) ** 2 for b, _ in points)
    s = sum((b - mb) * (h - mh) for b, h in points) / sxx
    c = mh - s * mb
    P = round((c - HORUS_CTX_MIB) * 2 ** 18)
    A = round(s * 2 ** 18 - P)
    return P, A


def horus_mib(B, P, A):
    return 4.0 * (B * A + P + B * P) / 2 ** 20 + HORUS_CTX_MIB


def build(shared):
    notes = []
    traces, conflicts = read_traces()
    appx = read_appendix_a(os.path.join(shared, "research", "carma-spec.md"))
    prof_dir = os.path.join(shared, "data", "profiles")
    catalog = read_csv(os.path.join(prof_dir, "carma_workload_catalog.csv"))
    aegis = {r["workload_id"]: r for r in read_csv(os.path.join(prof_dir, "aegis_a100_40gb_solo_profiles.csv"))}
    facts = {r["quantity"]: r for r in read_csv(os.path.join(prof_dir, "startup_and_memory_rampup_facts.csv"))}

    median_start = float(facts["first_observed_gpu_activity_delay_median"]["value"])
    # consistency of the embedded per-workload delays with the shared facts table
    for q, wid in (("first_activity_delay_gpt2_xl_wiki_bs2", "gpt2_xl_wiki_bs2_1gpu"),
                   ("first_activity_delay_maskrcnn_coco_bs8", "maskrcnn_coco_bs8_1gpu"),
                   ("first_activity_delay_bert_large_wiki_bs8", "bert_large_wiki_bs8_1gpu"),
                   ("first_activity_delay_bert_base_wiki_bs32", "bert_base_wiki_bs32_1gpu")):
        assert abs(float(facts[q]["value"]) - AEGIS_DELAY_TOP15[wid]) < 0.01, q
    for q, pref in (("first_activity_delay_vgg16_imagenet", "vgg16_imagenet"),
                    ("first_activity_delay_resnet50_imagenet", "resnet50_imagenet")):
        lo, hi = (float(v) for v in facts[q]["value"].split("-"))
        for wid, v in AEGIS_DELAY_TOP15.items():
            if wid.startswith(pref):
                assert lo - 0.01 <= v <= hi + 0.01, (q, wid, v)

    # --- task list: every trace task + every .rad with memory lines --------------------------
    names = list(traces)
    for stem, a in appx.items():
        if stem not in traces and a["oracle"] is not None:
            names.append(stem)
    for n in names:
        if n not in appx:
            sys.exit(f"task {n} not in Appendix A")

    # --- Horus inversion per family ----------------------------------------------------------
    fam_points = {}
    for stem, a in appx.items():
        if a["horus"] is None:
            continue
        B = batch_of(stem, a)
        prev = fam_points.setdefault(a["script"], {}).get(B)
        assert prev is None or prev == a["horus"], (stem, prev, a["horus"])
        fam_points[a["script"]][B] = a["horus"]
    horus_desc, horus_report = {}, []
    for script, pts in sorted(fam_points.items()):
        pts = sorted(pts.items())
        if len(pts) < 2:
            continue
        if any(h >= HORUS_CAP for _, h in pts):
            horus_report.append((script, pts, None, None, None, "capped at 40000: not inverted"))
            continue
        P, A = horus_fit(pts)
        errs = [abs(horus_mib(b, P, A) - h) / h for b, h in pts]
        ok = P > 0 and A > 0 and max(errs) <= HORUS_TOL
        horus_report.append((script, pts, P, A, errs, "ok" if ok else "FAILED"))
        if ok:
            horus_desc[script] = (P, A)

    # --- rows ---------------------------------------------------------------------------------
    rows = []
    proxies = []
    for n in names:
        a = appx[n]
        fam = FAMILIES[a["script"]]
        model, dataset, cat_model, aegis_pat = fam
        B = batch_of(n, a)
        E = epochs_of(n, a)
        gpus = a["gpus"]
        tr = traces.get(n)

        # cross-check against the trace fields
        if tr:
            t_model, t_bs, t_gpus, t_min, t_mem, t_ep, _cls = tr["key"]
            if t_model != model:
                notes.append(f"{n}: trace model {t_model} != family model {model}")
            if int(t_bs) != B:
                notes.append(f"{n}: trace batch_size {t_bs} != command batch {B} (command used)")
            if int(t_gpus) != gpus:
                notes.append(f"{n}: trace gpus {t_gpus} != .rad gpus {gpus}")
            if t_ep not in ("<1",) and int(t_ep) != E:
                notes.append(f"{n}: trace epochs {t_ep} != command epochs {E}")
            t_solo = float(t_min) * 60.0
            t_solo_src = "trace"
            if abs(float(t_mem) * 1000 - a["oracle"]) > 10 + 1e-9:
                notes.append(f"{n}: trace memory_gb {t_mem} vs .rad oracle {int(a['oracle'])} MiB")
        else:
            t_solo = None
            t_solo_src = "README ET x epochs"

        # README ET x epochs (spec 4.3) for rows outside the traces and as a cross-check
        et = None
        if cat_model is not None:
            cands = [r for r in catalog if r["model"] == cat_model and
                     dataset_match(r["dataset"], dataset) and
                     (int(r["batch"]) == B or cat_model in ("DLRM", "UNet", "MaskRCNN"))]
            if len(cands) == 1:
                et = float(cands[0]["exclusive_exec_time_min"])
        readme_solo = et * (E if E else 1) * 60.0 if et is not None else None
        if t_solo is None:
            if readme_solo is None:
                sys.exit(f"no t_solo source for {n}")
            t_solo = readme_solo
        elif readme_solo is not None and abs(readme_solo - t_solo) > 0.5:
            notes.append(f"{n}: trace t_solo {t_solo:.1f} s vs README ET x epochs {readme_solo:.1f} s")

        # profile
        src = []
        if n in AEGIS_2GPU_ID:
            wid = AEGIS_2GPU_ID[n]
            p = AEGIS_2GPU[wid]
            gpu_util = p["gputl"][0] / 100.0
            smact, smocc, drama, power = p["smact"][0], p["smocc"][0], p["drama"][0], p["power"][0]
            idle_b = p["gputl"][1] < 1.0
            src.append(f"aegis2gpu:{wid} (values of GPU a; "
                       + ("GPU b idle: 428 MiB and 0 util" if idle_b else
                          f"GPU b util {p['gputl'][1]/100:.4f} smact {p['smact'][1]:.4f}")
                       + "; upstream AEGIS 2-GPU file not in shared/data)")
        else:
            wid = aegis_pat.format(B=B, E=E)
            if wid not in aegis:
                sys.exit(f"no AEGIS profile {wid} for {n}")
            p = aegis[wid]
            gpu_util = float(p["gpu_util_mean_pct"]) / 100.0
            smact, smocc, drama = float(p["smact_mean"]), float(p["smocc_mean"]), float(p["drama_mean"])
            power = float(p["power_mean_w"])
            extra = ""
            if n.endswith("_50e_3") and E == 20:
                extra = " (.rad named 50e but command runs --epochs 20)"
            src.append(f"aegis:{wid}{extra}")

        # t_start
        if wid in AEGIS_DELAY_TOP15:
            t_start = AEGIS_DELAY_TOP15[wid]
            src.append("t_start=aegis:first_activity")
        elif n in T_START_JUDGEMENT:
            pid, why = T_START_JUDGEMENT[n]
            t_start = AEGIS_DELAY_TOP15[pid]
            src.append(f"t_start=judgement:proxy:aegis:{pid} ({why})")
            proxies.append((n, "t_start", pid))
        else:
            t_start = median_start
            src.append("t_start=aegis:median_of_50 (not among the 15 slowest: <=8.91 s)")

        P, A = horus_desc.get(a["script"], (None, None))
        if P is not None:
            src.append("parameters/activations=Horus fit")
        if t_solo_src != "trace":
            src.append("t_solo=README ET x epochs (in no trace)")
        if n == "dlrm":
            src.append("batch=command mini-batch (README and traces say 8)")

        rows.append({
            "task_name": n, "model": model, "dataset": dataset, "batch_size": B, "gpus": gpus,
            "t_solo_s": fmt(t_solo), "t_start_s": fmt(t_start, 2),
            "m_peak_mib": int(a["oracle"]), "horus_mib": int(a["horus"]),
            "faketensor_mib": int(round(a["fake"])), "gpumemnet_mib": int(a["gmn"]),
            "parameters": P if P is not None else "", "activations_per_sample": A if A is not None else "",
            "gpu_util": fmt(gpu_util), "smact": fmt(smact), "smocc": fmt(smocc), "drama": fmt(drama),
            "power_w": fmt(power), "profile_source": "; ".join(src),
        })
    rows.sort(key=lambda r: r["task_name"].lower())
    for r in rows:
        for k, v in r.items():
            assert "," not in str(v) and "\n" not in str(v), (r["task_name"], k, v)
    return rows, conflicts, notes, horus_report, proxies


def dataset_match(cat_ds, ds):
    return cat_ds.replace("-", "").lower() == ds.replace("-", "").lower()


def batch_of(stem, a):
    if stem in COMMAND_BATCH:
        return COMMAND_BATCH[stem]
    m = re.search(r"--batch_size\s+(\d+)", a["cmd"])
    if not m:
        raise ValueError(f"no batch size for {stem}")
    return int(m.group(1))


def epochs_of(stem, a):
    if stem in COMMAND_EPOCHS:
        return COMMAND_EPOCHS[stem]
    m = re.search(r"--epochs\s+(\d+)", a["cmd"])
    return int(m.group(1)) if m else 1


def render(rows):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=HEADER, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow(r)
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shared", default=os.environ.get("CARMA_SHARED", os.path.join(ROOT, "..", "shared")))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    rows, conflicts, notes, horus_report, proxies = build(args.shared)
    out = render(rows)
    target = os.path.join(ROOT, "data", "workloads.csv")
    if args.check:
        with open(target) as fh:
            same = fh.read() == out
        print("data/workloads.csv is up to date" if same else "data/workloads.csv differs from a rebuild")
        return 0 if same else 1
    with open(target, "w") as fh:
        fh.write(out)
    print(f"wrote data/workloads.csv: {len(rows)} rows")
    print("trace conflicts:", conflicts or "none")
    print("notes:")
    for n in notes:
        print("  -", n)
    print("t_start proxies:", proxies)
    print("Horus inversion (P, A; stored vs formula MiB):")
    for script, pts, P, A, errs, status in horus_report:
        if P is None:
            print(f"  {script}: {pts} -> {status}")
            continue
        detail = ", ".join(f"B={b}: {h:g} vs {horus_mib(b, P, A):.1f} ({100*e:.3f} %)"
                           for (b, h), e in zip(pts, errs))
        print(f"  {script}: P={P} A={A} -> {detail} [{status}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
