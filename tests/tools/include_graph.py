#!/usr/bin/env python3
"""include_graph.py: holds a source file at the top of its folder's include graph.

  include_graph.py DIR FILE.c   FILE.c's header is included by DIR's entry point alone (the .c
                                file beside FILE.c that defines main()), and no chain of
                                includes leads from FILE.c back to it

The graph: the modules of the .c, .h, .cu and .cuh files under DIR (X.c, X.cu, X.h and X.cuh
are module X), with an edge from a module to each other module whose header one of its files
includes with #include "...": the includer calls into the module or reads its types. Prints
each file that includes the header against the rule and the shortest cycle through FILE.c's
module, as a chain of module names; exits 1 when there is any, else 0.
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = ('.c', '.h', '.cu', '.cuh')
MAIN = re.compile(r'^\s*int\s+main\s*\(', re.M)


def read_folder(root):
    """Every source file under root: its path relative to root and its text."""
    files = {}
    for folder, _, names in os.walk(root):
        for name in names:
            if name.endswith(SOURCES):
                path = os.path.join(folder, name)
                with open(path, encoding='utf-8') as f:
                    files[os.path.relpath(path, root)] = f.read()
    return files


def module_of(path):
    """A file's module: X.c, X.cu, X.h and X.cuh are one, named X."""
    return os.path.splitext(os.path.basename(path))[0]


def edges(files):
    """Each module's successors: the modules whose headers any of its files includes."""
    headers = {os.path.basename(p) for p in files if p.endswith(('.h', '.cuh'))}
    graph = {module_of(p): set() for p in files}
    for path, text in files.items():
        for inc in INCLUDE.findall(text):
            name = os.path.basename(inc)
            if name in headers and module_of(name) != module_of(path):
                graph[module_of(path)].add(module_of(name))
    return {m: sorted(succ) for m, succ in graph.items()}


def chain_to(parent, node):
    """The modules from the search's start to node, by each one's parent."""
    chain = [node]
    while chain[-1] in parent:
        chain.append(parent[chain[-1]])
    return chain[::-1]


def cycle_through(graph, start):
    """The shortest chain of modules from start back to start, or None (breadth first)."""
    parent, frontier = {}, [start]
    while frontier:
        following = []
        for node in frontier:
            for succ in graph[node]:
                if succ == start:
                    return chain_to(parent, node) + [start]
                if succ not in parent:
                    parent[succ] = node
                    following.append(succ)
        frontier = following
    return None


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    root, top = sys.argv[1], sys.argv[2]
    files = read_folder(root)
    if top not in files:
        sys.exit(f'{top} is not under {root}')
    header = os.path.splitext(os.path.basename(top))[0] + '.h'
    entries = [p for p, text in files.items()
               if p.endswith('.c') and os.path.dirname(p) == os.path.dirname(top)
               and MAIN.search(text)]
    if len(entries) != 1:
        sys.exit(f'{root}: {len(entries)} .c files beside {top} define main(), not one: {entries}')
    problems = []
    for path, text in sorted(files.items()):
        named = [os.path.basename(inc) for inc in INCLUDE.findall(text)]
        if header in named and path not in (entries[0], top):
            problems.append(f'{path} includes {header}; only {entries[0]} may')
    chain = cycle_through(edges(files), module_of(top))
    if chain:
        problems.append('cycle: ' + ' -> '.join(chain) + ' (each includes the next one\'s header)')
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == '__main__':
    sys.exit(main())
