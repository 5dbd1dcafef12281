"""The package graph keeps its shape: the stages of a webhook stay apart, and only the executable links the emulator.

Read from the manifest (`swift package dump-package`) and from every `import` in the sources, so a dependency that
comes back either way fails here.
"""
import json
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

HTTP = {"Hummingbird", "HummingbirdCore", "AsyncHTTPClient", "NIOHTTP1", "NIOHTTPTypes", "HTTPTypes",
        "OpenAPIRuntime", "OpenAPIHummingbird"}
SERVER = {"Hummingbird", "HummingbirdCore", "NIOHTTP1", "NIOHTTPTypes", "OpenAPIRuntime", "OpenAPIHummingbird"}
CONFIGURATION = {"Yams", "Configuration", "RelayServer"}
RELAY = {"RelayCore", "FCMClient", "DeliveryEngine", "RelayServer"}


@pytest.fixture(scope="module")
def targets():
    dump = json.loads(subprocess.run(["swift", "package", "dump-package"], cwd=ROOT, check=True, capture_output=True,
                                     text=True).stdout)
    graph = {}
    for target in dump["targets"]:
        names = set()
        for dependency in target["dependencies"]:
            kind, value = next(iter(dependency.items()))
            names.add(value[0])
        graph[target["name"]] = {"type": target["type"], "dependencies": names, "imports": imports(target)}
    return graph


def imports(target):
    folder = "Tests" if target["type"] == "test" else "Sources"
    path = ROOT / (target.get("path") or f"{folder}/{target['name']}")
    found = set()
    for source in path.rglob("*.swift"):
        found |= set(re.findall(r"^(?:@testable |@_exported |package |public |internal )*import\s+(?:\w+\s+)?(\w+)",
                                source.read_text(), re.M))
    return found


def uses(target, modules):
    return (target["dependencies"] | target["imports"]) & modules


def test_the_core_imports_no_http(targets):
    assert uses(targets["RelayCore"], HTTP | {"NIOCore", "NIOPosix"} | RELAY) == set()


def test_the_fetch_load_chart_is_a_target_of_its_own_that_only_the_console_and_simulate_use(targets):
    # Issue #51: the chart's drawing, font and PNG encoder left RelayCore, which holds the relay's core only.
    chart = targets["LoadChart"]
    assert chart["dependencies"] | (chart["imports"] - {"Foundation", "Testing"}) == set()
    users = {name for name, target in targets.items() if "LoadChart" in target["dependencies"] | target["imports"]}
    assert users == {"RelayServer", "rc-relay", "LoadChartTests"}
    core = ROOT / "Sources/RelayCore"
    drawing = [source.relative_to(ROOT).as_posix() for source in core.rglob("*.swift")
               if re.search(r"\b(?:PNG|SVG|Canvas|ChartFont|FetchLoad)\w*\b", source.read_text())]
    assert drawing == []
    server = [source.relative_to(ROOT).as_posix() for source in (ROOT / "Sources/RelayServer").rglob("*.swift")
              if "import LoadChart" in source.read_text()]
    assert server and all(path.startswith("Sources/RelayServer/Console/") for path in server), server


def test_the_fcm_client_knows_no_webhooks_or_routes(targets):
    assert uses(targets["FCMClient"], {"RelayCore", "DeliveryEngine", "RelayServer", "Hummingbird", "FCMEmulator"}) == set()


def test_the_store_imports_no_http_and_no_configuration(targets):
    assert uses(targets["RelayStore"], HTTP | CONFIGURATION | {"FCMEmulator", "RelayCore", "FCMClient"}) == set()


def test_only_the_store_talks_to_postgresql(targets):
    for name, target in targets.items():
        if name != "RelayStore" and target["type"] != "test":
            assert uses(target, {"PostgresNIO", "_ConnectionPoolModule"}) == set(), name
    assert uses(targets["DeliveryEngine"], {"RelayStore"}) == set()


def test_the_delivery_engine_imports_no_http_server_no_configuration_and_no_fcm_client(targets):
    engine = targets["DeliveryEngine"]
    # The engine owns its seams: a MessageSender failing with its own SendFailure, NIO's lock; RelayServer adapts the
    # FCM client to it.
    assert uses(engine, SERVER | CONFIGURATION | {"FCMEmulator", "FCMClient", "AsyncHTTPClient"}) == set()
    assert "RelayCore" in engine["dependencies"]
    assert uses(targets["DeliveryEngineTests"], {"FCMClient"}) == set()


def test_the_emulator_imports_no_relay_code(targets):
    assert uses(targets["FCMEmulator"], RELAY) == set()


def test_only_the_executable_and_tests_link_the_emulator(targets):
    linking = {name for name, target in targets.items() if "FCMEmulator" in target["dependencies"] | target["imports"]}
    assert {name for name in linking if targets[name]["type"] != "test"} == {"rc-relay"}


def test_nothing_imports_the_executable(targets):
    assert [name for name, target in targets.items() if uses(target, {"rc-relay", "rc_relay"})] == []


def test_every_import_is_a_declared_dependency_of_our_own_targets(targets):
    # A module imported but not declared builds only by accident of build order; the graph above would not see it.
    ours = set(targets)
    for name, target in targets.items():
        undeclared = (target["imports"] & ours) - target["dependencies"] - {name}
        assert undeclared == set(), f"{name} imports {undeclared} without declaring it"


def test_the_layout_table_names_every_target(targets):
    text = (ROOT / "docs/development.md").read_text()
    table = text.split("| target | holds |")[1].split("\n\n")[0]
    named = set(re.findall(r"^\| `([\w-]+)` \|", table, re.M))
    ours = {name for name, target in targets.items() if target["type"] != "test" and target["type"] != "plugin"}
    assert ours - named == set(), f"docs/development.md's layout table lacks {ours - named}"


def test_no_source_file_is_over_300_lines():
    # Small rooms: a file holds one concern. Generated code aside: a file whose first line says which script made it
    # (the embedded discovery documents, the chart's glyphs), and that script must exist.
    long, generated = {}, []
    for path in (ROOT / "Sources").rglob("*.swift"):
        lines = path.read_text().splitlines()
        made = re.match(r"// Generated by (scripts/[\w-]+)", lines[0]) if lines else None
        if made:
            assert (ROOT / made.group(1)).exists(), f"{path.name} names {made.group(1)}, which does not exist"
            generated.append(path.name)
        elif len(lines) > 300:
            long[str(path.relative_to(ROOT))] = len(lines)
    assert long == {}
    assert sorted(generated) == ["ChartFont+Glyphs.swift", "GoogleDocuments.swift"]


# Where events are kept and who delivers a project are decided behind one seam (RelayStore/Admission.swift), with its
# implementations side by side in the RelayStore target: in memory, the spool on disk, PostgreSQL (its SQL in Postgres/,
# its lease, claim and outbox policy in Postgres/Replicas/). RelayServer wires one in Admit/; the configuration names
# them too, since it reads the keys users write (`store.postgres`, `delivery.spoolDirectory`).
STORAGE_WORDS = re.compile(r"\bpostgres|\blease|spool ?(?:file|dir)|FileSpool|OutboxSpool|\boutbox", re.I)
STORAGE_PLACES = ("Sources/RelayStore/", "Sources/RelayServer/Admit/", "Sources/RelayServer/Configuration/")
# What the rest of the relay may name of the store: the seam and its values, its error type, and what it asks of the
# relay (the host and the metrics, answered in Admit/).
SEAM = {"Admission", "Admitted", "PolledAdmission", "Kept", "PollClaim", "StoreError"}


def test_no_file_outside_the_storage_names_one():
    named = []
    for source in sorted((ROOT / "Sources").rglob("*.swift")):
        relative = source.relative_to(ROOT).as_posix()
        if relative.startswith(STORAGE_PLACES):
            continue
        for number, line in enumerate(source.read_text().splitlines(), 1):
            if STORAGE_WORDS.search(line):
                named.append(f"{relative}:{number}: {line.strip()}")
    assert named == [], "\n".join(named)


def store_names():
    """Every type the RelayStore target declares for the package."""
    names = set()
    for source in (ROOT / "Sources/RelayStore").rglob("*.swift"):
        names |= set(re.findall(r"^package (?:final )?(?:class|struct|enum|protocol|actor) (\w+)", source.read_text(), re.M))
    return names


def test_the_three_storages_sit_side_by_side_behind_one_seam_in_the_store():
    store = ROOT / "Sources/RelayStore"
    assert re.search(r"^package protocol Admission: Sendable", (store / "Admission.swift").read_text(), re.M)
    implementations = {"MemoryAdmission": store / "MemoryAdmission.swift", "SpoolAdmission": store / "Spool/SpoolAdmission.swift",
                       "ProjectLeases": store / "Postgres/Replicas/ProjectLeases+Admission.swift"}
    for name, path in implementations.items():
        assert re.search(rf"^(?:package struct {name}: \w+|extension {name}: Admission)", path.read_text(), re.M), name
    names = store_names()
    assert SEAM <= names and set(implementations) <= names
    # Outside the wiring (Admit/) and the configuration, RelayServer names only the seam of the store: a second store
    # (Redis, Spanner) is new files in RelayStore, its keys in Configuration/ and a line in Admit/Storage.swift.
    named = []
    for source in sorted((ROOT / "Sources").rglob("*.swift")):
        relative = source.relative_to(ROOT).as_posix()
        if relative.startswith(STORAGE_PLACES):
            continue
        text = source.read_text()
        if "import RelayStore" in text:
            named += [f"{relative}: {name}" for name in sorted(names - SEAM) if re.search(rf"\b{name}\b", text)]
    assert named == [], "\n".join(named)


def test_one_place_builds_an_events_keys():
    # Issue #51: the webhook, the catch-up poll and the admin API once each spelled "<project>/version/<n>" themselves.
    built = {source.relative_to(ROOT).as_posix()
             for source in (ROOT / "Sources").rglob("*.swift")
             for line in source.read_text().splitlines()
             if re.search(r'/(?:version|id)/\\\(|"webhook/', line) and not line.strip().startswith("//")}
    assert built == {"Sources/DeliveryEngine/Spool/Spool.swift"}


def test_the_engine_mentions_no_target_by_name():
    # Issue #51: FCM's retry rules, error codes, log words, span and metric names are FCM's sender's
    # (RelayServer/Deliver/FCMMessageSender.swift), an HTTP target's its own (HTTPTargetSender.swift); each classifies
    # its own failures (SendFailure.Kind) and names its service; a ping carries a PingPayload that the engine reads only
    # as its sender's name, a loggable text and an audience.
    mentions = [f"{source.relative_to(ROOT).as_posix()}: {line.strip()}"
                for source in sorted((ROOT / "Sources/DeliveryEngine").rglob("*.swift"))
                for line in source.read_text().splitlines()
                if re.search(r"fcm|slack|google ?chat|standard ?webhook|HTTPCall|HTTPTarget", line, re.I)]
    assert mentions == []


def test_one_entry_point_plans():
    # Issue #51: a webhook, a poll, a swept outbox event and a replayed spool once planned through four functions.
    # Planner.plan(_:since:in:logger:) is the one; the routing step it calls (ProjectDirectory.Pipeline's) has no
    # other caller, and the store's StoreHost answers with it.
    server = ROOT / "Sources/RelayServer"
    sources = {source.relative_to(ROOT).as_posix(): source.read_text() for source in server.rglob("*.swift")}
    declared = sorted(path for path, text in sources.items() if re.search(r"\bfunc plan\(", text))
    assert declared == ["Sources/RelayServer/Admit/Storage.swift", "Sources/RelayServer/Application/ProjectDirectory.swift",
                        "Sources/RelayServer/Route/Planner.swift"], declared
    routing = sorted(path for path, text in sources.items() if re.search(r"pipeline\.plan\(for:", text))
    assert routing == ["Sources/RelayServer/Route/Planner.swift"], routing
    callers = sorted(path for path, text in sources.items() if re.search(r"\bplanner\.plan\(", text))
    assert callers and all(re.search(r"planner\.plan\(\w+|planner\.plan\(\$0", line)
                           for text in sources.values() for line in text.splitlines() if "planner.plan(" in line)
    assert "planner.plan(for" not in "".join(sources.values())
    assert "func plan(for record" not in sources["Sources/RelayServer/Application/ConfigurationStore.swift"]


def relay_server_sources():
    return {source.relative_to(ROOT).as_posix(): source.read_text() for source in (ROOT / "Sources/RelayServer").rglob("*.swift")}


def callers(sources, pattern):
    return sorted(path for path, text in sources.items()
                  if any(re.search(pattern, line) and not line.strip().startswith("//") for line in text.splitlines()))


def test_one_function_admits_plans_delivers_and_keeps_an_event():
    # Issue #51: the webhook and the catch-up poll each wrote admit → plan → deliver → keep themselves. EventPath.relay
    # is the one; its bringers name none of those steps. (A kept outbox event, admitted already, is the store's sweep's:
    # it plans through StoreHost, the planner's one entry point, and hands the engine the kept event.)
    sources = relay_server_sources()
    path = "Sources/RelayServer/Admit/EventPath.swift"
    assert callers(sources, r"\.admit\(|\.admitPolled\(") == [path]
    assert callers(sources, r"\bengine\.deliver\(|\.deliverKept\(") == [path]
    assert callers(sources, r"admission\.keep\(") == [path]
    assert callers(sources, r"\bplanner\.plan\(") == [path, "Sources/RelayServer/Admit/Storage.swift",
                                                      "Sources/RelayServer/Application/RelayApplication.swift"]
    assert callers(sources, r"\bpath\.relay\(") == ["Sources/RelayServer/Receive/Poll/CatchUpPoller.swift",
                                                    "Sources/RelayServer/Receive/WebhookController.swift"]


def test_the_newest_relayed_mark_lives_in_one_place():
    # Issue #51: the webhook and the poll each noted the mark by hand, the poll in two places (here and in the store).
    # RelayMarks is the one door: only the event path says a version was relayed, only the poll adopts one.
    sources = relay_server_sources()
    marks = "Sources/RelayServer/Admit/RelayMarks.swift"
    assert callers(sources, r"\.note\(\w+, |\.noteRelayed\(") == [marks]
    assert callers(sources, r"RelayedVersions\(") == ["Sources/RelayServer/Admit/Storage.swift"]
    assert callers(sources, r"\bmarks\.relayed\(") == ["Sources/RelayServer/Admit/EventPath.swift"]
    assert callers(sources, r"\bmarks\.adopt\(") == ["Sources/RelayServer/Receive/Poll/CatchUpPoller.swift"]


# The HTTP target's own files (issue #51): its definition, validation, call and bodies in RelayCore, its sender and its
# serving (sender, admin view, file checks) in RelayServer. A third kind is files like these and one line in
# TargetKinds.swift.
HTTP_TARGET_FILES = {
    "Sources/RelayCore/Route/HTTPTarget.swift", "Sources/RelayCore/Route/HTTPCall.swift",
    "Sources/RelayCore/Route/HTTPTargetKind.swift", "Sources/RelayCore/Route/PublishNotice+Formats.swift",
    "Sources/RelayServer/Deliver/HTTPTargetSender.swift", "Sources/RelayServer/Deliver/HTTPTargetKind+Serving.swift",
}
HTTP_TARGET_NAMES = r"\b(?:HTTPTarget|HTTPCall|HTTPTargetKind|HTTPTargetSender|PublishNotice)\b|RouteDefinition\.Webhook\b|\b(?:route|definition|\$0)\.webhook\b|routes\[\]\.webhook"


def test_a_kind_of_target_is_its_own_files_and_one_line_of_wiring():
    # Issue #51: an HTTP target once took six edits beside its files (a PingPayload case, RouteDefinition and the
    # known keys, Route.init, RouteTable.pings, the senders' line, the admin views). Route, RouteTable, the loader,
    # the senders, the admin API and the console now read the kinds TargetKinds.all lists, and nothing else names one.
    named = [f"{source.relative_to(ROOT).as_posix()}: {line.strip()}"
             for source in sorted((ROOT / "Sources").rglob("*.swift"))
             if source.relative_to(ROOT).as_posix() not in HTTP_TARGET_FILES
             for line in source.read_text().splitlines()
             if re.search(HTTP_TARGET_NAMES, line) and not line.strip().startswith("///")]
    assert named == ["Sources/RelayServer/Deliver/TargetKinds.swift: static let all: [any ServedTargetKind] = [HTTPTargetKind()]"], \
        "\n".join(named)
    for path in HTTP_TARGET_FILES:
        assert (ROOT / path).is_file(), path
    # The files a kind takes, as docs/development.md lists them.
    development = (ROOT / "docs/development.md").read_text()
    for path in HTTP_TARGET_FILES | {"Sources/RelayServer/Deliver/TargetKinds.swift"}:
        assert path.removeprefix("Sources/") in development, path


def test_the_webhooks_walk_in_development_md_names_files_that_exist():
    # Issue #51 asked the walk to shrink to match the code, and to count its files: each one it names is a file, and the
    # count it gives is theirs.
    development = (ROOT / "docs/development.md").read_text()
    walk = development[development.index("A webhook's walk through RelayServer"):]
    walk = walk[:walk.index("\n\n")]
    crossed = walk[:walk.index("**")]
    files = re.findall(r"`((?:Receive|Admit|Route)/\w+)`", crossed)
    assert files and all((ROOT / "Sources/RelayServer" / f"{name}.swift").is_file() for name in files), files
    count = re.search(r"\*\*(\d+) files\*\*", walk).group(1)
    assert int(count) == len(set(files)), (count, files)
