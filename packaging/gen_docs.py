#!/usr/bin/env python3
"""Writes what the Debian package carries besides the programs, from the programs themselves
(issue 24), so none of it can drift from them:

  carma.1.gz          every command of `carma` and its options   (carma --option-table)
  carma-daemon.8.gz   carma serve, admin, agent, node-key         (carma-daemon --option-table)
  carma.yaml.5.gz     every key of the config file and its default (carma serve --print-config)
  carma.yaml          /etc/carma/carma.yaml: those keys, each commented out at its default
  carma.bash          the bash completion of carma's commands and options

Usage: gen_docs.py --bindir DIR --version VERSION --out DIR
(DIR holds carma and carma-daemon; cmake/package.cmake runs it on the programs being packaged.)
"""

import argparse
import gzip
import json
import os
import subprocess
import sys

DAEMON_COMMANDS = ("serve", "admin", "agent", "node-key")


def run(argv):
    try:
        return subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        detail = getattr(e, "stderr", "") or ""
        sys.exit(f"gen_docs.py: {' '.join(argv)} failed: {e} {detail}".strip())


def roff(text):
    """Text for a roff line: backslashes and dashes escaped, no leading control character."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def gz(path, text):
    # mtime 0 and no file name: the same input gives the same bytes (lintian, reproducibility).
    with open(path, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=9) as f:
            f.write(text.encode())


def usage(path, app):
    words = [path]
    if any(not o["positional"] for o in app["options"]):
        words.append("[options]")
    if app["subcommands"]:
        words.append("COMMAND")
    for o in app["options"]:
        if o["positional"]:
            name = o["names"][-1].upper()
            name += "..." if o["multiple"] else ""
            words.append(name if o["required"] else f"[{name}]")
    return " ".join(words)


def option_entries(app):
    out = []
    for o in app["options"]:
        if o["positional"]:
            continue
        names = ", ".join(f"\\fB{roff(n)}\\fR" for n in sorted(o["names"], key=len))
        if not o["flag"]:
            names += " \\fI" + roff(o["type"] or "VALUE") + "\\fR"
        desc = roff(o["description"])
        if o["default"] and not o["flag"]:
            desc += f" (default: {roff(o['default'])})"
        out += [".TP", names, desc]
    for o in app["options"]:
        if o["positional"]:
            out += [".TP", f"\\fI{roff(o['names'][-1].upper())}\\fR", roff(o["description"])]
    return out


def command_sections(app, path):
    """One .SS per command below `app`, subcommands of subcommands included, in their order."""
    out = []
    for sub in app["subcommands"]:
        sub_path = f"{path} {sub['name']}"
        out += [f'.SS "{roff(usage(sub_path, sub))}"', roff(sub["description"]) + "."]
        out += option_entries(sub)
        out += command_sections(sub, sub_path)
    return out


def header(name, section, version, title):
    return [f'.TH {name.upper()} {section} "" "carma {version}" "{title}"']


def carma_page(carma, daemon, version):
    ours = dict(carma)
    ours["subcommands"] = [s for s in carma["subcommands"] if s["name"] not in DAEMON_COMMANDS]
    lines = header("carma", 1, version, "User Commands")
    lines += [".SH NAME", "carma \\- " + roff(carma["description"].split(": ", 1)[-1])]
    lines += [".SH SYNOPSIS", f".B carma\n.I COMMAND\n.RI [ options ]"]
    lines += [".SH DESCRIPTION", roff(carma["description"]) + ".",
              ".PP", "The commands that talk to a daemon find it by \\fB\\-\\-socket\\fR, "
              "else \\fB$CARMA_SOCKET\\fR, else the default socket (below). "
              "\\fBcarma\\fR \\fICOMMAND\\fR \\fB\\-\\-help\\fR prints a command's options.",
              ".SH OPTIONS"]
    lines += option_entries(carma)
    lines += [".SH COMMANDS"]
    lines += command_sections(ours, "carma")
    lines += [".SS Commands of the daemon",
              "These run in \\fBcarma\\-daemon\\fR, which \\fBcarma\\fR becomes for them; "
              "carma\\-daemon(8) lists their options:"]
    for s in daemon["subcommands"]:
        lines += [".TP", f"\\fBcarma {roff(s['name'])}\\fR", roff(s["description"]) + "."]
    lines += [".SH ENVIRONMENT", ".TP", "\\fBCARMA_SOCKET\\fR",
              "The daemon's API socket, when \\fB\\-\\-socket\\fR is not given.",
              ".SH FILES", ".TP", "\\fI/var/lib/carma/carma.sock\\fR",
              "The socket of the system's daemon. A user's commands take it unless a daemon "
              "of their own answers at \\fI$XDG_STATE_HOME/carma/carma.sock\\fR.",
              ".SH SEE ALSO", "carma\\-daemon(8), carma.yaml(5)"]
    return "\n".join(lines) + "\n"


def daemon_page(daemon, version):
    lines = header("carma-daemon", 8, version, "System Administration")
    lines += [".SH NAME", "carma\\-daemon \\- the CARMA daemon: carma serve, admin, agent and "
              "node\\-key"]
    lines += [".SH SYNOPSIS"]
    for s in daemon["subcommands"]:
        lines += [f".B carma {roff(s['name'])}", ".RI [ options ]", ".br"]
    lines += [".SH DESCRIPTION",
              "\\fBcarma\\-daemon\\fR is started as \\fBcarma serve\\fR, \\fBcarma admin\\fR, "
              "\\fBcarma agent\\fR or \\fBcarma node\\-key\\fR: \\fBcarma\\fR replaces itself "
              "with it (same process, same arguments), so the daemon's libraries stay out of "
              "every other command. It is installed next to \\fBcarma\\fR.",
              ".PP",
              "The package's systemd unit \\fIcarma.service\\fR runs \\fBcarma serve \\-\\-config "
              "/etc/carma/carma.yaml\\fR as root; options given as flags override the file.",
              ".SH SIGNALS", ".TP", "\\fBSIGHUP\\fR",
              "Re\\-read the configuration (\\fBsystemctl reload carma\\fR): limits, shares, "
              "weights, mail and the other policy knobs change at once; keys that need a restart "
              "(GPUs, policy, state directory, listeners) are named in the log and keep their "
              "value; a configuration with an error is refused and the old one stays.",
              ".TP", "\\fBSIGTERM\\fR, \\fBSIGINT\\fR",
              "Stop the daemon; running tasks go on under their supervisors.",
              ".SH COMMANDS"]
    lines += command_sections(daemon, "carma")
    lines += [".SH FILES", ".TP", "\\fI/etc/carma/carma.yaml\\fR",
              "The configuration of the system's daemon, carma.yaml(5).", ".TP",
              "\\fI/var/lib/carma\\fR",
              "The state directory of a root daemon (mode 0711): the database \\fIcarma.db\\fR, "
              "the socket \\fIcarma.sock\\fR and the attempts' files (\\fIattempts/\\fR, mode "
              "0700).",
              ".SH SEE ALSO", "carma(1), carma.yaml(5), systemctl(1)"]
    return "\n".join(lines) + "\n"


def config_entries(text):
    """(depth, key, value, meaning) for every key of `carma serve --print-config`."""
    entries, meaning = [], []
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped:
            meaning = []
        elif stripped.startswith("#"):
            meaning.append(stripped[1:].strip())
        else:
            key, _, value = stripped.partition(":")
            depth = (len(line) - len(line.lstrip())) // 2
            entries.append((depth, key, value.strip(), " ".join(meaning)))
            meaning = []
    return entries


def config_page(entries, version):
    lines = header("carma.yaml", 5, version, "File Formats")
    lines += [".SH NAME", "carma.yaml \\- configuration of the CARMA daemon",
              ".SH SYNOPSIS", "\\fI/etc/carma/carma.yaml\\fR",
              ".SH DESCRIPTION",
              "A YAML mapping of the keys below to values, read by \\fBcarma serve \\-\\-config "
              "\\fR\\fIFILE\\fR; the flags of carma\\-daemon(8) override it. A key that is not "
              "below is an error that names it. The package installs every key commented out "
              "at its default; \\fBcarma serve \\-\\-config\\fR \\fIFILE\\fR "
              "\\fB\\-\\-print\\-config\\fR prints what the daemon makes of a file.",
              ".SH KEYS"]
    section = ""
    for depth, key, value, meaning in entries:
        if depth == 0:
            section = key
        name = f"{section}.{key}" if depth else key
        shown = f" (default: \\fB{roff(value)}\\fR)" if value else ""
        lines += [".TP", f"\\fB{roff(name)}\\fR", roff(meaning) + shown]
    lines += [".SH FILES", "\\fI/etc/carma/carma.yaml\\fR",
              ".SH SEE ALSO", "carma\\-daemon(8), carma(1)"]
    return "\n".join(lines) + "\n"


def conffile(text):
    body = text.split("\n\n", 1)[1]  # after the header of --print-config
    out = ["# /etc/carma/carma.yaml: the configuration of the CARMA daemon (carma.service runs",
           "# `carma serve --config /etc/carma/carma.yaml`). Every key is here, commented out at",
           "# its default: remove the '#' before a key (and before its section, risk: or limits:)",
           "# and change the value. carma.yaml(5) explains the keys; `carma serve --config",
           "# /etc/carma/carma.yaml --print-config` shows what the daemon makes of this file.",
           ""]
    for line in body.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            line = "#" + line
        out.append(line)
    return "\n".join(out) + "\n"


# The words of --state (CARMA's states, then squeue's codes and names: src/cli/views/queue_view.cpp)
STATES = ("queued recovering held running succeeded failed cancelled timeout lost rejected "
          "PD R CG CD F CA TO OOM NF PENDING RUNNING COMPLETING COMPLETED FAILED CANCELLED "
          "TIMEOUT OUT_OF_MEMORY NODE_FAIL")
# Commands whose arguments are task ids.
TASK_COMMANDS = ("show", "cancel", "hold", "release", "logs")


def completion(carma, daemon):
    """Bash completion: subcommands and options at every level, states after --state, the
    caller's task ids where a command takes them, files elsewhere."""
    tree = dict(carma)
    by_name = {s["name"]: s for s in daemon["subcommands"]}
    tree["subcommands"] = [by_name.get(s["name"], s) for s in carma["subcommands"]]
    subs, opts = [], []

    def walk(app, path):
        names = [s["name"] for s in app["subcommands"]]
        options = sorted({n for o in app["options"] if not o["positional"] for n in o["names"]
                          if n.startswith("--")})
        subs.append(f'        "{path}") words="{" ".join(names)}" ;;')
        opts.append(f'        "{path}") words="{" ".join(options)}" ;;')
        for s in app["subcommands"]:
            walk(s, f"{path} {s['name']}".strip())

    walk(tree, "")
    return "\n".join([
        "# bash completion for carma, generated from its option tables (packaging/gen_docs.py).",
        "_carma_words() {",
        "    local words=\"\"",
        "    if [[ $1 == sub ]]; then",
        "        case \"$2\" in",
        *subs,
        "        esac",
        "    else",
        "        case \"$2\" in",
        *opts,
        "        esac",
        "    fi",
        "    printf '%s\\n' \"$words\"",
        "}",
        "",
        "# The caller's unfinished tasks (array members one by one), as `carma queue` lists them.",
        "_carma_tasks() {",
        "    carma queue --me --array --format id 2>/dev/null | tail -n +2",
        "}",
        "",
        "_carma() {",
        "    local cur=${COMP_WORDS[COMP_CWORD]} path=\"\" word i",
        "    local prev=${COMP_WORDS[COMP_CWORD-1]}",
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        "        word=${COMP_WORDS[i]}",
        "        [[ $word == -- ]] && return 0  # the task's own command follows",
        "        if [[ \" $(_carma_words sub \"$path\") \" == *\" $word \"* ]]; then",
        "            path=${path:+$path }$word",
        "        fi",
        "    done",
        "    if [[ $prev == --state || ($prev == -t && $path != submit && $path != estimate) ]]; then",
        f"        COMPREPLY=($(compgen -W \"{STATES}\" -- \"$cur\"))",
        "        return 0",
        "    fi",
        "    if [[ $cur == -* ]]; then",
        "        COMPREPLY=($(compgen -W \"$(_carma_words opt \"$path\")\" -- \"$cur\"))",
        f"    elif [[ \" {' '.join(TASK_COMMANDS)} \" == *\" $path \"* ]]; then",
        "        COMPREPLY=($(compgen -W \"$(_carma_tasks)\" -- \"$cur\"))",
        "    else",
        "        COMPREPLY=($(compgen -W \"$(_carma_words sub \"$path\")\" -- \"$cur\"))",
        "    fi",
        "}",
        "complete -o default -F _carma carma",
        ""])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bindir", required=True)
    p.add_argument("--version", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    carma_bin = os.path.join(a.bindir, "carma")
    daemon_bin = os.path.join(a.bindir, "carma-daemon")
    carma = json.loads(run([carma_bin, "--option-table"]))
    daemon = json.loads(run([daemon_bin, "--option-table"]))
    # The defaults as a root daemon (the package's) sees them, whoever builds the package.
    env_free = {k: v for k, v in os.environ.items() if k != "CARMA_SOCKET"}
    config = subprocess.run([daemon_bin, "serve", "--print-config"], check=True,
                            capture_output=True, text=True, env=env_free).stdout
    os.makedirs(a.out, exist_ok=True)
    gz(os.path.join(a.out, "carma.1.gz"), carma_page(carma, daemon, a.version))
    gz(os.path.join(a.out, "carma-daemon.8.gz"), daemon_page(daemon, a.version))
    gz(os.path.join(a.out, "carma.yaml.5.gz"), config_page(config_entries(config), a.version))
    with open(os.path.join(a.out, "carma.yaml"), "w") as f:
        f.write(conffile(config))
    with open(os.path.join(a.out, "carma.bash"), "w") as f:
        f.write(completion(carma, daemon))


if __name__ == "__main__":
    main()
