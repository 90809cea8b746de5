/* check.h: the unit-test harness: each test is a function; CHECK records a failure with file, line and message. */
#ifndef PLAIT_CHECK_H
#define PLAIT_CHECK_H
#include <stdarg.h>
#include <stdio.h>

typedef struct {
  int failures;        /* failures in the test now running */
  int passed, failed;  /* tests so far */
  const char *name;
} TestRun;

static TestRun test_run;

static void check_fail(const char *file, int line, const char *fmt, ...) {
  va_list ap;
  if (test_run.failures++ == 0) printf("FAIL %s: ", test_run.name);
  else printf("     %s: ", test_run.name);
  printf("%s:%d: ", file, line);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
}

/* CHECK(cond, fmt, ...): a failed condition prints the message (printf style). */
#define CHECK(cond, ...) \
  do { if (!(cond)) check_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)

static void run_test(const char *name, void (*fn)(void)) {
  test_run.name = name;
  test_run.failures = 0;
  fn();
  if (test_run.failures == 0) { printf("PASS %s\n", name); test_run.passed++; }
  else test_run.failed++;
  fflush(stdout);
}

#define RUN(fn) run_test(#fn, fn)
#define TEST_EXIT() return test_run.failed != 0

#endif
