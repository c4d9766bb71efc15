#!/usr/bin/env python3
# check-snapshot.py MEMRES SCHEMA GOLDEN_DIR SUITE [--update] [--stack-sites PATH]: `memres
# snapshot` of fixed
# scenarios (SUITE core: host memory without a driver; fake: device kinds against the fake
# driver), each validated against SCHEMA (docs/snapshot.schema.json) by the small validator
# below (and by the jsonschema package too where it is installed), checked for what must hold
# in any snapshot (the sums, the derived figures), and compared with its golden file in
# GOLDEN_DIR once made independent of where memory landed: every address becomes its offset in
# the outermost range holding it ("@SIZE+OFFSET"), the time goes, and lists are sorted. TAP
# output. --update rewrites the golden files. Call stacks vary with the build: they have no
# golden file; with --stack-sites (tests/stack-sites.c, suite core) the snapshot of
# track:backtrace=true is validated and its stacks checked for the functions that made each
# block, and `track:backtrace=true>cache` for a stack shared with the cache's block. With
# --streams PATH (tests/snapshot-streams.c, suite fake) stacks with live and freed buffers on two
# streams of their own and the legacy one are validated, each block's stream checked.
import json
import os
import re
import subprocess
import sys

SCENARIOS = {
    "core": [
        ("cache-host", "cache:chunk=64KiB>host", ["-a", "4KiB", "-a", "4KiB", "-a", "4KiB",
                                                   "-a", "16KiB", "--close", "2"]),
        ("track-limit-host", "track>limit:max=1MiB>host", ["-a", "1000", "-a", "2000"]),
        # the tags of track's blocks, and on the cache's blocks of the same buffers
        ("track-cache-tags", "track>cache:chunk=64KiB>host", ["-a", "4KiB:weights", "-a",
                                                              "4KiB:a,b", "-a", "8KiB", "-a",
                                                              "16KiB:weights"]),
        ("host", "host", ["-a", "1KiB"]),
        # every live block of the cache listed: one of a chunk, one of its own (a class above
        # the chunked ones) and a request above max_block, each once; one of its own freed
        ("cache-direct-host", "cache:chunk=64KiB,max_block=256KiB>host",
         ["-a", "1KiB", "-a", "100KiB", "-a", "100KiB", "-a", "1MiB", "--close", "3"]),
        # empty buffers (0 bytes: address 0, no slot call) are counted in n_buffers and are no
        # block of any layer; one closed, one tagged
        ("zero-byte", "cache:chunk=64KiB>host", ["-a", "0", "-a", "0:weights", "-a",
                                                "4KiB:weights", "-a", "0", "--close", "4"]),
    ],
    "fake": [
        ("cache-vmm", "cache:chunk=2MiB>vmm:device=0", ["-a", "64KiB", "-a", "64KiB",
                                                        "--close", "1"]),
        ("vmm-reserve", "vmm:device=0,reserve=8MiB", ["-a", "3MiB"]),
        ("dmr", "dmr:device=0", ["-a", "1MiB"]),
        ("arena", "arena:device=0", ["-a", "4KiB", "-a", "1MiB", "-a", "2MiB", "--close", "2"]),
        # the stacks of issue 35's list: a limit over a cache over an arena, retry over a cache
        # over a driver's pool (which lists no blocks: summary's largest_free null), stats over
        # track over vmm with tags and an empty buffer
        ("limit-cache-arena", "limit:max=32MiB>cache>arena:device=0",
         ["-a", "4KiB", "-a", "4KiB", "-a", "100KiB", "-a", "3MiB", "--close", "2"]),
        ("retry-cache-dmr", "retry>cache>dmr:device=0",
         ["-a", "1MiB", "-a", "3MiB", "-a", "0", "--close", "1"]),
        ("stats-track-vmm", "stats>track>vmm:device=0",
         ["-a", "1MiB:weights", "-a", "3MiB", "-a", "0:kv", "-a", "64KiB:kv", "--close", "2"]),
    ],
}


# ---- a small JSON-schema validator: the keywords docs/snapshot.schema.json uses ----------------

TYPES = {
    "object": dict, "array": list, "string": str, "boolean": bool, "null": type(None),
}


def type_ok(value, name):
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, TYPES[name])


def validate(value, schema, root, path="$"):
    errors = []
    if "$ref" in schema:
        target = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            target = target[part]
        return validate(value, target, root, path)
    if "type" in schema:
        names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(type_ok(value, n) for n in names):
            return [f"{path}: {value!r} is not of type {names}"]
    if "const" in schema and value != schema["const"]:
        errors.append(f"{path}: {value!r} is not {schema['const']!r}")
    if "enum" in schema and value not in schema["enum"]:
        errors.append(f"{path}: {value!r} is not one of {schema['enum']}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, str) and "pattern" in schema and not re.search(schema["pattern"], value):
        errors.append(f"{path}: {value!r} does not match {schema['pattern']}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errors.append(f"{path}: fewer than {schema['minItems']} items")
        for i, item in enumerate(value):
            if "items" in schema:
                errors += validate(item, schema["items"], root, f"{path}[{i}]")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errors.append(f"{path}: no member {key!r}")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                errors += validate(item, props[key], root, f"{path}.{key}")
            elif schema.get("additionalProperties") is False:
                errors.append(f"{path}: member {key!r} is not in the schema")
            elif isinstance(schema.get("additionalProperties"), dict):
                errors += validate(item, schema["additionalProperties"], root, f"{path}.{key}")
    return errors


# ---- what holds in every snapshot --------------------------------------------------------------

def empty_buffers(args):
    """The live empty buffers a scenario's `memres snapshot` arguments leave: each -a of 0 bytes
    not closed by a --close."""
    allocs = [args[i + 1] for i, a in enumerate(args) if a == "-a"]
    closed = {int(args[i + 1]) for i, a in enumerate(args) if a == "--close"}
    return sum(1 for n, a in enumerate(allocs, 1)
               if a.split(":")[0] in ("0", "0B") and n not in closed)


def invariants(doc, empties=0):
    """What holds in every snapshot; @empties: the live empty buffers (0 bytes) of the top
    layer, which n_buffers counts and no layer lists as a block."""
    errors = []
    for layer in doc["layers"]:
        name = f"layer {layer['position']} ({layer['kind']})"
        free = [b["size"] for b in layer["blocks"] if b["state"] in ("free", "pending")]
        withheld = sum(b["size"] for b in layer["blocks"] if b["state"] == "withheld")
        if layer["largest_free"] is not None:
            if layer["largest_free"] != max(free, default=0):
                errors.append(f"{name}: largest_free {layer['largest_free']} is not the largest "
                              f"free block {max(free, default=0)}")
            if layer["cached"] != sum(free):
                errors.append(f"{name}: cached {layer['cached']} is not the free blocks' "
                              f"{sum(free)}")
            want = 0 if sum(free) == 0 else 1 - max(free) / sum(free)
            if abs(layer["fragmentation"] - want) > 1e-5:
                errors.append(f"{name}: fragmentation {layer['fragmentation']} is not {want}")
        if layer["complete"] != (layer["described"] and layer["unseen"] is None):
            errors.append(f"{name}: complete does not follow described and unseen")
        if not layer["described"] and layer["unseen"] is None:
            errors.append(f"{name}: not described yet nothing said unseen")
        blocks = sorted((int(b["address"], 16), b["size"]) for b in layer["blocks"])
        for (a, s), (b, _) in zip(blocks, blocks[1:]):
            if a + s > b:
                errors.append(f"{name}: blocks at {a:#x} and {b:#x} overlap")
        if layer["complete"] and layer["own_stats"] and layer["kind"] != "arena":
            used = sum(b["size"] for b in layer["blocks"] if b["state"] == "used")
            if layer["used"] is not None and used < layer["used"]:
                errors.append(f"{name}: its used blocks ({used}) hold less than used "
                              f"({layer['used']})")
        # a complete layer lists each of its live buffers once (the top layer counts them), but
        # the empty ones, which hold nothing; an arena's adjacent large buffers read as one block
        n_used = sum(1 for b in layer["blocks"] if b["state"] == "used")
        n_live = layer.get("n_buffers", 0) - (empties if layer["position"] == 0 else 0)
        if layer["complete"] and layer["own_stats"] and layer["n_buffers"] > 0 \
                and (n_used > n_live if layer["kind"] == "arena" else n_used != n_live):
            errors.append(f"{name}: {n_used} used blocks for {n_live} live buffers of "
                          f"{layer['n_buffers']} (less {empties} empty)")
        # what a layer holds from below is its segments, when it has any, less the second
        # addresses of memory it lists at another (withheld)
        if layer["segments"] and layer["reserved"] is not None \
                and sum(g["size"] for g in layer["segments"]) - withheld != layer["reserved"]:
            errors.append(f"{name}: its segments hold "
                          f"{sum(g['size'] for g in layer['segments'])} bytes, less {withheld} "
                          f"withheld, not its reserved {layer['reserved']}")
    s = doc["summary"]
    if s["cached"] != sum(layer["cached"] for layer in doc["layers"]):
        errors.append("summary: cached is not the layers' sum")
    return errors


# ---- independent of where memory landed --------------------------------------------------------

def normalize(doc):
    doc = json.loads(json.dumps(doc))
    doc.pop("time_us")
    ranges = []
    for layer in doc["layers"]:
        for key in ("segments", "blocks", "holes", "imports"):
            ranges += [(int(r["address"], 16), r["size"]) for r in layer[key]]
    outer = [r for r in ranges
             if not any(o != r and o[0] <= r[0] and r[0] + r[1] <= o[0] + o[1] for o in ranges)]

    def where(address):
        for base, size in outer:
            if base <= address < base + max(size, 1):
                return f"@{size}+{address - base}"
        return "@?"

    for layer in doc["layers"]:
        for key in ("segments", "blocks", "holes", "imports"):
            for r in layer[key]:
                r["address"] = where(int(r["address"], 16))
            layer[key].sort(key=lambda r: json.dumps(r, sort_keys=True))
    return doc


def stack_errors(doc):
    """What must hold of a snapshot's call stacks: frames and stacks each once, the indexes in
    range, each stack's count its frames', no frame of libmemres."""
    errors = []
    frames, stacks = doc.get("frames"), doc.get("stacks")
    if not frames or not stacks:
        return ["no frames or stacks"]
    if len(set(frames)) != len(frames):
        errors.append("a frame stored twice")
    if len(set(map(tuple, stacks))) != len(stacks):
        errors.append("a stack stored twice")
    for st in stacks:
        if st[0] != len(st) - 1 or any(i >= len(frames) for i in st[1:]):
            errors.append(f"stack {st}: its count or an index is wrong")
    if any("libmemres" in f for f in frames):
        errors.append("a frame of libmemres kept")
    for layer in doc["layers"]:
        for b in layer["blocks"]:
            if "stack" in b and (b["state"] != "used" or b["stack"] >= len(stacks)):
                errors.append(f"layer {layer['position']}: a stack on {b}")
    return errors


def frames_of(doc, block):
    st = doc["stacks"][block["stack"]]
    return [doc["frames"][i] for i in st[1:]]


def check_stacks(memres, schema, stack_sites):
    """The stacks of track:backtrace=true: stack-sites' blocks, made in functions of known names,
    and a cache's used blocks under track sharing track's stacks."""
    import tempfile
    errors = []
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sites.json")
        run = subprocess.run([stack_sites, os.path.join(d, "sites.csv"), path],
                             capture_output=True, text=True)
        if run.returncode != 0:
            return [f"stack-sites exited {run.returncode}: {run.stderr.strip()}"]
        with open(path) as f:
            doc = json.load(f)
    errors += validate(doc, schema, schema) + invariants(doc) + stack_errors(doc)
    track = [layer for layer in doc["layers"] if layer["kind"] == "track"]
    blocks = {b["size"]: b for b in (track[0]["blocks"] if track else [])}
    for size, site in ((4096, "stack_site_weights"), (8192, "stack_site_activations")):
        b = blocks.get(size)
        if b is None or "stack" not in b or errors:
            errors.append(f"track's block of {size} bytes: no stack ({b})")
            continue
        frames = frames_of(doc, b)
        if f"({site}+0x" not in frames[0] or len(frames) < 3:
            errors.append(f"the block of {size} bytes: innermost frame {frames[0]!r}, not {site}()")
        if any("(stack_site_too_big+0x" in f for f in frames):
            errors.append(f"the block of {size} bytes: the failed request's frame in its stack")
    if not errors and blocks[4096]["stack"] == blocks[8192]["stack"]:
        errors.append("two call sites, one stack")
    # below track, a cache: its used blocks are the same buffers, with track's stacks
    run = subprocess.run([memres, "snapshot", "track:backtrace=true>cache:chunk=64KiB>host",
                          "-a", "4KiB", "-a", "1KiB"], capture_output=True, text=True)
    if run.returncode != 0:
        return errors + [f"memres snapshot exited {run.returncode}: {run.stderr.strip()}"]
    doc = json.loads(run.stdout)
    errors += validate(doc, schema, schema) + invariants(doc) + stack_errors(doc)
    if errors:
        return errors
    track, cache = doc["layers"][0], doc["layers"][1]
    tracked = {b["address"]: b.get("stack") for b in track["blocks"]}
    shared = {b["address"]: b.get("stack") for b in cache["blocks"] if b["address"] in tracked}
    if len(tracked) != 2 or None in tracked.values() or shared != tracked or len(shared) != 2:
        errors.append(f"the cache's used blocks do not carry track's stacks: {tracked} {shared}")
    if any("stack" in b for b in cache["blocks"] if b["state"] != "used"):
        errors.append("a stack on a free block")
    # without the option: no stacks, no members
    run = subprocess.run([memres, "snapshot", "track>host", "-a", "4KiB"], capture_output=True,
                         text=True)
    doc = json.loads(run.stdout)
    if "frames" in doc or "stacks" in doc or any("stack" in b for b in doc["layers"][0]["blocks"]):
        errors.append("stacks without backtrace=true")
    return errors


STREAM_SPECS = ["cache:front=0>dmr:device=0", "arena:device=0", "stats>track>cache>vmm:device=0",
                "limit:max=32MiB>cache>arena:device=0"]


def check_streams(schema, streams_exe):
    """Live buffers on several streams (tests/snapshot-streams.c: 1 MiB live and 64 KiB freed on
    each of two streams of its own and the legacy one): each snapshot valid, every layer that
    lists its used buffers one by one (cache, track) giving each its stream, and the caching
    kinds' freed blocks kept for the stream they were freed on."""
    import tempfile
    errors = []
    for spec in STREAM_SPECS:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "streams.json")
            run = subprocess.run([streams_exe, spec, path], capture_output=True, text=True)
            if run.returncode != 0:
                errors.append(f"{spec}: snapshot-streams exited {run.returncode}: "
                              f"{run.stderr.strip()}")
                continue
            with open(path) as f:
                doc = json.load(f)
        want = set(run.stdout.split()) | {"legacy"}
        errs = validate(doc, schema, schema) + invariants(doc)
        if len(want) != 3:
            errs.append(f"streams {run.stdout.strip()!r}")
        for layer in doc["layers"]:
            live = [b["stream"] for b in layer["blocks"]
                    if b["state"] == "used" and b["size"] == 1 << 20]
            freed = [b["stream"] for b in layer["blocks"]
                     if b["state"] in ("free", "pending") and b["size"] == 64 << 10]
            if layer["kind"] in ("cache", "track") and sorted(live) != sorted(want):
                errs.append(f"{layer['kind']}: the live buffers' streams {live}, not {want}")
            # (a chunk's other blocks of the class are free for the stream that carved it; an
            # arena under a cache never sees the frees)
            if (layer["kind"] == "cache" or layer["kind"] == "arena" and layer["position"] == 0) \
                    and not set(freed) >= want:
                errs.append(f"{layer['kind']}: the freed blocks' streams {set(freed)}, not {want}")
        errors += [f"{spec}: {e}" for e in errs]
    return errors


def check_config_names(memres):
    """`memres snapshot NAME` and `@NAME`: a resource of the config file by its name, the
    snapshot of the stack it names (issue 35: a command for a spec or a config name)."""
    import tempfile
    errors = []
    with tempfile.TemporaryDirectory() as d:
        conf = os.path.join(d, "memres.conf")
        with open(conf, "w") as f:
            f.write("[small]\nspec=limit:max=1MiB>host\n")
        env = dict(os.environ, MEMRES_CONFIG=conf)
        for operand in ("small", "@small"):
            run = subprocess.run([memres, "snapshot", operand, "-a", "4KiB"], capture_output=True,
                                 text=True, env=env)
            if run.returncode != 0:
                errors.append(f"{operand}: exit {run.returncode}: {run.stderr.strip()}")
                continue
            doc = json.loads(run.stdout)
            kinds = [layer["kind"] for layer in doc["layers"]]
            if kinds != ["limit", "host"] or doc["layers"][0]["figures"] != {
                    "limit": 1 << 20, "limit_used": 4096}:
                errors.append(f"{operand}: layers {kinds}, figures {doc['layers'][0]['figures']}")
        # a name the file lacks: not a kind either, an error naming it
        run = subprocess.run([memres, "snapshot", "nosuchname"], capture_output=True, text=True,
                             env=env)
        if run.returncode == 0 or "nosuchname" not in run.stderr or run.stdout:
            errors.append(f"nosuchname: exit {run.returncode}, stderr {run.stderr.strip()!r}")
    return errors


def main():
    memres, schema_path, golden_dir, suite = sys.argv[1:5]
    update = "--update" in sys.argv[5:]
    stack_sites = streams_exe = None
    if "--stack-sites" in sys.argv[5:]:
        stack_sites = sys.argv[sys.argv.index("--stack-sites") + 1]
    if "--streams" in sys.argv[5:]:
        streams_exe = sys.argv[sys.argv.index("--streams") + 1]
    with open(schema_path) as f:
        schema = json.load(f)
    try:
        import jsonschema
    except ImportError:
        jsonschema = None
    scenarios = SCENARIOS[suite]
    print(f"1..{len(scenarios) + 2 + (stack_sites is not None) + (streams_exe is not None)}")
    failed = 0
    # bad input: a usage error (exit status 2) naming it, nothing on stdout
    bad = [(["host", "-a", "lots"], "-a lots"), (["host", "-a", "1KiB:"], "cannot be empty"),
           (["host", "-a", "1KiB:\x01"], "control character"),
           (["host", "-a", "1KiB", "--close", "2"],
                                                 "--close 2"), (["host", "--close", "1"],
                                                                "--close 1: there is no allocation to close (no -a)"), ([], "expected"),
           (["host", "-a", "1KiB", "--close", "1", "--close", "01"], "--close 1 given twice")]
    bad_errors = []
    for args, word in bad:
        run = subprocess.run([memres, "snapshot"] + args, capture_output=True, text=True)
        if run.returncode != 2 or word not in run.stderr or run.stdout:
            bad_errors.append(f"{args}: exit {run.returncode}, stderr {run.stderr.strip()!r}")
    run = subprocess.run([memres, "snapshot", "nosuchkind"], capture_output=True, text=True)
    if run.returncode == 0 or "nosuchkind" not in run.stderr:
        bad_errors.append(f"nosuchkind: exit {run.returncode}, stderr {run.stderr.strip()!r}")
    print(f"{'not ok' if bad_errors else 'ok'} 1 bad input")
    for e in bad_errors:
        print(f"# {e}")
    failed += 1 if bad_errors else 0
    for i, (name, spec, args) in enumerate(scenarios, 2):
        run = subprocess.run([memres, "snapshot", spec] + args, capture_output=True, text=True)
        errors = []
        if run.returncode != 0:
            errors.append(f"memres snapshot exited {run.returncode}: {run.stderr.strip()}")
        else:
            doc = json.loads(run.stdout)
            errors += validate(doc, schema, schema)
            if jsonschema is not None:
                errors += [f"jsonschema: {e.message}"
                           for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
            errors += invariants(doc, empty_buffers(args))
            got = json.dumps(normalize(doc), indent=1, sort_keys=True) + "\n"
            golden = os.path.join(golden_dir, f"{name}.json")
            if update:
                with open(golden, "w") as f:
                    f.write(got)
            elif not os.path.exists(golden):
                errors.append(f"no golden file {golden} (run with --update)")
            else:
                with open(golden) as f:
                    want = f.read()
                if want != got:
                    import difflib
                    diff = difflib.unified_diff(want.splitlines(), got.splitlines(), "golden",
                                                "now", lineterm="", n=1)
                    errors.append("differs from its golden file:\n" + "\n".join(list(diff)[:40]))
        if errors:
            failed += 1
            print(f"not ok {i} {name}: {spec} {' '.join(args)}")
            for e in errors:
                for line in e.splitlines():
                    print(f"# {line}")
        else:
            print(f"ok {i} {name}: {spec} {' '.join(args)}")
    errors = check_config_names(memres)
    failed += 1 if errors else 0
    print(f"{'not ok' if errors else 'ok'} {len(scenarios) + 2} a resource of the config file by "
          "its name")
    for e in errors:
        print(f"# {e}")
    if stack_sites is not None:
        errors = check_stacks(memres, schema, stack_sites)
        failed += 1 if errors else 0
        print(f"{'not ok' if errors else 'ok'} {len(scenarios) + 3} call stacks "
              "(track:backtrace=true)")
        for e in errors:
            print(f"# {e}")
    if streams_exe is not None:
        errors = check_streams(schema, streams_exe)
        failed += 1 if errors else 0
        n = len(scenarios) + 3 + (stack_sites is not None)
        print(f"{'not ok' if errors else 'ok'} {n} live buffers on several streams")
        for e in errors:
            print(f"# {e}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
