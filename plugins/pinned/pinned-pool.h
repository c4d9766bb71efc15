/* memres - CUDA memory resources
 * pinned-pool.h: pool mode of the pinned kind: a driver memory pool located on the host, set
 * up through the shared pool code (plugins/pool). Internal to the pinned plugin. */
#pragma once

#include "pinned-config.h"
#include "pool.h"

G_BEGIN_DECLS

gboolean pinned_pool_init (MemresPool *pool, const PinnedConfig *config, GError **error);

G_END_DECLS
