#!/usr/bin/env python3
"""The training and inference programs replace only regular files of their user (issue 36): a
--checkpoint or --output path that is a FIFO, a device, a directory or a symbolic link is
refused at start (exit 2) and left as it was (as root, `--checkpoint /dev/null` replaced the
device with a regular file at the first save); the clean-up of a killed run's temporaries
removes only this user's regular files. Devices and other users' files only when run as root.

usage: special_files.py WORKDIR BIGRAM_TRAIN BIGRAM_INFER"""
import os
import shutil
import stat
import subprocess
import sys

work, train, infer = sys.argv[1:4]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)
failures = []
root = os.geteuid() == 0


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def run(*args):
    p = subprocess.run(list(args), capture_output=True, text=True, errors="replace", timeout=60)
    return p.returncode, p.stdout, p.stderr


def kind(path):
    try:
        return stat.S_IFMT(os.lstat(path).st_mode)
    except FileNotFoundError:
        return None


with open("train.txt", "wb") as f:
    f.write(bytes((97 + (i * 7) % 26) for i in range(4000)))
with open("tok.csv", "w") as f:
    f.write("97,98,99,100,101,102,103,104\n")
stream = ["--stream", "tokens,next=train.txt", "--batch", "4", "--steps", "2"]
rc, out, err = run(train, *stream, "--checkpoint", "w.ck")
check(rc == 0, f"training into a new file: {rc} {err}")
with open("victim", "w") as f:
    f.write("keep me\n")

# What each program refuses: path -> (what the error says, the kind it keeps).
specials = {}
os.mkfifo("fifo")
specials["fifo"] = ("it is a FIFO", stat.S_IFIFO)
os.symlink("victim", "link")
specials["link"] = ("it is a symbolic link", stat.S_IFLNK)
os.mkdir("dir")
specials["dir"] = ("it is a directory", stat.S_IFDIR)
if root:
    os.mknod("null", 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a /dev/null of our own
    specials["null"] = ("it is a device", stat.S_IFCHR)
else:
    print("special_files: not root: no device node, no other user's file")

for path, (needle, keeps) in specials.items():
    rc, out, err = run(train, *stream, "--checkpoint", path)
    check(rc == 2 and f"--checkpoint {path}: {needle}" in err, f"--checkpoint {path}: {rc} {err}")
    check(kind(path) == keeps, f"--checkpoint {path} replaced it")
    rc, out, err = run(infer, "--weights", "w.ck", "--input", "tokens=tok.csv", "--output", path)
    check(rc == 2 and f"--output {path}: {needle}" in err, f"--output {path}: {rc} {err}")
    check(kind(path) == keeps, f"--output {path} replaced it")
with open("victim") as f:
    check(f.read() == "keep me\n", "the link's target was written")
check(not [n for n in os.listdir(".") if ".tmp." in n], f"temporaries left: {os.listdir('.')}")

# A killed run's temporaries: this user's regular files are removed, nothing else.
dead = int(subprocess.run(["sh", "-c", "echo $$"], capture_output=True, text=True).stdout)
mine, theirs, linked = f"s.ck.tmp.{dead}", f"s.ck.tmp.{dead}.1", f"s.ck.tmp.{dead}.2"
for name in (mine, theirs):
    with open(name, "w") as f:
        f.write("half a checkpoint")
os.symlink("victim", linked)
if root:
    os.chown(theirs, 4242, 4242)
rc, out, err = run(train, *stream, "--checkpoint", "s.ck")
check(rc == 0 and kind("s.ck") == stat.S_IFREG, f"training with stale temporaries: {rc} {err}")
check(kind(mine) is None, "a stale temporary of ours was not removed")
check(kind(linked) == stat.S_IFLNK, "a link named as a temporary was removed")
if root:
    check(kind(theirs) == stat.S_IFREG, "another user's file named as a temporary was removed")

# --metrics is written in place, a FIFO too, and never read back: a FIFO no process reads is
# refused at start (opening it to write waited for ever); with a reader a run writes its records
# into it, and a resumed one (which cuts a regular log back to its checkpoint by reading it:
# reading a FIFO waited for ever) does too. A device is written in place, as before.
try:
    rc, out, err = run(train, *stream, "--metrics", "fifo")
    check(rc == 1 and "fifo: cannot open metrics log: it is a FIFO that no process reads" in err
          and len(err.strip().splitlines()) == 1, f"--metrics to a FIFO without a reader: {rc} {err}")
except subprocess.TimeoutExpired:
    check(False, "--metrics to a FIFO without a reader: the run hung")


def through_fifo(*args):
    """Runs the trainer with --metrics fifo while this process holds it open to read (opened before
    the trainer starts, so the trainer always finds a reader): (exit, records read)."""
    fd = os.open("fifo", os.O_RDONLY | os.O_NONBLOCK)
    try:
        p = subprocess.run([train, *unbounded, *args, "--metrics", "fifo", "--log-every", "1"], capture_output=True,
                           text=True, timeout=60)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = None
    data = b""
    while True:  # the few records wait in the pipe's buffer; EOF once the trainer has closed it
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            break
        if not chunk:
            break
        data += chunk
    os.close(fd)
    return rc, data.decode(errors="replace").splitlines()


unbounded = stream[:-2]  # without its --steps
rc, lines = through_fifo("--steps", "2", "--checkpoint", "f.ck")
check(rc == 0 and len(lines) == 2 and '"step":2,' in lines[-1], f"--metrics to a FIFO with a reader: {rc} {lines}")
rc, lines = through_fifo("--resume", "f.ck", "--checkpoint", "f.ck", "--steps", "3")
check(rc == 0 and len(lines) == 1 and '"step":3,' in lines[0], f"resumed with --metrics to a FIFO: {rc} {lines}")
check(kind("fifo") == stat.S_IFIFO, "--metrics replaced the FIFO")
if root:
    rc, out, err = run(train, *unbounded, "--resume", "f.ck", "--checkpoint", "f.ck", "--steps", "4", "--metrics",
                       "null")
    check(rc == 0 and kind("null") == stat.S_IFCHR, f"--metrics to a device, resumed: {rc} {err}")

if failures:
    print(f"{len(failures)} check(s) failed")
    sys.exit(1)
print("special_files: all checks passed")
