#!/usr/bin/env python3
"""Runs every command a guide shows, in order, so the guide cannot drift from the programs.

Usage: walk_guide.py --bin DIR [--repo DIR] [--own-daemon] [--show] [--keep] GUIDE.md

The convention (each walked file states it in an HTML comment near its top):

- Commands are in fenced ```console blocks. A line that starts with "$ " is a command; a line
  ending in "\\" continues it, and a here-document's lines (`cat > task.yaml <<'EOF'`) belong to
  it up to the end marker. Every other line of the block is sample output: shown, not compared.
- A comment that ends a command's first line may say what the walker checks:
  `# exits N` (the command must exit N; without it, 0) and `# prints "TEXT"` (its output,
  stdout and stderr together, must contain TEXT); both may be given: `# exits 2, prints "..."`.
  Any other comment is only a comment.
- All commands of a file run in one bash session (`cd`, `export` and shell variables carry over),
  each with stdin from /dev/null, in a fresh temporary directory that holds the files the guide
  makes. PATH starts with --bin; NO_COLOR is set.
- Unless --own-daemon is given, the walker first starts `carma serve` on emulated GPUs
  (4xA100-40GB, --time-scale 100) with a private state directory, and exports CARMA_SOCKET (its
  socket) and STATE (its state directory) to the commands. With --own-daemon the file starts its
  own: a command `carma serve ... &` runs in the background, and the walker waits until the
  socket it names (--socket, else STATE_DIR/carma.sock from --state-dir) answers.
- A block that cannot run here (installing the package, systemd, Slurm) is preceded by
  `<!-- run by: TEST[, TEST] -->`: the walker runs none of it but checks that every TEST is a
  test of tests/ (an `add_test(NAME TEST` of a CMakeLists.txt, or a gtest `TEST_F(Suite, Name)`
  for Suite.Name). A block of sh, bash or shell is not run, so it must be preceded by
  `<!-- not run: REASON -->`; a "$ " line outside a console block is an error.
- At the end, every task still waiting or running on a daemon the walk started is cancelled and
  the daemons are stopped; the temporary directory is removed (--keep keeps it).

A failure names the file and line, the command, its exit status and its output, and the exit
status of the walker is 1. The walker never skips: missing programs, a daemon that does not
start, or a guide with no command are failures too.
"""

import argparse
import glob
import json
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

COMMAND_TIMEOUT_S = 90
DAEMON_START_TIMEOUT_S = 30
SENTINEL = "__carma_walk_done__"
FINAL_STATES = ("succeeded", "failed", "cancelled", "timeout", "lost", "rejected")
NEEDED = ("carma", "carma-daemon", "carma-shim", "carma-fakejob")


class WalkError(Exception):
    pass


# --- parsing -----------------------------------------------------------------------------------


class Command:
    def __init__(self, line, text, first_line):
        self.line = line  # 1-based line of the guide
        self.text = text  # what bash runs
        self.exits = 0
        self.prints = []
        self.background = False
        comment = trailing_comment(first_line)
        if comment is not None:
            parse_checks(self, comment)
        last = cut_comment(text.rstrip().split("\n")[-1]).rstrip()
        if "<<" not in text and last.endswith("&") and not last.endswith("&&"):
            self.background = True


class Block:
    def __init__(self, line, info, indent):
        self.line = line
        self.info = info
        self.indent = indent
        self.lines = []  # (line number, text without the fence's indentation)
        self.run_by = None
        self.not_run = None
        self.commands = []


def comment_start(line):
    """Where an unquoted `#` starts a shell comment in `line`, or None."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "'\"":
            quote = c
        elif c == "\\":
            i += 2
            continue
        elif c == "#" and (i == 0 or line[i - 1] in " \t"):
            return i
        i += 1
    return None


def trailing_comment(line):
    """The text after an unquoted `#` that starts a shell comment, or None."""
    at = comment_start(line)
    return None if at is None else line[at + 1:].strip()


def cut_comment(line):
    at = comment_start(line)
    return line if at is None else line[:at]


CHECK_RE = re.compile(r'^(?:exits\s+(\d+)|prints\s+"((?:[^"\\]|\\.)*)")\s*,?\s*')


def parse_checks(command, comment):
    rest = comment
    seen = False
    while rest:
        m = CHECK_RE.match(rest)
        if not m:
            break
        seen = True
        if m.group(1) is not None:
            command.exits = int(m.group(1))
        else:
            command.prints.append(m.group(2).replace('\\"', '"'))
        rest = rest[m.end():]
    if seen and rest:
        raise WalkError(f"line {command.line}: cannot read the check '{rest}' in '# {comment}'")


FENCE_RE = re.compile(r"^(\s*)(```+|~~~+)\s*([^`\s]*)")
ANNOTATION_RE = re.compile(r"^\s*<!--\s*(run by|not run):\s*(.*?)\s*-->\s*$")
HEREDOC_RE = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


def parse(path):
    with open(path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    blocks = []
    errors = []
    pending = None  # (kind, value, line) of an annotation waiting for its block
    i = 0
    while i < len(lines):
        m = FENCE_RE.match(lines[i])
        a = ANNOTATION_RE.match(lines[i])
        if a:
            pending = (a.group(1), a.group(2), i + 1)
            i += 1
            continue
        if not m:
            if lines[i].strip() and pending:
                errors.append(f"{path}:{pending[2]}: <!-- {pending[0]}: --> is not followed by a code block")
                pending = None
            i += 1
            continue
        indent, fence, info = m.group(1), m.group(2), m.group(3).lower()
        block = Block(i + 1, info, len(indent))
        if pending:
            if pending[0] == "run by":
                block.run_by = [t.strip() for t in pending[1].split(",") if t.strip()]
            else:
                block.not_run = pending[1]
            pending = None
        i += 1
        while i < len(lines):
            stripped = lines[i].strip()
            if stripped.startswith(fence[0] * len(fence)) and stripped.strip(fence[0]) == "":
                break
            text = lines[i]
            cut = min(block.indent, len(text) - len(text.lstrip(" ")))
            block.lines.append((i + 1, text[cut:]))
            i += 1
        else:
            errors.append(f"{path}:{block.line}: the code block is not closed")
        i += 1
        blocks.append(block)
    if pending:
        errors.append(f"{path}:{pending[2]}: <!-- {pending[0]}: --> is not followed by a code block")

    for block in blocks:
        if block.info == "console":
            try:
                block.commands = commands_of(block)
            except WalkError as e:
                errors.append(f"{path}:{e}")
            if not block.commands and not block.run_by:
                errors.append(f"{path}:{block.line}: a console block without a \"$ \" command")
        elif block.info in ("sh", "bash", "shell", "zsh"):
            if not block.not_run and not block.run_by:
                errors.append(
                    f"{path}:{block.line}: a ```{block.info} block is not run; write its commands "
                    "in a ```console block (\"$ \" lines), or say why not with <!-- not run: ... -->")
        else:
            for n, text in block.lines:
                if text.startswith("$ "):
                    errors.append(f"{path}:{n}: a command outside a ```console block: {text}")
        if block.not_run and block.info == "console":
            errors.append(f"{path}:{block.line}: a console block marked <!-- not run --> (use run by: TEST)")
    return blocks, errors


def commands_of(block):
    commands = []
    lines = block.lines
    i = 0
    while i < len(lines):
        n, text = lines[i]
        if not text.startswith("$ "):
            i += 1
            continue
        first = text[2:]
        parts = [first]
        i += 1
        while cut_comment(parts[-1]).rstrip().endswith("\\") and i < len(lines):
            parts.append(lines[i][1])
            i += 1
        joined = "\n".join(parts)
        for marker in [m.group(2) for m in HEREDOC_RE.finditer(cut_comment(first))]:
            while True:
                if i >= len(lines):
                    raise WalkError(f"{n}: the here-document {marker} has no end line")
                parts.append(lines[i][1])
                i += 1
                if parts[-1].strip() == marker:
                    break
            joined = "\n".join(parts)
        commands.append(Command(n, joined, first))
    return commands


# --- the tests named by run-by annotations ----------------------------------------------------


def known_tests(repo):
    names = set()
    for cm in glob.glob(os.path.join(repo, "tests", "**", "CMakeLists.txt"), recursive=True):
        with open(cm, encoding="utf-8") as f:
            names.update(re.findall(r"add_test\(\s*NAME\s+([^\s)]+)", f.read()))
    sources = []
    for ext in ("cpp", "h"):
        sources += glob.glob(os.path.join(repo, "tests", "**", "*." + ext), recursive=True)
    for src in sources:
        with open(src, encoding="utf-8", errors="replace") as f:
            for suite, name in re.findall(r"\bTEST(?:_F|_P)?\(\s*(\w+)\s*,\s*(\w+)\s*\)", f.read()):
                names.add(f"{suite}.{name}")
    return names


def test_exists(name, names):
    if name in names:
        return True
    # A gtest suite (UpgradeTest) names all its tests.
    return any(n.startswith(name + ".") for n in names)


# --- running -----------------------------------------------------------------------------------


def socket_answers(path):
    if not os.path.exists(path):
        return False
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(2)
        s.connect(path)
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        data = s.recv(64)
        s.close()
        return data.startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def wait_for_socket(path, proc, log, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if socket_answers(path):
            return
        if proc is not None and proc.poll() is not None:
            raise WalkError(f"the daemon exited with status {proc.returncode} before it answered "
                            f"on {path}; its log:\n{tail(log)}")
        time.sleep(0.05)
    raise WalkError(f"the daemon did not answer on {path} within {timeout} s; its log:\n{tail(log)}")


def tail(path, n=40):
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError as e:
        return f"(cannot read {path}: {e})"


def serve_socket(text, cwd):
    """The socket a `carma serve ... &` command will listen on, from its --socket or --state-dir."""
    words = cut_comment(text).replace("\\\n", " ").split()
    sock = state = None
    for i, w in enumerate(words):
        for opt in ("--socket", "--state-dir"):
            value = None
            if w == opt and i + 1 < len(words):
                value = words[i + 1]
            elif w.startswith(opt + "="):
                value = w.split("=", 1)[1]
            if value is not None:
                value = os.path.join(cwd, os.path.expanduser(value.strip("'\"")))
                if opt == "--socket":
                    sock = value
                else:
                    state = value
    if sock:
        return sock
    if state:
        return os.path.join(state, "carma.sock")
    return None


class Shell:
    def __init__(self, cwd, env, ctrl):
        self.ctrl = ctrl
        self.cwd = cwd
        self.proc = subprocess.Popen(["bash", "--noprofile", "--norc"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd,
                                     env=env, start_new_session=True)
        self.count = 0

    def run(self, text, timeout):
        self.count += 1
        script = os.path.join(self.ctrl, f"cmd-{self.count}.sh")
        out = os.path.join(self.ctrl, f"out-{self.count}.txt")
        with open(script, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        self.proc.stdin.write(
            f'source "{script}" >"{out}" 2>&1 </dev/null; echo "{SENTINEL} $? $PWD"\n'.encode())
        self.proc.stdin.flush()
        buf = b""
        deadline = time.monotonic() + timeout
        while SENTINEL.encode() not in buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, tail(out, 200)
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 4096)
                if not chunk:
                    return -1, tail(out, 200) + "\n(the shell exited: did the command call exit?)"
                buf += chunk
        line = buf.decode(errors="replace").split(SENTINEL, 1)[1].strip().split("\n")[0]
        status, pwd = line.split(" ", 1)
        self.cwd = pwd
        with open(out, encoding="utf-8", errors="replace") as f:
            return int(status), f.read()

    def stop(self):
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


def cancel_everything(carma, sockets, env):
    """Cancel what is still waiting or running on each daemon, and wait for it to end."""
    for sock in sockets:
        if not socket_answers(sock):
            continue
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            q = subprocess.run([carma, "queue", "--socket", sock, "--json"], env=env,
                               capture_output=True, text=True)
            try:
                tasks = json.loads(q.stdout).get("tasks", [])
            except ValueError:
                break
            live = [t for t in tasks if t.get("state") not in FINAL_STATES]
            if not live:
                break
            ids = [str(t["id"]) for t in live]
            if ids:
                subprocess.run([carma, "cancel", "--socket", sock] + ids, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(0.3)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", required=True, help="folder with carma, carma-daemon, carma-shim, carma-fakejob")
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    help="the source tree (for the tests that run-by annotations name)")
    ap.add_argument("--own-daemon", action="store_true",
                    help="start no daemon: the guide starts its own (`carma serve ... &`)")
    ap.add_argument("--show", action="store_true", help="print every command's output")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("guide")
    args = ap.parse_args()

    guide = args.guide
    started = time.monotonic()
    try:
        blocks, errors = parse(guide)
    except OSError as e:
        print(f"FAIL: cannot read {guide}: {e}", file=sys.stderr)
        return 1
    if "walk_guide.py" not in open(guide, encoding="utf-8").read():
        errors.append(f"{guide}: no HTML comment names tests/docs/walk_guide.py and its convention")
    names = known_tests(args.repo)
    for block in blocks:
        for t in block.run_by or []:
            if not test_exists(t, names):
                errors.append(f"{guide}:{block.line}: <!-- run by: {t} --> names no test of "
                              f"{os.path.join(args.repo, 'tests')}")
    commands = [c for b in blocks if b.info == "console" and not b.run_by for c in b.commands]
    if not commands:
        errors.append(f"{guide}: no command to run (no ```console block with \"$ \" lines)")
    if errors:
        print("FAIL: " + "\n".join(errors), file=sys.stderr)
        return 1

    bindir = os.path.abspath(args.bin)
    missing = [p for p in NEEDED if not os.access(os.path.join(bindir, p), os.X_OK)]
    if missing:
        print(f"FAIL: {', '.join(missing)} not found (or not executable) in {bindir}; "
              "build them, or give --bin the folder that has them", file=sys.stderr)
        return 1
    carma = os.path.join(bindir, "carma")

    top = tempfile.mkdtemp(prefix="carma-guide-")
    ctrl = os.path.join(top, "walk")
    work = os.path.join(top, "work")
    state = os.path.join(top, "state")
    os.makedirs(ctrl)
    os.makedirs(work)
    env = dict(os.environ)
    env["PATH"] = bindir + os.pathsep + env.get("PATH", "/usr/bin:/bin")
    env["NO_COLOR"] = "1"
    env["XDG_STATE_HOME"] = os.path.join(top, "xdg-state")
    env.pop("CARMA_SOCKET", None)
    daemon = None
    sockets = []
    shell = None
    status = 1
    try:
        if not args.own_daemon:
            log = os.path.join(ctrl, "daemon.log")
            sock = os.path.join(state, "carma.sock")
            with open(log, "w") as logf:
                try:
                    daemon = subprocess.Popen(
                        [carma, "serve", "--gpus", "emulated:4xA100-40GB", "--state-dir", state,
                         "--socket", sock, "--time-scale", "100", "--kill-grace", "1"],
                        stdout=logf, stderr=subprocess.STDOUT, env=env, cwd=top,
                        start_new_session=True)
                except OSError as e:
                    raise WalkError(f"cannot start {carma} serve: {e}")
            wait_for_socket(sock, daemon, log, DAEMON_START_TIMEOUT_S)
            sockets.append(sock)
            env["CARMA_SOCKET"] = sock
            env["STATE"] = state
        shell = Shell(work, env, ctrl)
        for cmd in commands:
            if args.show:
                print(f"--- {guide}:{cmd.line}\n$ {cmd.text}", flush=True)
            rc, output = shell.run(cmd.text, COMMAND_TIMEOUT_S)
            if args.show:
                print(output, end="" if output.endswith("\n") or not output else "\n", flush=True)
            where = f"{guide}:{cmd.line}"
            if rc is None:
                raise WalkError(f"{where}: `{cmd.text}` did not end within {COMMAND_TIMEOUT_S} s; "
                                f"its output so far:\n{output}")
            if rc != cmd.exits:
                raise WalkError(f"{where}: `{cmd.text}` exited {rc}, expected {cmd.exits}; its "
                                f"output:\n{output}")
            for want in cmd.prints:
                if want not in output:
                    raise WalkError(f"{where}: `{cmd.text}` did not print \"{want}\"; its "
                                    f"output:\n{output}")
            if cmd.background:
                sock = serve_socket(cmd.text, shell.cwd) if re.search(r"\bcarma\s+serve\b", cmd.text) else None
                if not sock:
                    raise WalkError(f"{where}: `{cmd.text}` runs in the background; the walker "
                                    "takes that only for `carma serve --socket S|--state-dir D ... &`")
                wait_for_socket(sock, None, os.path.join(ctrl, f"out-{shell.count}.txt"),
                                DAEMON_START_TIMEOUT_S)
                sockets.append(sock)
        status = 0
        print(f"ok: {guide}: {len(commands)} command(s) in "
              f"{time.monotonic() - started:.1f} s" +
              "".join(f"\n  {guide}:{b.line}: run by {', '.join(b.run_by)}" for b in blocks if b.run_by) +
              "".join(f"\n  {guide}:{b.line}: not run: {b.not_run}" for b in blocks if b.not_run))
    except WalkError as e:
        print(f"FAIL: {e}", file=sys.stderr)
    finally:
        cancel_everything(carma, sockets, env)
        if shell:
            shell.stop()
        if daemon:
            daemon.terminate()
            try:
                daemon.wait(timeout=15)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()
        if args.keep or status != 0 and os.environ.get("CARMA_GUIDE_KEEP"):
            print(f"kept {top}")
        else:
            shutil.rmtree(top, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
