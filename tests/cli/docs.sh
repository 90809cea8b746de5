# docs.sh: README.md is a user's page (under 400 lines) and docs/ holds the rest; neither speaks of
# how the project was made (issue numbers, work stops), and every relative link in them, anchors
# included, leads somewhere. The GPU check's reports (docs/gpu-check-*.md) are records, read as
# such.
. "$(dirname "$0")/lib.sh"
cd "$PLAIT_ROOT" || exit 1
lines=$(wc -l <README.md)
if [ "$lines" -lt 400 ]; then pass "readme_short ($lines lines)"
else fail readme_short "README.md has $lines lines; move detail to docs/"; fi
python3 - README.md docs/*.md <<'PY'
import os, re, sys
WORDS = re.compile(r'\b[Ii]ssue[- ]#?[0-9]+'
                   r'|\b(this|the|that|last|latest|previous|next|each|a) stops?\b|\bstop [0-9]+')
LINK = re.compile(r'\]\(([^)\s]+)\)')
def slug(title):
    title = re.sub(r'[`*_]', '', title.strip().lower())
    return re.sub(r'[^\w\- ]', '', title).replace(' ', '-')
def anchors(path):
    with open(path, encoding='utf-8') as f:
        return {slug(l.lstrip('#')) for l in f if l.startswith('#')}
bad = 0
for path in sys.argv[1:]:
    if os.path.basename(path).startswith('gpu-check-'):
        continue
    text = open(path, encoding='utf-8').read()
    for n, line in enumerate(text.split('\n'), 1):
        m = WORDS.search(line)
        if m:
            bad += 1; print(f'FAIL docs_speak_of_plait {path}:{n}: "{m.group(0)}"')
    for target in LINK.findall(text):
        if re.match(r'[a-z]+:', target):
            continue
        file, _, anchor = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            bad += 1; print(f'FAIL docs_links {path}: {target} leads nowhere')
        elif anchor and dest.endswith('.md') and anchor not in anchors(dest):
            bad += 1; print(f'FAIL docs_links {path}: {target}: no heading #{anchor} in {dest}')
if not bad:
    print(f'PASS docs_speak_of_plait_and_links ({len(sys.argv) - 1} files)')
PY
