/* memres - CUDA memory resources
 * memres-sleep.h: sleep and wake: the physical memory under every buffer of a tag released while
 * their virtual addresses stay reserved, and created again at the same addresses later, the
 * contents discarded, kept in page-locked host memory or in a file. Full documentation: the
 * reference (share/gtk-doc/html/memres), memres-sleep, and docs/sleep.md. All Since: 2.0. */
#pragma once

#if !defined(MEMRES_INSIDE) && !defined(MEMRES_COMPILATION)
#error "Only <memres/memres.h> or <memres/memres-plugin.h> can be included directly."
#endif

#include <memres/memres-types.h>

G_BEGIN_DECLS

/**
 * SECTION:memres-sleep
 * @title: Sleep and wake
 * @short_description: freeing the memory of a tag's buffers while their addresses stay reserved
 * @section_id: memres-memres-sleep
 *
 * memres_resource_sleep() releases the physical memory under every buffer of a tag (memres-tags)
 * of a resource while their virtual addresses stay reserved; memres_resource_wake() creates it
 * again at the same addresses, so that pointers held elsewhere (a CUDA graph, a model's tensors)
 * stay valid. A #MemresSleepPolicy says what happens to the contents meanwhile
 * (#MemresSleepMode): discarded, kept in page-locked host memory, or written to a file.
 *
 * |[<!-- language="C" -->
 * g_autoptr (MemresSleepPolicy) policy = memres_sleep_policy_new (MEMRES_SLEEP_BACKUP, &error);
 *
 * if (!memres_resource_sleep (mr, "weights", policy, stream, &error))
 *   return FALSE;
 * // ... the memory is free for something else ...
 * if (!memres_resource_wake (mr, "weights", stream, &error))
 *   return FALSE;
 * ]|
 *
 * While a buffer sleeps only closing it and its getters are allowed; other operations fail in
 * the %MEMRES_SLEEP_ERROR domain (#MemresSleepError). Kinds that cannot sleep answer
 * %MEMRES_ERROR_NOT_SUPPORTED. Thread-safe. See also docs/sleep.md in the source tree.
 */

/**
 * MEMRES_SLEEP_ERROR:
 *
 * Error domain of sleep and wake, and of what a sleeping buffer or tag refuses. Codes are
 * #MemresSleepError values.
 *
 * Since: 2.0
 */
#define MEMRES_SLEEP_ERROR (memres_sleep_error_quark ())

/**
 * MemresSleepError:
 * @MEMRES_SLEEP_ERROR_ASLEEP: an operation on a sleeping buffer (copy, fill, read, write,
 *   export, resize): only closing it (and the getters) is allowed while it sleeps
 * @MEMRES_SLEEP_ERROR_TAG_ASLEEP: an allocation under a tag that is asleep (or being put to
 *   sleep or woken) on that resource
 * @MEMRES_SLEEP_ERROR_ALREADY_ASLEEP: memres_resource_sleep() of a tag that sleeps already on
 *   that resource
 * @MEMRES_SLEEP_ERROR_NOT_ASLEEP: memres_resource_wake() of a tag that does not sleep there
 * @MEMRES_SLEEP_ERROR_SHARED: a buffer of the tag is exported to another process (IPC): it
 *   cannot be put to sleep (the message names it); nothing was put to sleep
 * @MEMRES_SLEEP_ERROR_FILE: the file of the %MEMRES_SLEEP_FILE policy could not be written
 *   (sleep: nothing was put to sleep) or read back whole (wake: everything still sleeps); or it
 *   is not a regular file (a FIFO, a device such as /dev/null, a directory) or holds the
 *   contents of another sleep until its wake (sleep: refused, the file untouched); the message
 *   names the file and the reason, and for an error of the system (a call on the file that
 *   failed, the lock another sleep holds) its errno: "REASON (errno N)", as g_strerror() and
 *   errno give them
 * @MEMRES_SLEEP_ERROR_BUSY: another thread is putting the same tag of the same resource to
 *   sleep or waking it; or memres_buffer_close() of a buffer of a tag from a segment event
 *   callback inside the sleep or wake of that tag, on the same thread (the buffer stays open)
 *
 * The errors of sleep and wake. Kinds that cannot sleep answer %MEMRES_ERROR_NOT_SUPPORTED,
 * and driver failures are %MEMRES_CUDA_ERROR (or %MEMRES_ERROR_OUT_OF_MEMORY) with a message
 * that names the step. Values are only appended.
 *
 * Since: 2.0
 */
typedef enum
{
  MEMRES_SLEEP_ERROR_ASLEEP,
  MEMRES_SLEEP_ERROR_TAG_ASLEEP,
  MEMRES_SLEEP_ERROR_ALREADY_ASLEEP,
  MEMRES_SLEEP_ERROR_NOT_ASLEEP,
  MEMRES_SLEEP_ERROR_SHARED,
  MEMRES_SLEEP_ERROR_FILE,
  MEMRES_SLEEP_ERROR_BUSY,
} MemresSleepError;

GQuark memres_sleep_error_quark (void);

/**
 * MemresSleepMode:
 * @MEMRES_SLEEP_DISCARD: the contents are undefined after wake (a KV cache); the default: a
 *   %NULL policy given to memres_resource_sleep() is this mode
 * @MEMRES_SLEEP_BACKUP: copied into page-locked host memory at sleep and back at wake
 * @MEMRES_SLEEP_FILE: written to a file the application names at sleep, read back at wake
 *
 * What happens to the contents of the buffers put to sleep. Values are only appended.
 *
 * Since: 2.0
 */
typedef enum
{
  MEMRES_SLEEP_DISCARD,
  MEMRES_SLEEP_BACKUP,
  MEMRES_SLEEP_FILE,
} MemresSleepMode;

/**
 * MemresSleepPolicy:
 *
 * What memres_resource_sleep() does with the contents: a #MemresSleepMode and what it needs
 * (the file's path, the host resource of backups, their restore batch). Reference counted;
 * immutable once given to memres_resource_sleep() (it keeps a reference until the wake).
 *
 * Since: 2.0
 */
typedef struct _MemresSleepPolicy MemresSleepPolicy;

MemresSleepPolicy *memres_sleep_policy_new (MemresSleepMode mode, GError **error);
MemresSleepPolicy *memres_sleep_policy_ref (MemresSleepPolicy *policy);
void memres_sleep_policy_unref (MemresSleepPolicy *policy);
G_DEFINE_AUTOPTR_CLEANUP_FUNC (MemresSleepPolicy, memres_sleep_policy_unref)
MemresSleepMode memres_sleep_policy_get_mode (const MemresSleepPolicy *policy);
gboolean memres_sleep_policy_set_path (MemresSleepPolicy *policy, const char *path, GError **error);
gboolean memres_sleep_policy_set_host_resource (MemresSleepPolicy *policy, MemresResource *host_mr,
                                                GError **error);
gboolean memres_sleep_policy_set_restore_batch (MemresSleepPolicy *policy, gsize bytes,
                                                GError **error);

gboolean memres_resource_sleep (MemresResource *mr, const char *tag, MemresSleepPolicy *policy,
                                MemresStream stream, GError **error);
gboolean memres_resource_wake (MemresResource *mr, const char *tag, MemresStream stream,
                               GError **error);
gboolean memres_resource_is_asleep (MemresResource *mr, const char *tag);
gboolean memres_buffer_is_asleep (MemresBuffer *buf);

G_END_DECLS
