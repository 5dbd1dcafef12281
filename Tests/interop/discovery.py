"""Google API discovery documents (Tests/Fixtures/google) as a strict validator, and a walk over a schema's fields.

`errors(document, "ListVersionsResponse", answer)` lists every way a JSON value departs from a discovery schema:
`$ref`; the types string, integer, number, boolean, object, array and any; the formats int32, uint32, int64 and uint64
(int64 as a decimal string, as Google's JSON mapping writes it), float, double, byte, google-datetime and
google-duration; enums; `additionalProperties` (maps); and a member the schema does not name is an error.

Two leniencies Google's own parsers have are opt-in, so a test says when it relies on them: `proto_names` accepts a
field under its original proto name as well (`collapse_key` for `collapseKey`, never both at once), and
`enum_any_case` accepts an enum name in another case (FCM's own description of `AndroidConfig.priority` says it
"can take "normal" and "high" values", and firebase-admin writes them so).
"""
import base64
import json
import re
from datetime import datetime
from pathlib import Path

from conftest import ROOT

DOCUMENTS = ROOT / "Tests" / "Fixtures" / "google"

INT32 = (-(2**31), 2**31 - 1)
UINT32 = (0, 2**32 - 1)
INT64 = (-(2**63), 2**63 - 1)
UINT64 = (0, 2**64 - 1)
DECIMAL = re.compile(r"-?(0|[1-9][0-9]*)")
DURATION = re.compile(r"-?[0-9]{1,12}(\.[0-9]{1,9})?s")
DATETIME = re.compile(
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)"
    r"(\.[0-9]{1,9})?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])")
BASE64 = re.compile(r"[A-Za-z0-9+/_-]*={0,2}")


def load(name: str) -> dict:
    """A discovery document of Tests/Fixtures/google by file name (`fcm.v1.json`)."""
    return json.loads((DOCUMENTS / name).read_text(encoding="utf-8"))


def proto_name(json_name: str) -> str:
    """The proto field name a JSON name comes from: `collapseKey` -> `collapse_key`, `androidV2` -> `android_v2`."""
    out = ""
    for character in json_name:
        if character.isupper():
            out += "_" + character.lower()
        else:
            out += character
    return out


def errors(document: dict, schema, instance, *, path: str = "", proto_names: bool = False, enum_any_case: bool = False) -> list:
    """Every departure of `instance` from `schema` (a schema id such as "Message", or a schema object), each as
    "path: what is wrong"; empty when it is valid."""
    found = []
    _check(document, {"$ref": schema} if isinstance(schema, str) else schema, instance, path or "$", found,
           proto_names=proto_names, enum_any_case=enum_any_case)
    return found


def assert_valid(document: dict, schema, instance, **options):
    problems = errors(document, schema, instance, **options)
    assert not problems, f"not a valid {schema if isinstance(schema, str) else 'value'} of {document['id']} " \
                         f"revision {document['revision']}:\n  " + "\n  ".join(problems) + "\n" + json.dumps(instance, indent=1)


def resolve(document: dict, schema: dict) -> dict:
    """A property's schema with its `$ref` followed."""
    while "$ref" in schema:
        name = schema["$ref"]
        if name not in document["schemas"]:
            raise KeyError(f"$ref {name} is not a schema of {document['id']}")
        schema = document["schemas"][name]
    return schema


def _integer(value, bounds):
    return isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]


def _check(document, schema, value, path, found, **options):
    schema = resolve(document, schema)
    kind = schema.get("type")
    fmt = schema.get("format")

    def wrong(expected):
        found.append(f"{path}: expected {expected}, got {json.dumps(value)[:80]}")

    if kind == "any":
        return
    if kind == "object":
        if not isinstance(value, dict):
            return wrong("an object")
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if properties is None and additional is not None:  # a map: any key, every value of one schema
            for key, member in value.items():
                _check(document, additional, member, f"{path}[{json.dumps(key)}]", found, **options)
            return
        properties = properties or {}
        names = {name: name for name in properties}
        if options["proto_names"]:
            names.update({proto_name(name): name for name in properties})
        seen = {}
        for key, member in value.items():
            field = names.get(key)
            if field is None:
                found.append(f"{path}: unknown field {json.dumps(key)}")
                continue
            if field in seen:
                found.append(f"{path}: field {field} given twice, as {seen[field]} and {key}")
            seen[field] = key
            _check(document, properties[field], member, f"{path}.{key}", found, **options)
        return
    if kind == "array":
        if not isinstance(value, list):
            return wrong("an array")
        for index, item in enumerate(value):
            _check(document, schema.get("items", {"type": "any"}), item, f"{path}[{index}]", found, **options)
        return
    if kind == "boolean":
        if not isinstance(value, bool):
            wrong("a boolean")
        return
    if kind == "integer":
        bounds = UINT32 if fmt == "uint32" else INT32
        if fmt not in (None, "int32", "uint32"):
            raise ValueError(f"{path}: integer format {fmt} is not known to this validator")
        if not _integer(value, bounds):
            wrong(f"an integer ({fmt or 'int32'})")
        return
    if kind == "number":
        if fmt not in (None, "float", "double"):
            raise ValueError(f"{path}: number format {fmt} is not known to this validator")
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            wrong(f"a number ({fmt or 'double'})")
        return
    if kind == "string":
        if not isinstance(value, str):
            return wrong("a string" + (f" ({fmt})" if fmt else ""))
        if "enum" in schema:
            allowed = schema["enum"]
            if value not in allowed and not (options["enum_any_case"] and value.upper() in {a.upper() for a in allowed}):
                wrong("one of " + ", ".join(allowed))
            return
        if fmt in ("int64", "uint64"):
            bounds = INT64 if fmt == "int64" else UINT64
            if not DECIMAL.fullmatch(value) or not bounds[0] <= int(value) <= bounds[1]:
                wrong(f"a decimal string ({fmt})")
        elif fmt == "google-datetime":
            if not DATETIME.fullmatch(value) or not _is_date(value):
                wrong("an RFC 3339 timestamp (google-datetime)")
        elif fmt == "google-duration":
            if not DURATION.fullmatch(value):
                wrong("a duration such as 3.5s (google-duration)")
        elif fmt == "byte":
            if not BASE64.fullmatch(value):
                wrong("base64 (byte)")
            else:
                try:
                    base64.urlsafe_b64decode(value.replace("+", "-").replace("/", "_") + "=" * (-len(value) % 4))
                except ValueError:
                    wrong("base64 (byte)")
        elif fmt not in (None, "google-fieldmask"):
            raise ValueError(f"{path}: string format {fmt} is not known to this validator")
        return
    raise ValueError(f"{path}: schema type {kind!r} is not known to this validator")


def _is_date(text):
    """Whether the calendar part of a timestamp is a real day (no February 30th)."""
    try:
        datetime.strptime(text[:10], "%Y-%m-%d")
    except ValueError:
        return False
    return True


def fields(document: dict, root: str):
    """Every field reachable from schema `root`, depth first, as (path, property schema, owning schema id): the path is
    a tuple of JSON names from the root (`("message", "android", "ttl")`). A schema reached again inside itself is not
    entered again (Google's documents may recurse)."""

    def walk(schema_id, path, inside):
        schema = document["schemas"][schema_id]
        for name, prop in sorted(schema.get("properties", {}).items()):
            yield path + (name,), prop, schema_id
            target = prop.get("$ref")
            if "$ref" in prop.get("items", {}):
                raise ValueError(f"{'.'.join(path + (name,))}: a list of messages; this walk names no list elements")
            if target and target not in inside and _is_message(document["schemas"][target]):
                yield from walk(target, path + (name,), inside | {target})

    yield from walk(root, (), {root})


def _is_message(schema):
    """An object schema of named fields (possibly none), not a map."""
    return schema.get("type") == "object" and "additionalProperties" not in schema


def messages(document: dict, root: str):
    """Every object schema with named fields reachable from `root` (maps excluded), as (path, schema id): the root
    itself at path `()`."""
    yield (), root
    for path, prop, _ in fields(document, root):
        target = prop.get("$ref")
        if target and _is_message(document["schemas"][target]):
            yield path, target
