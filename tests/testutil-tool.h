/* testutil-tool.h: running the `memres` command for the tool tests (testutil-tool.c). */
#ifndef TESTUTIL_TOOL_H
#define TESTUTIL_TOOL_H

#include "testutil.h"

typedef struct
{
  int status; /* exit status */
  char *out;
  char *err;
} Run;

void run_clear (Run *r);

void run_toolv (Run *r, const char *const *env, const char *const *args);

void run_tool (Run *r, ...);

void assert_one_error_line (const Run *r);

void assert_one_json_document (const char *out);

void run_tool_stdout (Run *r, int out_fd, ...);

#endif
