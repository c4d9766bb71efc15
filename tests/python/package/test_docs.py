"""Every public name has a docstring, and help() reads well."""
import pydoc

import pytest

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


def _python_blocks(path):
    """The ```python blocks of a Markdown file of the repository, in order."""
    import os
    import re

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    with open(os.path.join(root, path), encoding="utf-8") as f:
        return re.findall(r"^```python\n(.*?)^```$", f.read(), re.S | re.M)


def test_python_md_example_runs_verbatim(monkeypatch):
    """docs/python.md's example runs as written (it named a stream s it never made, and torch
    it never imported: a NameError pasted as it is), with a stand-in for torch whose
    from_dlpack() consumes the versioned capsule through memres.from_dlpack() and whose
    current stream is the legacy default stream (torch's own DLPack is the framework suites'
    on the GPU; importing it here would initialize CUDA in this process)."""
    import sys
    import types

    from conftest import MODE

    if MODE == "host":
        pytest.skip("the example allocates device memory (dmr)")
    block = _python_blocks("docs/python.md")[0]
    assert "memres.Resource(" in block and "torch.from_dlpack(buf)" in block
    torch = types.ModuleType("torch")
    torch.from_dlpack = lambda obj: memres.from_dlpack(obj.__dlpack__(stream=1,
                                                                      max_version=(1, 0)))
    torch.cuda = types.SimpleNamespace(
        current_stream=lambda: types.SimpleNamespace(cuda_stream=0))
    monkeypatch.setitem(sys.modules, "torch", torch)
    namespace = {}
    exec(compile(block, "docs/python.md", "exec"), namespace)
    # the tensor holds the memory past the block's close
    assert namespace["buf"].closed and namespace["t"].size == 1 << 20
    assert namespace["t"].read(0, 4) == b"\0\0\0\0"
    assert namespace["host"].device_id == -1
    assert namespace["mr"].spec.startswith("cache")


def test_readme_quick_start_runs_verbatim():
    """README's quick start from Python, the program its python3 -c runs."""
    import os
    import re

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    with open(os.path.join(root, "README.md"), encoding="utf-8") as f:
        text = f.read()
    program = re.search(r"meson devenv -C build python3 -c '\n(.*?)'\n```", text, re.S).group(1)
    assert "memres.Resource(" in program
    exec(compile(program, "README.md", "exec"), {})
