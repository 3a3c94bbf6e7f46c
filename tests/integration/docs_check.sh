#!/usr/bin/env bash
# docs_check.sh — the docs name only what exists. Fails when:
#   - a relative link in a Markdown file, or a repository path named in one
#     or in a man page (`fs/fuse/data.c`, `results/perf-…/`, `fs/*.md`;
#     globs and {a,b} must match something), does not exist; Markdown
#     files are every tracked *.md outside bench/results/ (the runs' notes
#     describe the tree of their day), man pages every tracked *.8;
#   - a link's #anchor is no heading of the file it points to;
#   - a section quoted in a doc, a man page or a source comment (a .md
#     file's name, a comma and the title in double quotes) is not in that
#     file, as a heading or as text;
#   - README.md's first two commands are not the `make demo` and the
#     `make check` ones that CI runs;
#   - README.md's layout block does not name a folder of the tree (each
#     top-level one and each of fs/), or doc/CODEMAP.md's table ("where
#     each behaviour lives") does not link a module of fs/, iopath/ or
#     mkchunkfs/ (every .c file, and every header without a .c of its name);
#   - fs/BAD-INPUT.md names a test that does not exist;
#   - bench/README.md does not name a benchmark script of bench/;
#   - bench/results/ holds a loose file, or a run folder without notes.md.
# Needs no root and nothing built.
# make check-asan: once
. "$(dirname "$0")/../lib/common.sh"
cfs_require_cmd python3

python3 - "$CFS_ROOT" <<'EOF' || cfs_fail "the docs name things that do not exist (above)"
import glob, os, re, subprocess, sys

root = sys.argv[1]
os.chdir(root)
errors = []


def err(where, msg):
    errors.append("%s: %s" % (where, msg))


try:
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True,
                             check=True).stdout.split("\n")
except (OSError, subprocess.CalledProcessError):
    tracked = [os.path.relpath(os.path.join(d, f)) for d, _, fs in os.walk(".")
               if "/build" not in d and "/.git" not in d for f in fs]
tracked = [f for f in tracked if f and os.path.exists(f)]
docs = sorted(f for f in tracked if f.endswith(".md") and not f.startswith("bench/results/"))
mans = sorted(f for f in tracked if f.endswith(".8"))
sources = sorted(f for f in tracked if re.search(r"\.(c|h|sh|py)$|(^|/)Makefile$", f))


def expand(pattern):
    """a{b,c}d -> [abd, acd] (one level is all the docs use)"""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [x for alt in m.group(1).split(",")
            for x in expand(pattern[:m.start()] + alt + pattern[m.end():])]


def exists(path):
    return all(glob.glob(p, recursive=True) if re.search(r"[*?\[]", p) else os.path.exists(p)
               for p in expand(path))


def slug(heading):
    """GitHub's anchor of a heading"""
    s = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return s.replace(" ", "-")


def headings(md):
    out, seen, fence = [], {}, False
    for line in open(md, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = re.match(r"#{1,6} +(.*?)\s*#*$", line)
        if m and not fence:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.append((m.group(1), s if n == 0 else "%s-%d" % (s, n)))
    return out


def plain(text):
    return re.sub(r"\s+", " ", re.sub(r"[`*]|\\f[BIRP]", "", text)).strip().lower()


# ---- paths named in the docs and man pages -------------------------------------------
TOKEN_STRIP = "`'\"()[]{},.;:!?*"


def check_paths(doc, text):
    base = os.path.dirname(doc)
    for n, line in enumerate(text.split("\n"), 1):
        where = "%s:%d" % (doc, n)
        # links: [text](target)
        for target in re.findall(r"\]\(([^)\s]+)\)", line):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(base, path)) if path else doc
            if not os.path.exists(full):
                err(where, "link to %s: no such file" % target)
            elif anchor and full.endswith(".md") and anchor not in [s for _, s in headings(full)]:
                err(where, "link to %s: no heading #%s in %s" % (target, anchor, full))
        # paths: words with a slash whose first part is a folder of the tree
        for word in re.split(r"[\s`\"()|=]+", line.replace("\\-", "-")):
            word = re.sub(r"\\f[BIRP]", "", word).split("#")[0]
            word = word.lstrip("[{").rstrip(".,;:!?'")
            if word.endswith("'s"):
                word = word[:-2]
            if word.endswith("]") and word.count("[") < word.count("]"):
                word = word[:-1]
            if word.startswith("./"):
                word = word[2:]
            if ("/" not in word or "..." in word or "://" in word or "$" in word
                    or "<" in word or ">" in word or "@" in word
                    or word.startswith(("/", "~", "build/"))):
                continue
            first = word.split("/")[0]
            if first in ("", ".", ".."):
                cand = [os.path.normpath(os.path.join(base, word))]
            else:
                cand = [os.path.normpath(os.path.join(b, word))
                        for b in dict.fromkeys((base, "."))
                        if os.path.isdir(os.path.join(b, first))]
            if not cand:
                continue  # not a path of this tree (read/write, MB/s, linux/fuse.h)
            if cand[0].startswith(".."):
                err(where, "%s points outside the repository" % word)
            elif not any(exists(c) for c in cand):
                err(where, "%s: no such file or folder" % word)


for f in docs + mans:
    check_paths(f, open(f, encoding="utf-8").read())

# ---- sections quoted by name ----------------------------------------------------------------
md_by_name = {}
for d in docs:
    md_by_name.setdefault(os.path.basename(d), []).append(d)
for f in docs + mans + sources:
    text = open(f, encoding="utf-8", errors="replace").read()
    flat = re.sub(r"\n\s*(\*|#|//)?\s*", " ", text)
    for name, title in re.findall(r"([\w./-]+\.md)(?:,|:| section)? \"([^\"]+)\"", flat):
        target = os.path.normpath(os.path.join(os.path.dirname(f), name))
        if not os.path.exists(target):
            target = name if os.path.exists(name) else None
        if target is None and len(md_by_name.get(os.path.basename(name), [])) == 1:
            target = md_by_name[os.path.basename(name)][0]
        if target is None:
            err(f, "%s, \"%s\": no such file" % (name, title))
        elif plain(title) not in plain(open(target, encoding="utf-8").read()):
            err(f, "%s, \"%s\": not in %s" % (name, title, target))

# ---- README's first two commands ------------------------------------------------------
readme = open("README.md", encoding="utf-8").read()
block = re.search(r"```\w*\n(.*?)```", readme, re.S)
cmds = [l.strip() for l in (block.group(1) if block else "").split("\n")
        if l.strip() and not l.strip().startswith("#")]
want = [r"(sudo \./\.ci/install-deps\.sh && )?make demo", r"(sudo \./\.ci/install-deps\.sh && )?make check"]
if len(cmds) < 2 or not all(re.fullmatch(w, c) for w, c in zip(want, cmds)):
    err("README.md", "the first commands are %s, not `make demo` and `make check`" % cmds[:2])
make = open("Makefile", encoding="utf-8").read()
for t in ("demo", "check"):
    if not re.search(r"^%s:" % t, make, re.M):
        err("Makefile", "no target %s (README's first commands)" % t)

# ---- README's layout block and file table: every folder, every module ------------------
layout = re.search(r"^## Layout\n+```\n(.*?)```", readme, re.S | re.M)
named = re.findall(r"(?:^|\s)([\w.][\w./-]*/)", layout.group(1) if layout else "", re.M)
folders = {f.split("/")[0] + "/" for f in tracked if "/" in f}
folders |= {"/".join(f.split("/")[:2]) + "/" for f in tracked if f.startswith("fs/") and f.count("/") > 1}
for d in sorted(folders):
    if not any(n == d or (n.startswith(d) and d.count("/") == 1) for n in named):
        err("README.md", "the layout block does not name %s" % d)
codemap = open("doc/CODEMAP.md", encoding="utf-8").read()
table = re.search(r"^((?:\|.*\n)+)", codemap, re.M)
linked = {os.path.normpath(os.path.join("doc", t))
          for t in re.findall(r"\]\(([^)#\s]+)", table.group(1) if table else "")}
modules = [f for f in tracked if re.match(r"(fs|iopath|mkchunkfs)/.*\.c$", f)]
modules += [f for f in tracked if re.match(r"(fs|iopath|mkchunkfs)/.*\.h$", f)
            and f[:-2] + ".c" not in tracked]
for m in sorted(modules):
    if m not in linked:
        err("doc/CODEMAP.md", "the table does not link %s" % m)

# ---- bench/README.md names every benchmark; every run has its notes -------------------
bench_readme = open("bench/README.md", encoding="utf-8").read()
for s in sorted(glob.glob("bench/*.sh")):
    if os.path.basename(s) != "lib.sh" and os.path.basename(s) not in bench_readme:
        err("bench/README.md", "does not say how to run %s" % s)
for p in sorted(glob.glob("bench/results/*")):
    if not os.path.isdir(p):
        err(p, "a loose result: put each run in its own folder, with a notes.md")
    elif not os.path.exists(os.path.join(p, "notes.md")):
        err(p, "a run without notes.md")

# ---- fs/BAD-INPUT.md: every test it names is a test -----------------------------------
for n, line in enumerate(open("fs/BAD-INPUT.md", encoding="utf-8"), 1):
    cells = line.rstrip("\n").split("|")
    if not line.startswith("|") or len(cells) < 3 or set(cells[-2].strip()) <= set("-: "):
        continue
    for name in re.findall(r"`([^`]+)`", cells[-2]):
        name = name.split()[0]
        if "/" in name:
            continue  # a command (bench/soak.sh ...): checked as a path above
        if not any(glob.glob(p) for p in ("tests/integration/%s.sh" % name, "tests/golden/%s" % name,
                                           "tests/fuzz/%s.c" % name)):
            err("fs/BAD-INPUT.md:%d" % n, "names the test %s, which does not exist" % name)

for e in errors:
    print(e)
print("# %d docs, %d man pages, %d sources checked: %d problems"
      % (len(docs), len(mans), len(sources), len(errors)))
sys.exit(1 if errors else 0)
EOF
cfs_log "ok"
