/* memres - CUDA memory resources
 * errors.c: the exceptions of the Python package: memres.Error and the subclasses that also
 * derive from the builtin a Python user catches (MemoryError, ValueError, OSError,
 * RuntimeError, NotImplementedError; ClosedError both ValueError and RuntimeError), each
 * carrying the GError's message, domain and code; and the one function that turns a GError into
 * the right one. */
#include "pymemres.h"

#include <errno.h>
#include <string.h>

static PyObject *error_base;        /* memres.Error */
static PyObject *error_oom;         /* memres.OutOfMemoryError (MemoryError) */
static PyObject *error_invalid;     /* memres.InvalidArgumentError (ValueError) */
static PyObject *error_closed;      /* memres.ClosedError (ValueError, RuntimeError) */
static PyObject *error_file;        /* memres.FileError (OSError) */
static PyObject *error_no_device;   /* memres.NoDeviceError (RuntimeError) */
static PyObject *error_forked;      /* memres.ForkedError (RuntimeError) */
static PyObject *error_unsupported; /* memres.NotSupportedError (NotImplementedError) */
static PyObject *error_range; /* memres.OutOfRangeError (InvalidArgumentError, OverflowError) */

/* memres.NAME, derived from @base (memres.Error where NULL), @builtin and @builtin2 (where not
 * NULL), or from Exception alone (memres.Error itself, @builtin NULL) */
static PyObject *
new_error_of (PyObject *module, const char *name, const char *doc, PyObject *base,
              PyObject *builtin, PyObject *builtin2)
{
  g_autofree char *qualified = g_strconcat ("memres.", name, NULL);
  PyObject *bases = builtin == NULL ? PyTuple_Pack (1, PyExc_Exception)
                    : builtin2 == NULL
                        ? PyTuple_Pack (2, base != NULL ? base : error_base, builtin)
                        : PyTuple_Pack (3, base != NULL ? base : error_base, builtin, builtin2);
  PyObject *cls;

  if (bases == NULL)
    return NULL;
  cls = PyErr_NewExceptionWithDoc (qualified, doc, bases, NULL);
  Py_DECREF (bases);
  if (cls == NULL || PyModule_AddObjectRef (module, name, cls) < 0)
    return NULL;
  return cls;
}

static PyObject *
new_error (PyObject *module, const char *name, const char *doc, PyObject *builtin)
{
  return new_error_of (module, name, doc, NULL, builtin, NULL);
}

/* memres.FileError.__str__: the message, as str() of any memres.Error, where OSError's would say
 * "[Errno N] STRERROR" once errno and strerror are set (BaseException's str() of the one
 * argument, the message). */
static PyObject *
file_error_str (PyObject *unused, PyObject *self)
{
  (void) unused;
  return ((PyTypeObject *) PyExc_BaseException)->tp_str (self);
}

static PyMethodDef file_error_str_def
    = { "__str__", file_error_str, METH_O, "The message, as for every memres.Error." };

/* Gives memres.FileError its __str__ (an instance method: bound to the exception). */
static int
add_file_error_str (void)
{
  PyObject *function = PyCFunction_New (&file_error_str_def, NULL);
  PyObject *method = function != NULL ? PyInstanceMethod_New (function) : NULL;
  int rc = method != NULL ? PyObject_SetAttrString (error_file, "__str__", method) : -1;

  Py_XDECREF (method);
  Py_XDECREF (function);
  return rc;
}

int
pymemres_errors_init (PyObject *module)
{
  error_base = new_error (module, "Error",
                          "Error(message)\n\nThe base of every error memres raises. Attributes: "
                          "message (str), the error's text;\ndomain (str), the GError domain "
                          "(\"memres-error-quark\", \"memres-cuda-error-quark\", ...);\ncode "
                          "(int), the code in that domain (memres.ErrorCode for memres's own).",
                          NULL);
  if (error_base == NULL)
    return -1;
  error_oom = new_error (module, "OutOfMemoryError",
                         "Out of memory (memres.ErrorCode.OUT_OF_MEMORY): the resource or the "
                         "device has no more.\nAlso a MemoryError.",
                         PyExc_MemoryError);
  error_invalid = new_error (module, "InvalidArgumentError",
                             "A bad argument: a spec or option that does not parse, a kind or "
                             "@name that does not\nexist, a size or device out of range, a "
                             "descriptor that does not validate.\nAlso a ValueError.",
                             PyExc_ValueError);
  /* a ValueError, as an operation on a closed file raises; and a RuntimeError, as cuda.core's
   * check of a closed Buffer or memory resource raises */
  error_closed = new_error_of (
      module, "ClosedError",
      "The buffer or resource is closed (memres.ErrorCode.CLOSED). Also a ValueError, as for\n"
      "a closed file, and a RuntimeError, as cuda.core raises for a closed Buffer or memory\n"
      "resource.",
      NULL, PyExc_ValueError, PyExc_RuntimeError);
  error_file = new_error (
      module, "FileError",
      "A file memres cannot open, read or write (domain \"g-file-error-quark\", code a\n"
      "GFileError): the config file of @name resources or MEMRES_CONFIG, a log adaptor's\n"
      "path; a sleep's file (memres.SleepErrorCode.FILE); permission denied\n"
      "(memres.ErrorCode.PERMISSION_DENIED), a process an IPC transfer refuses. Also an\n"
      "OSError, with errno set from the code where one fits and strerror its text (str()\n"
      "stays the message): errno.ENOENT for a missing file or directory, errno.EISDIR for a\n"
      "directory, errno.EACCES, ...; for a sleep's file, the errno of the call on the file\n"
      "that failed (its message's \"(errno N)\"); None otherwise.",
      PyExc_OSError);
  error_no_device = new_error (module, "NoDeviceError",
                               "No CUDA driver loads, or the device asked for does not exist "
                               "(memres.ErrorCode.NO_DRIVER,\nNO_DEVICE). Also a RuntimeError.",
                               PyExc_RuntimeError);
  /* a state of the process, not of an argument: RuntimeError, as torch's "Cannot re-initialize
   * CUDA in forked subprocess" is */
  error_forked = new_error (module, "ForkedError",
                            "This process is the child of a fork() made after the CUDA driver "
                            "was used\n(memres.ErrorCode.FORKED): the driver cannot be used "
                            "here; start the process with\nmultiprocessing's \"spawn\" method "
                            "instead. Also a RuntimeError.",
                            PyExc_RuntimeError);
  /* what the kind cannot do: NotImplementedError, a RuntimeError, as cuda.core raises for an
   * IPC call on a resource that is not IPC-enabled */
  error_unsupported = new_error (
      module, "NotSupportedError",
      "The resource's kind cannot do this (memres.ErrorCode.NOT_SUPPORTED): export_message()\n"
      "of memory that cannot be shared, stats() of a stack without a stats layer, sleep() of\n"
      "one that cannot sleep. Also a NotImplementedError, so a RuntimeError, as cuda.core\n"
      "raises for an IPC call on a resource that is not IPC-enabled.",
      PyExc_NotImplementedError);
  if (error_oom == NULL || error_invalid == NULL || error_closed == NULL || error_file == NULL
      || error_no_device == NULL || error_forked == NULL || error_unsupported == NULL
      || add_file_error_str () < 0)
    return -1;
  /* cuda.core's size_t conversion raises OverflowError for allocate(-1); a Python user checks
   * a bad argument with ValueError, a memres user with memres.Error: all three catch it */
  error_range
      = new_error_of (module, "OutOfRangeError",
                      "An int argument out of its range (memres.ErrorCode.INVALID_ARGUMENT): "
                      "a negative size,\noffset, address or stream handle, one past "
                      "2**64-1, a fill value that does not fit its width. An\nInvalidArgumentError "
                      "(so a memres.Error and a ValueError) and also an OverflowError,\nas "
                      "cuda.core's size_t conversion raises.",
                      error_invalid, PyExc_OverflowError, NULL);
  if (error_range == NULL)
    return -1;
  return 0;
}

static PyObject *
class_of (const GError *error)
{
  if (error->domain == MEMRES_ERROR)
    switch ((MemresError) error->code)
      {
      case MEMRES_ERROR_OUT_OF_MEMORY:
        return error_oom;
      case MEMRES_ERROR_INVALID_ARGUMENT:
      case MEMRES_ERROR_NOT_FOUND:
      case MEMRES_ERROR_EXISTS:
      case MEMRES_ERROR_WRONG_DEVICE:
      case MEMRES_ERROR_INVALID_DESCRIPTOR:
        return error_invalid;
      case MEMRES_ERROR_CLOSED:
        return error_closed;
      case MEMRES_ERROR_NO_DRIVER:
      case MEMRES_ERROR_NO_DEVICE:
        return error_no_device;
      case MEMRES_ERROR_PERMISSION_DENIED:
        return error_file;
      case MEMRES_ERROR_FORKED:
        return error_forked;
      case MEMRES_ERROR_NOT_SUPPORTED:
        return error_unsupported;
      default:
        return error_base;
      }
  if (error->domain == G_FILE_ERROR || error->domain == G_KEY_FILE_ERROR)
    return error_file;
  /* a name that cannot be a tag is a bad argument; a sleep file that cannot be used, a file
   * error (memres.Error all the same, with their domain and code) */
  if (g_error_matches (error, MEMRES_TAG_ERROR, MEMRES_TAG_ERROR_INVALID))
    return error_invalid;
  if (g_error_matches (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE))
    return error_file;
  return error_base;
}

/* The errno a GFileError code stands for (g_file_error_from_errno() the other way), 0 for
 * G_FILE_ERROR_FAILED and a code GLib may add */
static int
errno_of_file_error (gint code)
{
  static const int errnos[] = {
    [G_FILE_ERROR_EXIST] = EEXIST, [G_FILE_ERROR_ISDIR] = EISDIR,
    [G_FILE_ERROR_ACCES] = EACCES, [G_FILE_ERROR_NAMETOOLONG] = ENAMETOOLONG,
    [G_FILE_ERROR_NOENT] = ENOENT, [G_FILE_ERROR_NOTDIR] = ENOTDIR,
    [G_FILE_ERROR_NXIO] = ENXIO,   [G_FILE_ERROR_NODEV] = ENODEV,
    [G_FILE_ERROR_ROFS] = EROFS,   [G_FILE_ERROR_TXTBSY] = ETXTBSY,
    [G_FILE_ERROR_FAULT] = EFAULT, [G_FILE_ERROR_LOOP] = ELOOP,
    [G_FILE_ERROR_NOSPC] = ENOSPC, [G_FILE_ERROR_NOMEM] = ENOMEM,
    [G_FILE_ERROR_MFILE] = EMFILE, [G_FILE_ERROR_NFILE] = ENFILE,
    [G_FILE_ERROR_BADF] = EBADF,   [G_FILE_ERROR_INVAL] = EINVAL,
    [G_FILE_ERROR_PIPE] = EPIPE,   [G_FILE_ERROR_AGAIN] = EAGAIN,
    [G_FILE_ERROR_INTR] = EINTR,   [G_FILE_ERROR_IO] = EIO,
    [G_FILE_ERROR_PERM] = EPERM,   [G_FILE_ERROR_NOSYS] = ENOSYS,
  };

  return code >= 0 && code < (gint) G_N_ELEMENTS (errnos) ? errnos[code] : 0;
}

/* The errno of a MEMRES_SLEEP_ERROR_FILE message (memres-sleep.h: "REASON (errno N)" for an
 * error of the system, "(flock(): REASON, errno N)" for a file another sleep holds): the number
 * of its last "errno N)", 0 where it has none (a file that is not a regular one, one shorter than
 * the sleep wrote). The last: a path earlier in the message may hold the words too. */
static int
errno_of_sleep_message (const char *message)
{
  int err = 0;

  for (const char *at = strstr (message, "errno "); at != NULL; at = strstr (at + 1, "errno "))
    {
      const char *digits = at + strlen ("errno ");
      char *end = NULL;
      guint64 n;

      if (!g_ascii_isdigit (*digits))
        continue;
      n = g_ascii_strtoull (digits, &end, 10);
      if (*end == ')' && n > 0 && n <= G_MAXINT)
        err = (int) n;
    }
  return err;
}

/* Sets an OSError's errno and strerror from @error where it has an errno (G_FILE_ERROR's codes;
 * MEMRES_ERROR_PERMISSION_DENIED is EACCES; MEMRES_SLEEP_ERROR_FILE's message's), so that a check
 * of e.errno (ENOENT as FileNotFoundError stands for, EACCES, EISDIR...) works; leaves both None
 * otherwise. str() stays the message (file_error_str()). Returns -1 with an exception set on
 * failure. */
static int
set_errno (PyObject *exc, const GError *error)
{
  int err = error->domain == G_FILE_ERROR ? errno_of_file_error (error->code)
            : g_error_matches (error, MEMRES_ERROR, MEMRES_ERROR_PERMISSION_DENIED) ? EACCES
            : g_error_matches (error, MEMRES_SLEEP_ERROR, MEMRES_SLEEP_ERROR_FILE)
                ? errno_of_sleep_message (error->message)
                : 0;
  PyObject *number, *text;
  int rc;

  if (err == 0)
    return 0;
  number = PyLong_FromLong (err);
  text = PyUnicode_DecodeUTF8 (g_strerror (err), (Py_ssize_t) strlen (g_strerror (err)),
                               "backslashreplace");
  rc = number != NULL && text != NULL && PyObject_SetAttrString (exc, "errno", number) == 0
               && PyObject_SetAttrString (exc, "strerror", text) == 0
           ? 0
           : -1;
  Py_XDECREF (number);
  Py_XDECREF (text);
  return rc;
}

/* Raises @error (consumed) as an exception of class @cls; returns NULL. */
static PyObject *
raise_as (PyObject *cls, GError *error)
{
  /* a message that is not UTF-8 (a path of the plugin search path in another encoding) keeps
   * its bytes as \xNN escapes: it was a UnicodeDecodeError in place of the error */
  PyObject *message = PyUnicode_DecodeUTF8 (error->message, (Py_ssize_t) strlen (error->message),
                                            "backslashreplace");
  PyObject *exc = message != NULL ? PyObject_CallOneArg (cls, message) : NULL;

  if (exc != NULL)
    {
      PyObject *domain = PyUnicode_FromString (g_quark_to_string (error->domain));
      PyObject *code = PyLong_FromLong (error->code);

      if (message != NULL && domain != NULL && code != NULL
          && PyObject_SetAttrString (exc, "message", message) == 0
          && PyObject_SetAttrString (exc, "domain", domain) == 0
          && PyObject_SetAttrString (exc, "code", code) == 0
          && (cls != error_file || set_errno (exc, error) == 0))
        PyErr_SetObject (cls, exc);
      Py_XDECREF (domain);
      Py_XDECREF (code);
      Py_DECREF (exc);
    }
  Py_XDECREF (message);
  g_error_free (error);
  return NULL;
}

/* Raises the exception of @error (consumed); returns NULL. */
PyObject *
pymemres_raise (GError *error)
{
  return raise_as (class_of (error), error);
}

PyObject *
pymemres_raise_range (const char *format, ...)
{
  GError *error;
  va_list args;

  va_start (args, format);
  error = g_error_new_valist (MEMRES_ERROR, MEMRES_ERROR_INVALID_ARGUMENT, format, args);
  va_end (args);
  return raise_as (error_range, error);
}

/* memres.ClosedError for a call on a closed buffer that the C API does not check itself. */
PyObject *
pymemres_raise_closed (void)
{
  return pymemres_raise (
      g_error_new_literal (MEMRES_ERROR, MEMRES_ERROR_CLOSED, "the buffer is closed"));
}
