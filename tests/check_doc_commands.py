#!/usr/bin/env python3
"""ctest docs.commands: every `htm` command the README and docs/ show, in a fenced block or as
`inline code`, as written: its command exists, each option is one that command takes (its
--help), each experiment file it names exists (as written, else under experiments/, where htm
looks too), and each --variant is one that file or a file it extends defines. A command with a
placeholder (<run>, …, $VAR, $(...)) is skipped; what follows a pipe, a redirection, && or # is
not the command's.
    usage: check_doc_commands.py HTM_BINARY SOURCE_DIR"""
import glob
import os
import re
import shlex
import subprocess
import sys
import tomllib

USER_FILES = {'example.toml'}  # files a page shows the reader writing before running them
COMMAND = r'(?:\./)?(?:build/)?htm [a-z][^`#]*'


def commands(page):
    """(line, text) of each htm command on the page; a fenced line's continuations joined."""
    found, fenced, lines, i = [], False, open(page, encoding='utf-8').read().split('\n'), 0
    while i < len(lines):
        line, at = lines[i], i + 1
        if line.lstrip().startswith('```'):
            fenced = not fenced
        elif fenced:
            while line.endswith('\\') and i + 1 < len(lines):
                i += 1
                line = line[:-1] + ' ' + lines[i].strip()
            m = re.match(r'\s*(?:\$ )?(' + COMMAND + ')', line)
            if m:
                found.append((at, m.group(1)))
        else:
            found += [(at, m.group(1)) for m in re.finditer('`(' + COMMAND + ')`', line)]
        i += 1
    return found


def variants(path, seen=()):
    """The variants `path` and the files it extends define."""
    with open(path, 'rb') as f:
        data = tomllib.load(f)
    names = set(data.get('variants', {}))
    bases = data.get('extends', [])
    for base in [bases] if isinstance(bases, str) else bases:
        for where in (os.path.dirname(path), 'experiments'):
            p = os.path.normpath(os.path.join(where, base))
            if os.path.exists(p) and p not in seen:
                names |= variants(p, seen + (p,))
                break
    return names


def main():
    htm, root = sys.argv[1], sys.argv[2]
    os.chdir(root)
    listing = subprocess.run([htm, '--help'], capture_output=True, text=True).stdout
    known = set(re.findall(r'^  ([a-z][a-z-]+) ', listing, re.M))
    if not known:
        sys.exit(f'cannot read the commands from {htm} --help')
    helps = {}

    def options(command):
        if command not in helps:
            p = subprocess.run([htm, command, '--help'], capture_output=True, text=True)
            text = p.stdout + p.stderr
            helps[command] = set(re.findall(r'(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b', text))
        return helps[command]

    pages = ['README.md'] + sorted(glob.glob('docs/**/*.md', recursive=True))
    problems, count = [], 0
    for page in pages:
        for line, text in commands(page):
            count += 1
            text = re.split(r'\s(?:\||>|2>|&&|;)\s?', text)[0].strip()
            if re.search(r'[<>…]|\.\.\.|\$\(|\$[A-Za-z{]', text):
                continue
            try:
                words = shlex.split(text)
            except ValueError:
                continue
            if len(words) < 2:
                continue
            where = f'{page}:{line}: `{text}`'
            command = words[1]
            if command not in known:
                problems.append(f'{where}: no command {command!r}')
                continue
            takes, file = options(command), None
            for k, w in enumerate(words[2:], 2):
                if w.startswith('-') and not re.fullmatch(r'-[\d.e-]+', w):
                    if w.split('=')[0] not in takes:
                        problems.append(f'{where}: htm {command} takes no {w.split("=")[0]}')
                elif w.endswith('.toml') and words[k - 1] != '--set':
                    path = next((p for p in (w, os.path.join('experiments', w)) if os.path.exists(p)), None)
                    if path is None and os.path.basename(w) not in USER_FILES:
                        problems.append(f'{where}: no file {w}')
                    file = file or path
            if file:
                names = variants(file)
                for k, w in enumerate(words[:-1]):
                    if w in ('--variant', '-v') and words[k + 1] not in names:
                        problems.append(f'{where}: {file} has no variant {words[k + 1]!r}')
    for p in problems:
        print(p)
    print(f'{count} htm commands in {len(pages)} pages; {len(problems)} problem(s)')
    sys.exit(1 if problems else 0)


if __name__ == '__main__':
    main()
