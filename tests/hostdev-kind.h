/* hostdev-kind.h: "hostdev", a kind the allocator's test programs register in themselves
 * (hostdev-kind.c): host memory flagged device-accessible, the suite core's stand-in for device
 * memory without a driver. */
#pragma once

#include <glib.h>

G_BEGIN_DECLS

/* Registers "hostdev"; aborts on failure. */
void hostdev_register (void);

G_END_DECLS
