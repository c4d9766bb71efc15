"""memres: CUDA memory resources from Python.

A resource is made from a spec string, one kind with its options or a stack of layers::

    import memres
    mr = memres.Resource("cache>dmr:device=0")
    with mr.allocate(1 << 20) as buf:       # a Buffer: size, handle, device_id, ...
        buf.fill(0)
        x = torch.from_dlpack(buf)          # DLPack, the CUDA array interface, memoryview
    print(mr.stats())

The names follow cuda.core's memory classes where they fit (docs/python.md maps them):
Resource is a MemoryResource, Buffer a Buffer, default_resource() the device's default.
Every error is a memres.Error (with message, domain and code), and also the builtin a Python
program catches: OutOfMemoryError is a MemoryError, InvalidArgumentError and ClosedError are
ValueErrors, FileError is an OSError, NoDeviceError and ForkedError (the driver used in a
forked child) RuntimeErrors, and ClosedError (a call on a closed Buffer or Resource) a
RuntimeError too, as cuda.core raises; NotSupportedError (what the kind cannot do:
export_message() of memory that cannot be shared) a NotImplementedError; OutOfRangeError (an int argument out of its range:
allocate(-1), fill(256)) is an InvalidArgumentError and an OverflowError.

The package finds the plugins it carries (a wheel's memres/plugins) by itself; an installed
memres finds its plugin directory; MEMRES_PLUGIN_PATH comes first in both.
"""

import enum as _enum
import os as _os

from . import _memres
from ._memres import (
    Buffer,
    ClosedError,
    Error,
    FileError,
    ForeignBuffer,
    ForkedError,
    InvalidArgumentError,
    NoDeviceError,
    NotSupportedError,
    OutOfMemoryError,
    OutOfRangeError,
    Resource,
    default_resource,
    from_dlpack,
    import_message,
    kinds,
    current_tag,
    plugin_search_path,
    set_device_default_tag,
    set_plugin_dir,
    set_stream_default_tag,
    tags,
)

__all__ = [
    "Buffer",
    "ClosedError",
    "Error",
    "ErrorCode",
    "FileError",
    "ForeignBuffer",
    "ForkedError",
    "InvalidArgumentError",
    "MemoryFlags",
    "NoDeviceError",
    "NotSupportedError",
    "OutOfMemoryError",
    "OutOfRangeError",
    "Resource",
    "TagErrorCode",
    "SleepErrorCode",
    "__version__",
    "current_tag",
    "set_device_default_tag",
    "set_stream_default_tag",
    "tag",
    "tags",
    "default_resource",
    "from_dlpack",
    "import_message",
    "kinds",
    "plugin_search_path",
    "set_plugin_dir",
]

#: The version of libmemres the package runs on ("MAJOR.MINOR.MICRO").
__version__ = _memres.version


class ErrorCode(_enum.IntEnum):
    """The codes of memres's own errors (Error.code where Error.domain is
    "memres-error-quark"): the MemresError enum of memres-error.h."""

    FAILED = _memres.ERROR_FAILED
    INVALID_ARGUMENT = _memres.ERROR_INVALID_ARGUMENT
    NOT_FOUND = _memres.ERROR_NOT_FOUND
    EXISTS = _memres.ERROR_EXISTS
    NOT_SUPPORTED = _memres.ERROR_NOT_SUPPORTED
    OUT_OF_MEMORY = _memres.ERROR_OUT_OF_MEMORY
    CLOSED = _memres.ERROR_CLOSED
    NO_DRIVER = _memres.ERROR_NO_DRIVER
    NO_DEVICE = _memres.ERROR_NO_DEVICE
    WRONG_DEVICE = _memres.ERROR_WRONG_DEVICE
    INVALID_DESCRIPTOR = _memres.ERROR_INVALID_DESCRIPTOR
    PERMISSION_DENIED = _memres.ERROR_PERMISSION_DENIED
    FORKED = _memres.ERROR_FORKED


class TagErrorCode(_enum.IntEnum):
    """The codes of tag errors (Error.code where Error.domain is "memres-tag-error-quark"):
    the MemresTagError enum of memres-tags.h."""

    INVALID = _memres.TAG_ERROR_INVALID
    TOO_MANY = _memres.TAG_ERROR_TOO_MANY
    TOO_DEEP = _memres.TAG_ERROR_TOO_DEEP
    EMPTY = _memres.TAG_ERROR_EMPTY
    MISMATCH = _memres.TAG_ERROR_MISMATCH
    UNKNOWN = _memres.TAG_ERROR_UNKNOWN


class SleepErrorCode(_enum.IntEnum):
    """The codes of sleep errors (Error.code where Error.domain is "memres-sleep-error-quark"):
    the MemresSleepError enum of memres-sleep.h (docs/sleep.md)."""

    ASLEEP = _memres.SLEEP_ERROR_ASLEEP
    TAG_ASLEEP = _memres.SLEEP_ERROR_TAG_ASLEEP
    ALREADY_ASLEEP = _memres.SLEEP_ERROR_ALREADY_ASLEEP
    NOT_ASLEEP = _memres.SLEEP_ERROR_NOT_ASLEEP
    SHARED = _memres.SLEEP_ERROR_SHARED
    FILE = _memres.SLEEP_ERROR_FILE
    BUSY = _memres.SLEEP_ERROR_BUSY


class tag:
    """A tag scope on the calling thread (docs/tags.md)::

        with memres.tag("weights"):
            buf = mr.allocate(1 << 20)      # buf.tag == "weights"

    Every buffer the thread allocates inside carries the innermost tag, and the stats layers
    it goes through count it under that tag (Resource.tag_counts()). Scopes nest; the name is
    checked at entry (Error with TagErrorCode.INVALID: empty, over 63 bytes of UTF-8, a
    control character). Usable as a decorator too."""

    def __init__(self, name):
        """A scope for the tag name (a str); nothing is pushed until the with block or the
        decorated call begins."""
        self.name = name

    def __enter__(self):
        """Pushes the tag on the calling thread's scope stack (memres_tag_push)."""
        _memres._tag_push(self.name)
        return self

    def __exit__(self, *exc):
        """Pops it (memres_tag_pop, checking that it is the innermost tag)."""
        _memres._tag_pop(self.name)
        return False

    def __call__(self, func):
        """Used as a decorator: func runs inside the tag's scope on each call."""
        import functools

        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with self:
                return func(*args, **kwargs)

        return wrapper


class MemoryFlags(_enum.IntFlag):
    """What memory is (Resource.flags, Buffer.flags): MemresMemoryFlags of memres-types.h."""

    DEVICE_ACCESSIBLE = _memres.MEMORY_DEVICE_ACCESSIBLE
    HOST_ACCESSIBLE = _memres.MEMORY_HOST_ACCESSIBLE
    IPC_ENABLED = _memres.MEMORY_IPC_ENABLED
    IMPORTED = _memres.MEMORY_IMPORTED
    RESIZABLE = _memres.MEMORY_RESIZABLE
    STREAM_ORDERED = _memres.MEMORY_STREAM_ORDERED
    MANAGED = _memres.MEMORY_MANAGED
    GRAPH = _memres.MEMORY_GRAPH
    FABRIC_HANDLES = _memres.MEMORY_FABRIC_HANDLES


def _find_own_plugins():
    """The plugins a wheel carries sit in memres/plugins, beside this file."""
    here = _os.path.join(_os.path.dirname(_os.path.abspath(__file__)), "plugins")
    if _os.path.isdir(here):
        set_plugin_dir(here)


_find_own_plugins()
