/* memres - CUDA memory resources
 * memres-printable.h: user input made fit to quote in a message. Needs only GLib: the memres
 * command compiles printable.c too (the function is internal to libmemres). */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* The most bytes of one piece of user input (a spec, a kind name, an option value) that an
 * error message shows. */
#define MEMRES_INPUT_SHOWN_MAX 64

char *_memres_printable (const char *text, gsize max_bytes);

/* _memres_printable() of one piece of user input: what error messages quote. */
#define _memres_show_input(text) _memres_printable ((text), MEMRES_INPUT_SHOWN_MAX)

G_END_DECLS
