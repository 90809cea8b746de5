/* lua_patterns.c: the bound: Lua's matcher tries the pattern's items left to right,
 * backtracking; an item repeated with '*', '+' or '-' is tried at each length it can take (at
 * most the longest run of subject characters its class matches, plus one), '?' twice, so the
 * items after it are visited that many times more; a balance '%b' or a back-reference scans up
 * to the whole subject on each visit. The sum over items of visits times work, times the
 * starting positions tried, bounds the steps. The longest runs are measured on the subject only
 * when the bound with whole-subject runs is past the limit. */
#include "front/lua_patterns.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>

typedef struct {
  size_t end;            /* where the next item begins */
  /* 'c' a class; '(' or ')'; 'b' %bxy; 'f' %f[set]; 'r' %1-%9; '$' the end */
  char kind;
  char repeat;           /* of a class: '*', '+', '-', '?' or 0 */
  size_t class_at, class_end;
} Item;

/* Past the class at pattern[i]: '%x', a '[set]' (whose first member, and a member after '%', may be
 * ']'), or one character; plen where the pattern ends first (Lua then refuses it). */
static size_t class_end(const char *p, size_t plen, size_t i) {
  char c = p[i++];
  if (c == '%') return i < plen ? i + 1 : plen;
  if (c != '[') return i;
  if (i < plen && p[i] == '^') i++;
  for (;;) {
    if (i >= plen) return plen;
    if (p[i++] == '%' && i < plen) i++;
    if (i < plen && p[i] == ']') return i + 1;
  }
}

static Item next_item(const char *p, size_t plen, size_t i) {
  Item it = {.end = i + 1, .kind = p[i]};
  bool escape = p[i] == '%' && i + 1 < plen;
  if (p[i] == '(' || p[i] == ')') {
    if (p[i] == '(' && i + 1 < plen && p[i + 1] == ')') it.end = i + 2;
  } else if (p[i] == '$' && i + 1 == plen) {
  } else if (escape && p[i + 1] == 'b') {
    it.kind = 'b', it.end = i + 4 < plen ? i + 4 : plen;
  } else if (escape && p[i + 1] == 'f') {
    it.kind = 'f', it.end = i + 2 < plen ? class_end(p, plen, i + 2) : plen;
  } else if (escape && isdigit((unsigned char)p[i + 1])) {
    it.kind = 'r', it.end = i + 2;
  } else {
    it.kind = 'c', it.class_at = i, it.class_end = class_end(p, plen, i);
    it.end = it.class_end;
    if (it.end < plen && strchr("*+-?", p[it.end])) it.repeat = p[it.end++];
  }
  return it;
}

/* Whether character c is of the class named by letter ('a' letters, 'A' all but letters, ...);
 * another character after '%' stands for itself. */
static bool in_named_class(int c, int letter) {
  int yes;
  switch (tolower(letter)) {
  case 'a': yes = isalpha(c); break;
  case 'c': yes = iscntrl(c); break;
  case 'd': yes = isdigit(c); break;
  case 'g': yes = isgraph(c); break;
  case 'l': yes = islower(c); break;
  case 'p': yes = ispunct(c); break;
  case 's': yes = isspace(c); break;
  case 'u': yes = isupper(c); break;
  case 'w': yes = isalnum(c); break;
  case 'x': yes = isxdigit(c); break;
  default: return c == letter;
  }
  return isupper(letter) ? !yes : yes != 0;
}

/* The members of the set p[at] = '[' ... p[end - 1] = ']': characters, ranges a-z and named
 * classes. */
static void set_members(const char *p, size_t at, size_t end, bool member[256]) {
  size_t close = end - 1, i = at + 1;
  bool negated = p[i] == '^' && i < close;
  if (negated) i++;
  while (i < close) {
    unsigned char a = (unsigned char)p[i];
    if (a == '%' && i + 1 < close) {
      for (int c = 0; c < 256; c++) member[c] |= in_named_class(c, (unsigned char)p[i + 1]);
      i += 2;
    } else if (i + 2 < close && p[i + 1] == '-') {
      for (int c = a; c <= (unsigned char)p[i + 2]; c++) member[c] = true;
      i += 3;
    } else {
      member[a] = true;
      i++;
    }
  }
  if (negated)
    for (int c = 0; c < 256; c++) member[c] = !member[c];
}

/* The longest run of subject characters that item's class matches. */
static size_t longest_run(const char *subject, size_t n, const char *p, const Item *it) {
  bool member[256] = {false};
  unsigned char first = (unsigned char)p[it->class_at];
  if (first == '.') return n;
  if (first == '[' && it->class_end - it->class_at >= 3)
    set_members(p, it->class_at, it->class_end, member);
  else if (first == '%' && it->class_end - it->class_at == 2)
    for (int c = 0; c < 256; c++) member[c] = in_named_class(c, (unsigned char)p[it->class_at + 1]);
  else member[first] = true;
  size_t longest = 0, run = 0;
  for (size_t i = 0; i < n; i++) {
    run = member[(unsigned char)subject[i]] ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  return longest;
}

/* The bound on one try of the items from `start`; runs measured on the subject when `measure`. */
static double one_try(const char *subject, size_t n, const char *p, size_t plen, size_t start,
                      bool measure, double limit) {
  double visits = 1, total = 0;
  for (size_t i = start; i < plen && total <= limit;) {
    Item it = next_item(p, plen, i);
    if (it.kind == 'c' && it.repeat && it.repeat != '?') {
      double lengths = (double)(measure ? longest_run(subject, n, p, &it) : n) + 1;
      total += visits * lengths;
      visits *= lengths;
    } else if (it.kind == 'c' && it.repeat == '?') {
      total += visits;
      visits *= 2;
    } else {
      total += visits * (it.kind == 'b' || it.kind == 'r' ? (double)n + 1 : 1);
    }
    i = it.end;
  }
  return total + visits;
}

static size_t repeated_items(const char *p, size_t plen) {
  size_t count = 0;
  for (size_t i = 0; i < plen;) {
    Item it = next_item(p, plen, i);
    count += it.kind == 'c' && it.repeat && it.repeat != '?';
    i = it.end;
  }
  return count;
}

double pattern_steps(const char *subject, size_t n, const char *pattern, size_t plen,
                     PatternUse use, double limit) {
  bool anchored = use != PATTERN_ITERATE && plen > 0 && pattern[0] == '^';
  size_t start = anchored ? 1 : 0;
  double tries = anchored ? 1 : (double)(n + 1) * (use == PATTERN_ONCE ? 1 : 2);
  double rough = tries * one_try(subject, n, pattern, plen, start, false, limit);
  if (rough <= limit) return rough;
  double measuring = (double)repeated_items(pattern, plen) * (double)n;
  if (measuring > limit) return rough;
  return measuring + tries * one_try(subject, n, pattern, plen, start, true, limit);
}
