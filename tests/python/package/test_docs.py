"""Every public name has a docstring, and help() reads well."""
import pydoc

import memres


def public_names():
    for name in memres.__all__:
        if name == "__version__":
            continue
        obj = getattr(memres, name)
        yield name, obj
        if isinstance(obj, type):
            for attr, value in vars(obj).items():
                if not attr.startswith("_") or attr in ("__dlpack__", "__dlpack_device__",
                                                        "__cuda_array_interface__",
                                                        "__enter__", "__exit__", "__init__",
                                                        "__call__"):
                    yield name + "." + attr, value


def test_docstrings():
    missing = [name for name, obj in public_names()
               if not isinstance(obj, (int, str)) and not (getattr(obj, "__doc__", None) or "").strip()]
    assert missing == []
    assert memres.__doc__ and "Resource" in memres.__doc__


def test_help_reads_well():
    text = pydoc.render_doc(memres.Resource, renderer=pydoc.plaintext)
    for word in ("Resource(spec)", "allocate(size, stream=None)", "stats()", "trim(", "upstream",
                 "spec"):
        assert word in text
    text = pydoc.render_doc(memres.Buffer, renderer=pydoc.plaintext)
    for word in ("close(stream=None)", "copy_to(", "__dlpack__", "size", "handle", "device_id"):
        assert word in text


def test_docstring_lines_fit():
    # help() wraps nothing: a docstring line past 96 characters ran on past the terminal
    # (Buffer.__dlpack__'s and Resource.sleep's were 130 and more, from_handle's ragged)
    long = [(name, line) for name, obj in public_names()
            if not isinstance(obj, (int, str))
            for line in (getattr(obj, "__doc__", None) or "").splitlines() if len(line) > 96]
    assert long == []


def test_help_names_cuda_cores_properties():
    text = pydoc.render_doc(memres.Resource, renderer=pydoc.plaintext)
    for word in ("is_closed", "is_ipc_enabled", "is_managed", "device_id"):
        assert word in text
    assert "find_layer" not in text  # no such call in the package
    text = pydoc.render_doc(memres.Buffer, renderer=pydoc.plaintext)
    for word in ("from_handle(ptr, size, mr=None, owner=None, *, stream=None)", "is_closed",
                 "Buffer.from_handle()", "memres.import_message()", "RuntimeError"):
        assert word in text
