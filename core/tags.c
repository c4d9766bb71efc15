/* memres - CUDA memory resources
 * tags.c: tags (memres-tags.h, docs/tags.md): the names interned once each, with a small id; each
 * thread's scope stack (push, pop, the scope guard), whose innermost id the allocate hot path
 * reads from the thread's block (MemresThread.tag_scope, hot-path.h); the defaults of devices and
 * streams, read without a lock; a buffer's tag. The counts per tag are counting.h's and
 * counting.c's. */
#include "memres-private.h"

#include <string.h>

guint _memres_tag_defaults;

// clang-format off
/**
 * memres_tag_error_quark:
 *
 * The quark of the %MEMRES_TAG_ERROR domain (codes: #MemresTagError). Thread-safe.
 *
 * Returns: the quark
 *
 * Since: 2.0
 */
G_DEFINE_QUARK (memres-tag-error-quark, memres_tag_error)
// clang-format on

/* The interned names: entry i is tag id i (1 to MEMRES_TAGS_MAX). An entry is written once,
 * under @tags_lock, before @n_tags (read with acquire) counts it; it is never changed or freed
 * after, so readers need no lock. */
typedef struct _MemresTagScope
{
  char name[MEMRES_TAG_NAME_MAX + 1];
} TagEntry;

static TagEntry entries[MEMRES_TAGS_MAX + 1];
static guint n_tags;
static GMutex tags_lock; /* writers of the entries and of the defaults */
/* the record of an adaptor's upstream call for memory of one tag (tags.h: MemresTagRecord) */
static __thread MemresTagRecord tag_record;

void
_memres_tags_fork (MemresResource *unused, MemresForkPhase phase)
{
  memres_fork_mutex (&tags_lock, phase);
}

guint
_memres_tag_count (void)
{
  return __atomic_load_n (&n_tags, __ATOMIC_ACQUIRE);
}

const char *
_memres_tag_name (guint id)
{
  return id == 0 || id > _memres_tag_count () ? NULL : entries[id].name;
}

/**
 * memres_tag_check_name:
 * @tag: (nullable): a name
 * @error: return location for a #GError, or %NULL
 *
 * Whether @tag can be a tag: 1 to %MEMRES_TAG_NAME_MAX bytes of valid UTF-8 without a control
 * character. Interns nothing. Thread-safe.
 *
 * Errors: %MEMRES_TAG_ERROR_INVALID (a %NULL @tag too), naming the problem.
 *
 * Returns: %TRUE when it can
 *
 * Since: 2.0
 */
gboolean
memres_tag_check_name (const char *tag, GError **error)
{
  gsize len;

  if (tag == NULL || tag[0] == '\0')
    {
      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID, "a tag cannot be empty");
      return FALSE;
    }
  len = strnlen (tag, MEMRES_TAG_NAME_MAX + 1);
  if (len > MEMRES_TAG_NAME_MAX)
    {
      g_autofree char *shown = _memres_show_input (tag);

      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID,
                   "tag \"%s\" is longer than %d bytes", shown, MEMRES_TAG_NAME_MAX);
      return FALSE;
    }
  if (!g_utf8_validate (tag, (gssize) len, NULL))
    {
      g_autofree char *shown = _memres_show_input (tag);

      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID,
                   "tag \"%s\" is not valid UTF-8", shown);
      return FALSE;
    }
  for (gsize i = 0; i < len; i++)
    if ((guchar) tag[i] < 0x20 || tag[i] == 0x7f)
      {
        g_autofree char *shown = _memres_show_input (tag);

        g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID,
                     "tag \"%s\" has a control character", shown);
        return FALSE;
      }
  return TRUE;
}

static guint
find_interned (const char *name, guint n)
{
  for (guint i = 1; i <= n; i++)
    if (strcmp (entries[i].name, name) == 0)
      return i;
  return 0;
}

guint
_memres_tag_find (const char *name, GError **error)
{
  guint id;

  if (!memres_tag_check_name (name, error))
    return 0;
  id = find_interned (name, _memres_tag_count ());
  if (id == 0)
    {
      g_autofree char *shown = _memres_show_input (name);

      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_UNKNOWN,
                   "no allocation was ever tagged \"%s\"", shown);
    }
  return id;
}

/* The id of @name, interned at its first use; 0 with an error. */
static guint
intern (const char *name, GError **error)
{
  guint id, n;

  if (!memres_tag_check_name (name, error))
    return 0;
  id = find_interned (name, _memres_tag_count ());
  if (id != 0)
    return id;
  _memres_fork_add_part (MEMRES_FORK_TAGS, _memres_tags_fork);
  g_mutex_lock (&tags_lock);
  n = n_tags;
  id = find_interned (name, n);
  if (id == 0 && n < MEMRES_TAGS_MAX)
    {
      id = n + 1;
      strcpy (entries[id].name, name);
      __atomic_store_n (&n_tags, id, __ATOMIC_RELEASE);
    }
  g_mutex_unlock (&tags_lock);
  if (id == 0)
    {
      g_autofree char *shown = _memres_show_input (name);

      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_TOO_MANY,
                   "cannot make tag \"%s\": the process has %d tags already, the most it can have",
                   shown, MEMRES_TAGS_MAX);
    }
  return id;
}

/**
 * memres_tag_list:
 *
 * Every tag the process has used, in the order of their first use. Thread-safe.
 *
 * Returns: (transfer full): a %NULL-terminated array of names (empty when none); free it with
 *   `g_strfreev`
 *
 * Since: 2.0
 */
GStrv
memres_tag_list (void)
{
  guint n = _memres_tag_count ();
  GStrv names = g_new0 (char *, n + 1);

  for (guint i = 1; i <= n; i++)
    names[i - 1] = g_strdup (entries[i].name);
  return names;
}

/* The scope stack of a thread, made at its first push, freed at its exit. */
typedef struct
{
  guint depth;
  guint8 ids[MEMRES_TAG_DEPTH_MAX];
} TagStack;

static GPrivate thread_stack = G_PRIVATE_INIT (g_free);

static TagStack *
stack_get (gboolean create)
{
  TagStack *stack = g_private_get (&thread_stack);

  if (stack == NULL && create)
    {
      stack = g_new0 (TagStack, 1);
      g_private_set (&thread_stack, stack);
    }
  return stack;
}

G_STATIC_ASSERT (MEMRES_TAGS_MAX <= G_MAXUINT8);

/**
 * memres_tag_push:
 * @tag: the tag: 1 to %MEMRES_TAG_NAME_MAX bytes of UTF-8, no control character; interned at
 *   its first use (the name is copied)
 * @error: return location for a #GError, or %NULL
 *
 * Makes @tag the calling thread's innermost tag: every buffer the thread allocates from now until
 * the matching memres_tag_pop() carries it (memres_buffer_get_tag()) and is counted under it in
 * the counted layers it goes through (memres_resource_get_tag_counts()). Tags nest: the innermost
 * one alone is the allocation's, matched by exact name (a tag "a/b" is no part of "a"). A thread's
 * scope wins over the defaults of streams and devices (memres_tag_set_stream_default()). Pushing
 * the tag that is innermost already is allowed (each push wants its pop). The scope is the
 * thread's own: other threads do not see it. No driver call; thread-safe; no lock but at a name's
 * first use.
 *
 * Errors: %MEMRES_TAG_ERROR_INVALID (see memres_tag_check_name()), %MEMRES_TAG_ERROR_TOO_MANY (a
 * new name when %MEMRES_TAGS_MAX tags exist), %MEMRES_TAG_ERROR_TOO_DEEP (the stack holds
 * %MEMRES_TAG_DEPTH_MAX tags); the stack is unchanged then.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_tag_push (const char *tag, GError **error)
{
  TagStack *stack;
  guint id = intern (tag, error);

  if (id == 0)
    return FALSE;
  stack = stack_get (TRUE);
  if (stack->depth == MEMRES_TAG_DEPTH_MAX)
    {
      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_TOO_DEEP,
                   "cannot push tag \"%s\": the thread's scope stack holds %d tags already", tag,
                   MEMRES_TAG_DEPTH_MAX);
      return FALSE;
    }
  stack->ids[stack->depth++] = (guint8) id;
  _memres_thread.tag_scope = id;
  return TRUE;
}

/**
 * memres_tag_pop:
 * @tag: (nullable): the innermost tag, as a check; %NULL pops whichever it is
 * @error: return location for a #GError, or %NULL
 *
 * Ends the calling thread's innermost tag scope: the tag pushed before it (or none) is the
 * thread's again. No driver call; thread-safe (the stack is the thread's).
 *
 * Errors: %MEMRES_TAG_ERROR_EMPTY (the thread's stack is empty), %MEMRES_TAG_ERROR_MISMATCH (@tag
 * is not the innermost tag), %MEMRES_TAG_ERROR_INVALID (@tag cannot be a tag); the stack is
 * unchanged then.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_tag_pop (const char *tag, GError **error)
{
  TagStack *stack = stack_get (FALSE);
  guint top;

  if (tag != NULL && !memres_tag_check_name (tag, error))
    return FALSE;
  if (stack == NULL || stack->depth == 0)
    {
      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_EMPTY,
                   "cannot pop a tag: the thread's scope stack is empty");
      return FALSE;
    }
  top = stack->ids[stack->depth - 1];
  if (tag != NULL && strcmp (entries[top].name, tag) != 0)
    {
      g_autofree char *shown = _memres_show_input (tag);

      g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_MISMATCH,
                   "cannot pop tag \"%s\": the innermost tag is \"%s\"", shown, entries[top].name);
      return FALSE;
    }
  stack->depth--;
  _memres_thread.tag_scope = stack->depth > 0 ? stack->ids[stack->depth - 1] : 0;
  return TRUE;
}

/**
 * memres_tag_get_current:
 *
 * The tag that allocations of the calling thread carry now, from its scope stack
 * (memres_tag_push(), memres_tag_scope_begin()). Reads thread-local state only: thread-safe, no
 * lock; sets no error.
 *
 * Returns: (transfer none) (nullable): the calling thread's innermost tag (an interned string,
 *   valid for the life of the process), or %NULL when its scope stack is empty (the defaults of
 *   streams and devices are not looked at)
 *
 * Since: 2.0
 */
const char *
memres_tag_get_current (void)
{
  return _memres_tag_name (_memres_thread.tag_scope);
}

/**
 * memres_allocation_get_tag:
 * @alloc: the allocation record a kind's allocate or deallocate slot was given
 *
 * Inside a kind's allocate or deallocate slot: the tag of the buffer that call serves (the tag
 * memres_buffer_get_tag() gives, resolved from the thread's scope, the stream's or the device's
 * default when it was allocated). The core marks a tagged buffer's record for the duration of
 * its slot call only in stacks where a layer asks for tags: a kind with %MEMRES_KIND_TAGGED or
 * %MEMRES_KIND_COUNTED, and the adaptors above it that pass allocations; and in every stack that
 * can sleep (memres-sleep.h), whose kinds place a buffer by its tag (`arena`: a granule serves one
 * tag) and tell a segment's tag (#MemresSegment). An adaptor's record for memory of its own that
 * serves one tag (a chunk of a caching layer) carries that tag for the duration of the upstream
 * call the adaptor makes with memres_upstream_allocate_for_tag() or
 * memres_upstream_deallocate_for_tag(). Elsewhere, outside a slot call, and for any other record
 * (one an adaptor made for an upstream call of its own with memres_upstream_allocate()) it
 * returns %NULL. Reads thread-local words and, for the marked record, the buffer: no lock, no
 * driver call. Thread-safe.
 *
 * Returns: (transfer none) (nullable): the tag (an interned string, valid for the life of the
 *   process), or %NULL when the buffer has none or @alloc is not the record of the call
 *
 * Since: 2.0
 */
const char *
memres_allocation_get_tag (const MemresAllocation *alloc)
{
  guint id;

  if (alloc == NULL)
    return NULL;
  id = _memres_tag_of_call (alloc);
  if (id == 0 && alloc == tag_record.record)
    id = tag_record.id;
  return _memres_tag_name (id);
}

MemresTagRecord
_memres_tag_record_set (MemresTagRecord record)
{
  MemresTagRecord was = tag_record;

  tag_record = record;
  return was;
}

/**
 * memres_tag_scope_begin:
 * @tag: the tag, as memres_tag_push() takes it
 * @error: return location for a #GError, or %NULL
 *
 * memres_tag_push() returning the scope to end: declared
 * `g_autoptr (MemresTagScope) scope = memres_tag_scope_begin ("weights", &error);`, the scope
 * ends (memres_tag_scope_end()) when the variable goes out of scope, however the block is left.
 * Nothing is allocated.
 *
 * Errors: those of memres_tag_push().
 *
 * Returns: (transfer full) (nullable): the scope, or %NULL with @error set (ending %NULL does
 *   nothing)
 *
 * Since: 2.0
 */
MemresTagScope *
memres_tag_scope_begin (const char *tag, GError **error)
{
  if (!memres_tag_push (tag, error))
    return NULL;
  return &entries[_memres_thread.tag_scope];
}

/**
 * memres_tag_scope_end:
 * @scope: (nullable) (transfer full): what memres_tag_scope_begin() returned on this thread
 *
 * Pops the scope's tag. Scopes end in the reverse order of their beginnings; a scope that is not
 * the innermost one (ended out of order, or on another thread) is reported with a critical
 * warning and nothing is popped. %NULL does nothing.
 *
 * Since: 2.0
 */
void
memres_tag_scope_end (MemresTagScope *scope)
{
  g_autoptr (GError) error = NULL;

  if (scope == NULL)
    return;
  if (!memres_tag_pop (scope->name, &error))
    g_critical ("memres_tag_scope_end: %s", error->message);
}

/* The defaults: a device's in @device_defaults[device + 1] (device -1 is host memory), the
 * legacy default stream's (NULL) in @null_stream_default, another stream's in a slot of
 * @stream_slots (stream 0: free); written under tags_lock, read without a lock. */
#define TAG_DEVICES_MAX 64
#define TAG_STREAMS_MAX 256
typedef struct
{
  MemresStream stream;
  guint tag;
} StreamSlot;

static guint device_defaults[TAG_DEVICES_MAX + 1];
static guint null_stream_default;
static StreamSlot stream_slots[TAG_STREAMS_MAX];
static guint stream_slots_used; /* the slots below it may be taken */

guint
_memres_tag_resolve (MemresStream stream, gint device)
{
  guint tag = 0;

  if (stream == NULL)
    tag = __atomic_load_n (&null_stream_default, __ATOMIC_ACQUIRE);
  else
    {
      guint n = __atomic_load_n (&stream_slots_used, __ATOMIC_ACQUIRE);

      for (guint i = 0; i < n; i++)
        if (__atomic_load_n (&stream_slots[i].stream, __ATOMIC_ACQUIRE) == stream)
          {
            tag = __atomic_load_n (&stream_slots[i].tag, __ATOMIC_RELAXED);
            break;
          }
    }
  if (tag == 0 && device >= -1 && device < TAG_DEVICES_MAX)
    tag = __atomic_load_n (&device_defaults[device + 1], __ATOMIC_RELAXED);
  return tag;
}

/* *@slot set to @id (0: cleared), the count of defaults kept; under tags_lock. */
static void
set_default (guint *slot, guint id)
{
  guint old = *slot;

  __atomic_store_n (slot, id, __ATOMIC_RELEASE);
  if (old == 0 && id != 0)
    __atomic_add_fetch (&_memres_tag_defaults, 1, __ATOMIC_RELAXED);
  else if (old != 0 && id == 0)
    __atomic_sub_fetch (&_memres_tag_defaults, 1, __ATOMIC_RELAXED);
}

/**
 * memres_tag_set_device_default:
 * @device: a device ordinal (0 to 63), or -1 for resources of host memory
 * (memres_resource_get_device())
 * @tag: (nullable): the tag, as memres_tag_push() takes it; %NULL clears the default
 * @error: return location for a #GError, or %NULL
 *
 * The tag of the allocations from resources of @device made on a thread whose scope stack is
 * empty and on a stream without a default of its own (memres_tag_set_stream_default()). Which
 * setting wins: the thread's scope, then the stream's default, then the device's (the most
 * specific first: a scope is what the code that allocates said, a stream is a piece of work a
 * framework runs on any thread, a device is the whole process's use of it). Process-wide;
 * thread-safe; while allocations run on other threads, each gets the default as it was before or
 * after the change. No driver call.
 *
 * Errors: %MEMRES_ERROR_INVALID_ARGUMENT (@device below -1 or above 63), those of
 * memres_tag_push() but %MEMRES_TAG_ERROR_TOO_DEEP.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_tag_set_device_default (gint device, const char *tag, GError **error)
{
  guint id = 0;

  if (device < -1 || device >= TAG_DEVICES_MAX)
    {
      g_set_error (error, MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT,
                   "device %d: a tag's default device is -1 (host memory) to %d", device,
                   TAG_DEVICES_MAX - 1);
      return FALSE;
    }
  if (tag != NULL && (id = intern (tag, error)) == 0)
    return FALSE;
  _memres_fork_add_part (MEMRES_FORK_TAGS, _memres_tags_fork);
  g_mutex_lock (&tags_lock);
  set_default (&device_defaults[device + 1], id);
  g_mutex_unlock (&tags_lock);
  return TRUE;
}

/**
 * memres_tag_set_stream_default:
 * @stream: a stream (a `CUstream`; %NULL is the legacy default stream)
 * @tag: (nullable): the tag, as memres_tag_push() takes it; %NULL clears the default
 * @error: return location for a #GError, or %NULL
 *
 * The tag of the allocations on @stream made on a thread whose scope stack is empty: a framework
 * that runs work on threads of its own (PyTorch's backward pass) allocates on the stream the
 * application chose, whichever thread it runs on. A thread's scope wins over it, and it wins
 * over the device's default (see memres_tag_set_device_default() for why). memres keeps the
 * stream as a key only and never calls the driver with it: clear the default before destroying
 * the stream (a new stream that the driver gives the same handle would get it). Process-wide;
 * thread-safe, as memres_tag_set_device_default().
 *
 * Errors: %MEMRES_TAG_ERROR_TOO_MANY (256 streams with a default already, or a new tag when
 * %MEMRES_TAGS_MAX exist), those of memres_tag_push() but %MEMRES_TAG_ERROR_TOO_DEEP.
 *
 * Returns: %TRUE on success
 *
 * Since: 2.0
 */
gboolean
memres_tag_set_stream_default (MemresStream stream, const char *tag, GError **error)
{
  guint id = 0, free_slot = G_MAXUINT, i;
  gboolean ok = TRUE;

  if (tag != NULL && (id = intern (tag, error)) == 0)
    return FALSE;
  _memres_fork_add_part (MEMRES_FORK_TAGS, _memres_tags_fork);
  g_mutex_lock (&tags_lock);
  if (stream == NULL)
    set_default (&null_stream_default, id);
  else
    {
      for (i = 0; i < stream_slots_used; i++)
        {
          if (stream_slots[i].stream == stream)
            break;
          if (stream_slots[i].stream == NULL && free_slot == G_MAXUINT)
            free_slot = i;
        }
      if (i < stream_slots_used)
        {
          set_default (&stream_slots[i].tag, id);
          if (id == 0) /* the slot is free again: its key goes after its tag */
            __atomic_store_n (&stream_slots[i].stream, NULL, __ATOMIC_RELEASE);
        }
      else if (id != 0)
        {
          if (free_slot == G_MAXUINT && stream_slots_used < TAG_STREAMS_MAX)
            free_slot = stream_slots_used;
          if (free_slot == G_MAXUINT)
            {
              g_set_error (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_TOO_MANY,
                           "cannot give stream %p a default tag: %d streams have one already",
                           stream, TAG_STREAMS_MAX);
              ok = FALSE;
            }
          else
            {
              /* the tag before the key: a reader that finds the key finds its tag */
              set_default (&stream_slots[free_slot].tag, id);
              __atomic_store_n (&stream_slots[free_slot].stream, stream, __ATOMIC_RELEASE);
              if (free_slot == stream_slots_used)
                __atomic_store_n (&stream_slots_used, free_slot + 1, __ATOMIC_RELEASE);
            }
        }
    }
  g_mutex_unlock (&tags_lock);
  return ok;
}

/**
 * memres_buffer_get_tag:
 * @buf: a #MemresBuffer
 *
 * The tag the buffer was allocated under: the allocating thread's innermost tag
 * (memres_tag_push()), else its stream's default, else its device's, at the time of
 * memres_resource_allocate(). Buffers wrapped, imported or received from another process carry
 * none.
 *
 * Returns: (transfer none) (nullable): the tag (an interned string, valid for the life of the
 *   process), or %NULL for none or a closed buffer
 *
 * Since: 2.0
 */
const char *
memres_buffer_get_tag (MemresBuffer *buf)
{
  g_return_val_if_fail (buf != NULL, NULL);
  /* (the closed flag read here rather than through buffer.c, which calls tags.c) */
  return __atomic_load_n (&buf->closed, __ATOMIC_SEQ_CST) ? NULL : _memres_tag_name (buf->tag);
}
