/* test_escape.c: each format's escaping of hostile text (quotes, backslashes, comment ends, trigraphs,
 * control characters, bytes that are not UTF-8), what it keeps as it is, cutting at a whole character,
 * and the plain-name check. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "escape.h"

static const char *hostile = "a\"b\\c*/d/*e?\?/f\ng\x1b[31mh\xff<&>'\xe2\x80\xaei\xc3\xa9";

static void expect(EscFormat format, const char *text, const char *want) {
  char out[ESCAPED_SIZE(64)];
  escape(format, text, out, sizeof out);
  CHECK(strcmp(out, want) == 0, "format %d: got [%s], want [%s]", (int)format, out, want);
}

static void test_c_string(void) {
  expect(ESC_C_STRING, hostile,
         "\"a\\\"b\\\\c*/d/*e\\?\\?/f\\012g\\033[31mh\\377<&>'\\342\\200\\256i\\303\\251\"");
  expect(ESC_C_STRING, "", "\"\"");
}

static void test_c_comment(void) {
  expect(ESC_C_COMMENT, hostile, "a\"b\\c\\052/d\\057*e\\077?/f\\012g\\033[31mh\\377<&>'\\342\\200\\256i\\303\\251");
  expect(ESC_C_COMMENT, "models/tiny.lua:12", "models/tiny.lua:12");
}

static void test_json(void) {
  expect(ESC_JSON, hostile, "\"a\\\"b\\\\c*/d/*e?\?/f\\ng\\u001b[31mh\\ufffd<&>'\xe2\x80\xaei\xc3\xa9\"");
  expect(ESC_JSON, "\x7f\xc0\x80\xed\xa0\x80", "\"\\u007f\\ufffd\\ufffd\\ufffd\\ufffd\\ufffd\"");
}

static void test_xml(void) {
  expect(ESC_XML, hostile, "a&quot;b\\c*/d/*e?\?/f\\ng\\x1b[31mh\\xff&lt;&amp;&gt;&#39;\\u202ei\xc3\xa9");
}

static void test_dot(void) {
  expect(ESC_DOT, hostile, "a\\\"b\\\\c*/d/*e?\?/f\\\\ng\\\\x1b[31mh\\\\xff<&>'\\\\u202ei\xc3\xa9");
}

static void test_text(void) {
  expect(ESC_TEXT, hostile, "a\"b\\c*/d/*e?\?/f\\ng\\x1b[31mh\\xff<&>'\\u202ei\xc3\xa9");
  expect(ESC_TEXT, "tp 2 × pp 2 … ok", "tp 2 × pp 2 … ok");
  expect(ESC_TEXT, "\xc2\x85\t", "\\u0085\\t");
}

/* A buffer too small: cut before a whole escape, the closing quote and the NUL kept. */
static void test_cut(void) {
  char out[8];
  escape(ESC_JSON, "ab\ncd", out, sizeof out);
  CHECK(strcmp(out, "\"ab\\nc\"") == 0, "json cut: [%s]", out);
  escape(ESC_C_STRING, "abc\x01", out, sizeof out);
  CHECK(strcmp(out, "\"abc\"") == 0, "c cut: [%s]", out);
  escape(ESC_TEXT, "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", out, sizeof out);
  CHECK(strcmp(out, "\xc3\xa9\xc3\xa9\xc3\xa9") == 0, "text cut: [%s]", out);
}

static void test_write(void) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  escape_write(ESC_JSON, "a\"\n", f);
  fclose(f);
  CHECK(strcmp(text, "\"a\\\"\\n\"") == 0, "written: [%s]", text);
  free(text);
}

static void test_utf8(void) {
  CHECK(escape_is_utf8("plain ascii") && escape_is_utf8("caf\xc3\xa9 \xe2\x80\xa6"), "UTF-8 refused");
  CHECK(!escape_is_utf8("caf\xe9") && !escape_is_utf8("\xc3") && !escape_is_utf8("\xed\xa0\x80"), "not UTF-8 taken");
}

static void test_plain_names(void) {
  const char *plain[] = {"tiny", "attn.q.weight", "layers-2_x", "A9", NULL};
  const char *refused[] = {"", "a b", "a\"b", "a/b", "a*b", "x\n", "é", "a;b", "0123456789abcdef0", NULL};
  for (int i = 0; plain[i]; i++) CHECK(escape_plain_name(plain[i], 16), "'%s' refused", plain[i]);
  for (int i = 0; refused[i]; i++) CHECK(!escape_plain_name(refused[i], 16), "'%s' taken", refused[i]);
}

int main(void) {
  RUN(test_c_string);
  RUN(test_c_comment);
  RUN(test_json);
  RUN(test_xml);
  RUN(test_dot);
  RUN(test_text);
  RUN(test_cut);
  RUN(test_write);
  RUN(test_utf8);
  RUN(test_plain_names);
  TEST_EXIT();
}
