"""A seeded fault campaign: several replicas, one truth.

    python Tests/interop/campaign.py --seed 7 --minutes 10 [--replicas 3] [--projects 2] [--nginx]

Runs a real cluster on loopback: `rc-relay serve` replicas on one throwaway PostgreSQL (postgres.Cluster), one
`rc-relay emulator` per project for FCM and Remote Config (an emulator trusts one project's key, so with several
projects a small nginx routes Google's paths to each project's emulator), optionally the deploy kit's nginx in front
of the replicas. A publisher publishes real templates in Remote Config (and rolls some back to an earlier version)
and announces most of them by signed webhooks (bare versions, CloudEvents binary and structured) to a random replica,
some redelivered to another with the same webhook-id; the rest are left for catch-up polling. A seeded scheduler
meanwhile kills, pauses and restarts replicas (the lease holder among them), pauses and restarts PostgreSQL, and makes
FCM and Remote Config fail or slow down; and acts as operators and odd senders do: an admin send of a far version
(once right before a restart of the project's holder), a signed outlier version, a reset of a project's marks, a
retry of a ping FCM refused for good, a discard of a dead ping. Both deal every fault kind, operator
act and publish mode first, so even a short run carries out the campaign's minimum. At the
end it stops injecting, waits until the system is quiet, and `check` (a pure function over what the emulator
recorded, what each replica process logged of its requests to FCM and its leases, what the senders were answered,
what was published and which faults ran when, on which process) decides whether the replicas told one truth. docs/replicas.md ("The invariants, as the checker implements them") is its specification.

The random number generator decides what happens (faults, their targets by role, publishes, pauses); the machine
decides the exact interleaving. A seed replays the same plan; a violation prints the events around it.
"""
import argparse
import collections
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import requests  # noqa: E402
from cloudevents.core.bindings.http import to_binary_event, to_structured_event  # noqa: E402
from cloudevents.core.v1.event import CloudEvent  # noqa: E402

from conftest import LINES, SECRET, signed_headers, until  # noqa: E402
from postgres import Cluster, Missing, free_port  # noqa: E402
from receivers import Receiver  # noqa: E402
from standardwebhooks.webhooks import Webhook, WebhookVerificationError  # noqa: E402

BINARY = os.environ.get("RC_RELAY_BIN") or str(Path(__file__).resolve().parents[2] / ".build" / "debug" / "rc-relay")
# The test-only `rc-relay serve` with bugs planted on purpose (Tests/PlantedRelay; docs/replicas.md, "Planted bugs"),
# built beside the tests: the campaign shows its checker catches each. `rc-relay` itself has no way to plant any.
PLANTED_BINARY = os.environ.get("RC_RELAY_PLANTED_BIN") or str(Path(BINARY).with_name("rc-relay-planted"))
PLANTS = ["lapse-check", "epoch-check", "poll-epoch", "progress", "shared-mark"]
ADMIN = "campaign-admin-token-0123456789"
UPDATED = "google.firebase.remoteconfig.remoteConfig.v1.updated"

# The fault log's kinds, as docs/replicas.md's table names them: a kill mid-wave or mid-poll is logged `kill`, a
# rolling restart one `term` per replica it stops. The plan deals each once, in a seeded order, before it draws.
FAULT_KINDS = ["kill", "pause", "term", "pg_pause", "pg_restart", "fcm_503", "fcm_429", "fcm_slow", "rc_503", "rc_slow"]
# The plan's faults: each kind, and the flavours that aim at one guarantee each (docs/replicas.md, "Planted bugs"):
# a kill mid-wave once the immediate routes' pings are accepted (their progress), a kill of the holder right after a
# version left for the poller (the shared mark on take-over), a holder paused mid-wave that wakes while PostgreSQL is
# stopped (the fence's own bound). The deck deals each once, in a seeded order, before the plan draws by weight.
# A kill mid-wave and a frozen holder are dealt twice: each misses its aim now and then (a newer version published just
# before the kill stands the older one's routes down; the woken holder's due turns may be ones the new holder has not
# sent yet), and a short campaign must still catch the bug each is aimed at 9 times in 10 (docs/replicas.md).
FAULT_DECK = ["kill", "kill_mid_wave", "kill_mid_wave", "kill_mid_poll", "kill_after_unannounced", "pause",
              "pause_waking_into_db_stall", "freeze_while_the_lease_moves", "freeze_while_the_lease_moves", "term", "pg_pause",
              "pg_restart", "fcm_503", "fcm_429", "fcm_slow", "rc_503", "rc_slow"]
# What operators and odd senders do, dealt by the scheduler like its faults (docs/replicas.md, "What it does"): an
# operator's `POST /admin/send` of a far version (1,000,000 and more) to a random replica; an odd sender's signed bare
# version 9223372036854775807, an outlier (docs/webhook.md, version numbers); and an operator's far send to a project's
# holder followed at once by a graceful restart of that holder (SIGTERM, waited, started again) and a real version
# announced by a webhook and one left for the poller, which must still reach their topics (issue #49: the far version
# that silenced a project). Each is recorded in the record's `operator` list under its act.
# What operators do through the admin API besides: a reset of a project's marks; a retry of a ping FCM refused for good
# (a 400 queued in its FCM); a discard of a dead ping (503s whose Retry-After is past the retry deadline).
OPERATOR_ACTS = ["operator_send", "outlier", "marks_reset", "operator_retry", "operator_discard", "operator_send_then_restart"]
# The far versions: an operator's send is FAR plus a seeded number below FAR; an outlier is int64's largest.
FAR = 1_000_000
OUTLIER = 9223372036854775807
# Storage modes (docs/replicas.md, "Every storage mode"): replicas on PostgreSQL, one replica with the spool, one in
# memory, each with the faults its docs say it survives. The spool's replica is killed, paused and restarted (it
# replays what it acknowledged); memory keeps nothing across a stop, so it gets FCM's and Remote Config's storms and
# slow answers only, and the operator's acts but the restart. Each mode's deck, the fault kinds its minimum counts, and
# the operator's acts it counts.
STORAGES = ["postgres", "spool", "memory"]
STORAGE_DECKS = {
    "postgres": FAULT_DECK + OPERATOR_ACTS,
    "spool": ["kill", "kill_mid_wave", "kill_after_unannounced", "pause", "term", "fcm_503", "fcm_429", "fcm_slow", "rc_503",
              "rc_slow"] + OPERATOR_ACTS,
    "memory": ["fcm_503", "fcm_429", "fcm_slow", "rc_503", "rc_slow", "operator_send", "outlier", "marks_reset", "operator_retry"],
}
STORAGE_KINDS = {
    "postgres": FAULT_KINDS,
    "spool": ["kill", "pause", "term", "fcm_503", "fcm_429", "fcm_slow", "rc_503", "rc_slow"],
    "memory": ["fcm_503", "fcm_429", "fcm_slow", "rc_503", "rc_slow"],
}
STORAGE_ACTS = {storage: [act for act in OPERATOR_ACTS if act in STORAGE_DECKS[storage]] for storage in STORAGES}
# How a publish is announced; the plan deals each mode MODE_MINIMUM times, in a seeded order, before it draws. A
# `rollback` is the emulator's rollback to an earlier version, announced by a CloudEvent (binary or structured).
MODES = ["bare", "binary", "structured", "poll", "rollback"]
MODE_MINIMUM = 3
# Faults that stop a replica's process with its work under way: rules A and B (docs/replicas.md). A `term` hands its
# deliveries over and writes their progress first, so it excuses nothing.
STOPS = {"kill", "pause"}
# Faults that stop the database: rule C.
DATABASE_FAULTS = {"pg_pause", "pg_restart"}
# How long after FCM accepted a ping its progress may still be on its way to the database (rules A and C).
PROGRESS = 1.0
# The replicas' log lines and FCM's record (receivedAt) are both written to the millisecond, truncated: a request
# logged in the same millisecond as a record, or the next, may have started before it.
MILLISECOND = 0.001
# The log line a replica prints right before each request to FCM, the lines that end an attempt (with the outcome
# each names), and the line of a lease taken.
SENDING = "sending ping to "  # and the service: `FCM`, `webhook` (an HTTP target's)
OUTCOMES = {"ping accepted by FCM": "accepted", "ping validated by FCM": "validated", "ping will be retried": "retried",
            "ping refused by FCM for good": "refused", "ping is dead: retries ran out": "dead",
            "ping accepted by webhook": "accepted", "ping validated by webhook": "validated",
            "ping refused by webhook for good": "refused"}
LEASE_TAKEN = "project lease taken"
# How an outcome line's `error` says no answer came (a connection lost, a read timeout): FCM may have accepted it.
NO_ANSWER = "could not be reached"
# The line an operator's `POST /admin/send` logs first, with its project and version: its pings' `sending ping to FCM`
# lines carry its request_id but neither of those, so a send of it takes them from this line.
ADMIN_SEND = "admin send"
# The line an operator's `POST /admin/deliveries/{id}/retry` logs first, with the project, route and version: its
# pings' sends carry its request_id, and are the operator's (docs/replicas.md, "Retries and discards").
ADMIN_RETRY = "admin retry"
# The line of a poll that adopted Remote Config's current version without a ping (rule R's `reset-adopted`).
ADOPTED = "poll: adopted the current version without a ping"
# What the report counts and lists, in its order.
RULES = ["A", "B-fault", "B-same-replica", "C", "covers-wider", "reverted", "reset-adopted", "reset-stale", "discarded", "retried"]
INVARIANTS = ["lost", "newest", "duplicates", "waves", "stale", "known", "settled", "campaign"]

# The routes every project has, as plain data the checker reads too. Each message carries its route in data.ROUTE
# and its version in data.CONFIG_VERSION.
ROUTES = [
    {"name": "plain", "topic": "PUSH_RC"},
    {"name": "aware", "topic": "RC_ALL", "audience": {"ios_ja": "lang_ja", "ios_ko": "lang_ko"}},
    {"name": "quiet", "topic": "RC_QUIET", "debounceSeconds": 2},
    {"name": "waved", "waves": {"shards": 4, "spreadSeconds": 4, "topic": "RC_WAVE_{shard}"}},
    # An HTTP target (docs/targets.md): a signed call per version to the campaign's receiver, which answers 503 or 429
    # now and then (HOOK_FAULTS). Its calls are the route's pings, its audience the route's name.
    {"name": "notice", "webhook": True},
]
# The receiver's storm, drawn per call by its own seeded generator: 503, or 429 with a Retry-After of a second.
HOOK_FAULTS = [(0.08, (503, {})), (0.04, (429, {"Retry-After": "1"}))]
HOOK_SECRET = "whsec_" + __import__("base64").b64encode(b"the campaign's HTTP target secret").decode()
# How long the stream may go on past --minutes to deal the plan's decks (a campaign thread that died would otherwise
# hold the other one up for ever); what is still missing then fails the `campaign` check.
OVERTIME = 300
# What a publish changes in the template: a conditional value of a mapped condition (the aware route narrows), both,
# or the default (everyone).
CHANGES = [["ios_ja"], ["ios_ko"], ["ios_ja", "ios_ko"], ["default"]]
# A template's values, as the campaign keeps them per version: the default and each mapped condition's value.
VALUES = ["default", "ios_ja", "ios_ko"]


# ----------------------------------------------------------------------------------------------------------------
# The checker: a pure function over plain data (docs/replicas.md, "The invariants, as the checker implements them").
# ----------------------------------------------------------------------------------------------------------------


def epoch(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def targets_of(audience):
    """The topics an audience names: a topic itself, a condition the topics it names."""
    named = re.findall(r"'([^']+)' in topics", audience)
    return frozenset(named) if named else frozenset([audience])


def parse_pings(messages):
    """The emulator's records as pings: project, route, audience (topic or condition), its topics, version, time,
    FCM's name for it, and seq (its place in the emulator's record, which orders the pings of one project exactly)."""
    pings = []
    for seq, recorded in enumerate(messages):
        message = recorded["message"]
        data = message.get("data", {})
        audience = message["topic"] if "topic" in message else message.get("condition", "?")
        pings.append({
            "project": recorded["project"], "route": data.get("ROUTE", "?"), "audience": audience,
            "targets": targets_of(audience), "version": as_version(data.get("CONFIG_VERSION")),
            "time": epoch(recorded["receivedAt"]), "name": recorded.get("name"), "seq": seq, "send": None,
        })
    return pings


def parse_calls(calls, first_seq):
    """The receiver's record of an HTTP target's calls as pings: each call it accepted (2xx), by the project, route and
    version its body names, its webhook-id as its name, seq after the emulators' records (the receiver's order)."""
    pings = []
    for index, call in enumerate(calls):
        if call.get("status") is None or not 200 <= call["status"] < 300:
            continue
        pings.append({"project": call["project"], "route": call["route"], "audience": call["route"],
                      "targets": frozenset([call["route"]]), "version": as_version(call["version"]), "time": call["time"],
                      "name": call["name"], "seq": first_seq + index, "send": None, "signed": call["signed"]})
    return pings


def as_version(text):
    try:
        return int(text)
    except (TypeError, ValueError):
        return 0


# -- the replicas' logs: sends and leases ---------------------------------------------------------------------------


def route_name(route):
    """A send's route as the configuration names it: a wave's shard (`waved@0`) or another part (`#`) is its route."""
    return re.split(r"[@#]", route or "?", maxsplit=1)[0]


def json_line(line):
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def parse_log(process, pid, lines):
    """One replica process's log lines as (sends, leases, adoptions). Each `sending ping to FCM` line is a send
    (process name, pid, replica id, project, route, audience, version, delivery_id, attempt, start, line: its place in
    the log, `by`: the admin line it belongs to, if any) with the outcome of the later line of the same delivery_id and
    attempt (kind, end, fcm_message), or outcome None: the process ended with the request under way. A send of an
    operator's `admin send` or `admin retry` takes its project and version from that line (by request_id). Each
    `project lease taken` line is a lease (process, pid, replica, project, epoch, time), the process's own when the
    line names no replica; each `poll: adopted the current version without a ping` an adoption (process, pid,
    project, version, time)."""
    sends, leases, adoptions, under_way, asked = [], [], [], {}, {}
    for index, line in enumerate(lines):
        entry = json_line(line)
        if entry is None or "ts" not in entry:
            continue
        said, at = entry.get("msg", ""), epoch(entry["ts"])
        if said in (ADMIN_SEND, ADMIN_RETRY) and entry.get("request_id"):
            asked[entry["request_id"]] = entry
        elif said == ADOPTED:
            adoptions.append({"process": process, "pid": pid, "project": entry.get("project"),
                              "version": as_version(entry.get("version")), "time": at})
        elif said.startswith(SENDING):
            admin = asked.get(entry.get("request_id"), {})
            entry = {**admin, **entry}
            send = {"process": process, "pid": pid, "replica": entry.get("replica", ""), "project": entry.get("project"),
                    "route": entry.get("route", "?"), "audience": entry.get("audience", "?"),
                    "version": as_version(entry.get("version")), "delivery_id": entry.get("delivery_id"),
                    "attempt": as_version(entry.get("attempt")), "start": at, "line": index,
                    "outcome": None, "end": None, "fcm_message": None, "answer_lost": False, "by": admin.get("msg")}
            under_way[(send["delivery_id"], send["attempt"])] = send
            sends.append(send)
        elif said in OUTCOMES:
            send = under_way.pop((entry.get("delivery_id"), as_version(entry.get("attempt"))), None)
            if send:
                send.update(outcome=OUTCOMES[said], end=at, fcm_message=entry.get("fcm_message") or entry.get("webhook_message"),
                            answer_lost=NO_ANSWER in entry.get("error", ""))
        elif said.startswith(LEASE_TAKEN):
            leases.append({"process": process, "pid": pid, "replica": entry.get("replica", ""),
                           "project": entry.get("project"), "epoch": as_version(entry.get("epoch")), "time": at})
    return sends, leases, adoptions


def who(entry):
    """The process a send, a lease or a fault's detail names: replica-N and its pid (a restarted replica is another)."""
    return entry.get("process"), entry.get("pid")


def match_sends(pings, sends):
    """Sets each ping's `send`: the accepted send with the ping's FCM name; else, of the attempts with no outcome line
    (their process ended with the request under way) or whose answer was lost (`FCM could not be reached`: a read
    timeout after a pause, say, when FCM had accepted it) with the ping's project, route, audience and version, the
    latest that started before the ping (to the millisecond). A send is matched to one ping at most."""
    named = collections.defaultdict(list)
    for s in sends:
        if s["outcome"] == "accepted" and s["fcm_message"]:
            named[s["fcm_message"]].append(s)
    unfinished = [s for s in sends if s["outcome"] is None or s.get("answer_lost")]
    matched = set()
    for ping in sorted(pings, key=lambda p: p["seq"]):
        # FCM names each message once; an HTTP target's call keeps its webhook-id on every attempt: the latest
        # accepted attempt that started before the call came and is not another call's.
        send = max((s for s in named.get(ping["name"], []) if id(s) not in matched and s["start"] <= ping["time"] + MILLISECOND),
                   key=lambda s: (s["start"], s["line"]), default=None)
        if send is None:
            send = max((s for s in unfinished if id(s) not in matched and s["project"] == ping["project"]
                        and route_name(s["route"]) == ping["route"] and s["audience"] == ping["audience"]
                        and s["version"] == ping["version"] and s["start"] <= ping["time"] + MILLISECOND),
                       key=lambda s: (s["start"], s["line"]), default=None)
        if send is not None:
            matched.add(id(send))
        ping["send"] = send


# -- audiences ------------------------------------------------------------------------------------------------------


def shard_topics(route):
    waves = route["waves"]
    return [waves["topic"].replace("{shard}", str(k)) for k in range(waves["shards"])]


def required_targets(route, changed):
    """The topics a version must reach on `route`, from what it changed: a waved route every shard; a change-aware
    route only its mapped conditions' topics when the change is confined to their conditional values, otherwise its
    whole topic; any other route its topic."""
    if "waves" in route:
        return set(shard_topics(route))
    if "webhook" in route:
        return {route["name"]}  # an HTTP target: its receiver
    audience = route.get("audience")
    if audience and changed and all(c in audience for c in changed):
        return {audience[c] for c in changed}
    return {route["topic"]}


def covers(route, wider, narrower):
    """Whether every device of audience `narrower` is in audience `wider`: the same audience; the change-aware route's
    whole topic over a narrowed audience (its mapped topics, or a condition naming only them), whose devices all
    subscribe to it; or an audience naming every topic the other names."""
    if wider == narrower:
        return True
    mapped = set(route.get("audience", {}).values())
    if mapped and wider == route.get("topic") and targets_of(narrower) <= mapped:
        return True
    return targets_of(narrower) <= targets_of(wider)


def parts_of(route, target):
    """The parts of a target topic's devices that the route's audiences reach whole, each with the values its devices
    read: on a change-aware route, each mapped topic's (the default and its condition's value) and, for its whole
    topic, the rest of it too (the default alone: named by the topic itself); on any other route the topic's (every
    value)."""
    audience = route.get("audience") or {}
    mapped = {topic: condition for condition, topic in audience.items()}
    if not audience:
        return [(target, VALUES)]
    if target in mapped:
        return [(target, ["default", mapped[target]])]
    return [(topic, ["default", condition]) for topic, condition in sorted(mapped.items())] + [(target, ["default"])]


def values_at(timeline, initial, t):
    """The values of the template current at `t`: the latest publish recorded by then (`timeline`, in time order), or
    the project's initial values."""
    current = initial
    for publish in timeline:
        if publish["time"] > t:
            break
        current = publish["values"]
    return current


def reverted(route, publish, target, pings, timeline, initial):
    """Whether what `publish` changed for `target`'s devices was undone before they were told (rule "reverted"): for
    each part of them (parts_of), the values they read are, in this version or a later one published before any ping
    reached them again, what they were in the template current when a ping last reached them before this version was
    published (a ping makes devices fetch the template current then; none: the initial one). `pings` are every ping of
    the route, an operator's and an outlier's too. Never when a publish's values are unknown (an older record)."""
    if initial is None or any("values" not in p for p in timeline):
        return False
    for part, keys in parts_of(route, target):
        reached = [p["time"] for p in pings if covers(route, p["audience"], part)]
        before = [t for t in reached if t < publish["time"]]
        told = values_at(timeline, initial, before[-1]) if before else initial
        again = min((t for t in reached if t >= publish["time"]), default=float("inf"))
        if not any(later["version"] >= publish["version"] and later["time"] < again
                   and all(later["values"][k] == told[k] for k in keys) for later in timeline):
            return False
    return True


# -- the rules: what excuses a ping, and nothing else ---------------------------------------------------------------


def accepted_at(ping):
    """When FCM accepted the ping: its sender's `ping accepted by FCM` line; for a send its process never finished
    (it ended with the request under way), when FCM recorded the ping."""
    send = ping["send"]
    return send["end"] if send["outcome"] == "accepted" else ping["time"]


def stop_of(faults, process, after, until):
    """A `kill` or `pause` of `process` (its name and pid) that began between `after` and `until`."""
    return next((f for f in faults if f["kind"] in STOPS and who(f["detail"]) == process
                 and after <= f["start"] <= until), None)


def rule_a(first, second, faults):
    """A second send after its sender stopped: the first send's replica R was killed or paused after the first
    request started and at most PROGRESS after FCM accepted it, and another replica sent the second."""
    one, two = first["send"], second["send"]
    if one is None or two is None or who(one) == who(two):
        return None
    return stop_of(faults, who(one), one["start"], accepted_at(first) + PROGRESS)


def rule_c(first, second, faults, leases):
    """A second send across a database stop: FCM accepted the first while PostgreSQL was stopped or at most PROGRESS
    before it stopped, and another replica sent the second after taking the project's lease once the first was
    accepted."""
    one, two = first["send"], second["send"]
    if one is None or two is None or who(one) == who(two):
        return None
    accepted = accepted_at(first)
    stop = next((f for f in faults if f["kind"] in DATABASE_FAULTS
                 and f["start"] - PROGRESS <= accepted <= (f["end"] if f["end"] is not None else f["start"])), None)
    took = any(who(lease) == who(two) and lease["project"] == second["project"] and accepted < lease["time"] <= two["start"]
               for lease in leases)
    return stop if stop and took else None


def second_send_rule(one, two, faults, leases):
    """Which rule excuses a version's second ping to an audience: "A", "C" or None. The first send is the one whose
    request started first (a request paused in flight reaches FCM after a later one: seed 60601), by its sender's
    line; a ping no send line names counts from when FCM recorded it."""
    first, second = sorted((one, two), key=lambda ping: (ping["send"]["start"] if ping["send"] else ping["time"], ping["seq"]))
    if rule_a(first, second, faults):
        return "A"
    if rule_c(first, second, faults, leases):
        return "C"
    return None


def started_before(one, two):
    """Whether send `one`'s request started before send `two`'s, both of one process: by their log lines' times,
    and in the same millisecond by their order in the log."""
    return (one["start"], one["line"]) < (two["start"], two["line"])


def stale_rule(older, newers, faults, after_reset=None):
    """Which rule excuses an older version's ping recorded after the newer ones that cover it: "B-fault" (a kill or
    pause of its own sender began after its request started and before FCM recorded it), "B-same-replica" (its
    replica sent every one of the newer ones, and started it after the older one), "reset-stale" (`after_reset`, rule
    R: a marks reset between them), or None."""
    send = older["send"]
    if send is None:
        return None
    if stop_of(faults, who(send), send["start"], older["time"]):
        return "B-fault"
    if all(n["send"] is not None and who(n["send"]) == who(send) and started_before(send, n["send"]) for n in newers):
        return "B-same-replica"
    if after_reset and after_reset(older, newers):
        return "reset-stale"
    return None


class Operators:
    """What an operator did to one project, as the rules of docs/replicas.md read it ("R. After a marks reset",
    "Retries and discards"): the times of the resets answered 200 (from their requests), the polls' adoptions of the
    current version (`record["adoptions"]`), and the (route, version) pairs a discard answered 200/202 gave up."""

    def __init__(self, record, project):
        acts = operator_acts(record, project)
        answered = [a for a in acts if any(x.get("status") in ANSWERED.get(a["kind"], (200,)) for x in a.get("answers") or [])]
        self.resets = sorted(a["time"] for a in answered if a["kind"] == "reset")
        self.discarded = {(a["route"], int(a["version"])) for a in answered if a["kind"] == "discard"}
        self.discards = [(a["route"], int(a["version"]), a["time"]) for a in answered if a["kind"] == "discard"]
        self.adoptions = sorted((a for a in record.get("adoptions") or [] if a["project"] == project), key=lambda a: a["time"])

    def adopted(self, publish):
        """Rule R's `reset-adopted`: a version left for the poller named (it or a newer one) by the first adoption
        after a reset, published before that adoption."""
        if publish["mode"] != "poll":
            return False
        for reset in self.resets:
            first = next((a for a in self.adoptions if a["time"] >= reset), None)
            if first and first["version"] >= publish["version"] and publish["time"] < first["time"]:
                return True
        return False

    def missing(self, route, publish):
        """The rule that excuses `publish` not reaching a target of `route`: "discarded", "reset-adopted" or None."""
        if (route["name"], publish["version"]) in self.discarded:
            return "discarded"
        # An older version published before the discard, which no newer ping reached (the caller's rule A found none):
        # the discarded ping stood for it (superseding and catch-up polling fold older versions into the newest).
        if any(name == route["name"] and publish["version"] < version and publish["time"] < time
               for name, version, time in self.discards):
            return "discarded"
        if self.adopted(publish):
            return "reset-adopted"
        return None

    def after_reset(self, route, routed):
        """Rule R's `reset-stale` for the route's pings `routed`: a reset began after every newer ping the older one
        follows was recorded and before the older one's request started, and no ping of a version newer than the
        older one's to an audience covering its was recorded between the reset and that request."""
        def excused(older, newers):
            start = older["send"]["start"]
            for reset in self.resets:
                if not (all(n["time"] < reset for n in newers) and reset < start):
                    continue
                if not any(p["version"] > older["version"] and reset <= p["time"] < start
                           and covers(route, p["audience"], older["audience"]) for p in routed):
                    return True
            return False
        return excused if self.resets else None


def retried(ping):
    """Whether an operator's retry sent the ping (its send belongs to an `admin retry` line)."""
    return ping["send"] is not None and ping["send"].get("by") == ADMIN_RETRY


# -- the invariants -------------------------------------------------------------------------------------------------


class Check:
    def __init__(self, invariant, project, scope):
        self.invariant, self.project, self.scope = invariant, project, scope
        self.problems = []  # (time, text)
        self.excused = []  # (rule, (project, seq)): the pings a rule excused

    def fail(self, at, text):
        self.problems.append((at, text))

    def excuse(self, rule, ping):
        self.excused.append((rule, (ping["project"], ping["seq"])))

    def excuse_target(self, rule, publish, route, target):
        """A version's obligation to a target met by `rule` (not a ping: counted by project, route, version, target)."""
        self.excused.append((rule, (publish["project"], route["name"], publish["version"], target)))

    @property
    def ok(self):
        return not self.problems


def guarded(errors, lock, name, target, *args):
    """Runs one of the campaign's threads (the publisher, the fault scheduler, a sender): an exception in it is the
    campaign's own failure, recorded in `errors` (which fail the run's `campaign` check), never a thread that dies
    quietly and leaves its projects unchecked (issue #49)."""
    try:
        target(*args)
    except BaseException as error:
        with lock:
            errors.append(f"{clock(time.time())} the {name} thread died: {error!r}"[:2000])


def projects_of(record):
    """The campaign's projects: the record's list (older records have none), and any project published to."""
    return sorted(set(record.get("projects") or []) | {p["project"] for p in record["publishes"]})


def operator_versions(record, project):
    """The versions operators and odd senders sent for `project` (`record["operator"]`: {project, version, …} each, or
    a bare version for any project): an operator's `POST /admin/send`, an outlier's webhook. A reset, a retry or a
    discard sends no version of its own."""
    versions = set()
    for sent in record.get("operator") or []:
        if not isinstance(sent, dict):
            versions.add(int(sent))
        elif sent.get("project") == project and sent.get("kind", "send") in ("send", "outlier"):
            versions.add(int(sent["version"]))
    return versions


def versions_of(record, project):
    """The versions a ping of `project` may carry: the campaign's publishes, and what operators and odd senders sent
    (operator_versions)."""
    return {p["version"] for p in record["publishes"] if p["project"] == project} | operator_versions(record, project)


def operator_acts(record, project):
    """The project's operator acts as the campaign recorded them (dicts with a kind: `send` or `outlier`)."""
    return [a for a in record.get("operator") or [] if isinstance(a, dict) and a.get("kind") and a.get("project") == project]


def check(record):
    """Checks the invariants per project and route over a campaign's record; returns a list of Check (each passed or
    failed with its problems, and the pings a rule excused). The record is plain data: the routes, the projects, the
    emulator's records (`messages`, all projects), the replicas' `sends` and `leases` (parse_log), every answer a
    sender got, every publish, the fault log (kind, start, end, detail with the pid a kill, pause or term stopped), the
    `plan` ("seeded" or "script") and the `outcome` (whether the end was quiet, the campaign's own errors)."""
    routes = record.get("routes") or ROUTES
    pings = parse_pings(record["messages"]) + parse_calls(record.get("calls") or [], len(record["messages"]))
    match_sends(pings, record.get("sends") or [])
    faults, leases, answers = record["faults"], record.get("leases") or [], record["answers"]
    acked = {(a["project"], a["version"]) for a in answers if a.get("status") in (200, 202)}
    projects = projects_of(record)
    checks = []
    for project in projects:
        published = sorted((p for p in record["publishes"] if p["project"] == project), key=lambda p: p["version"])
        timeline = sorted(published, key=lambda p: p["time"])
        mine = [p for p in pings if p["project"] == project]
        versions = versions_of(record, project)
        # An operator's send or an outlier's ping says nothing of what the project's devices were told last and makes
        # no real version stand down (docs/webhook.md): known, and left out of every comparison between versions.
        aside = operator_versions(record, project) - {p["version"] for p in published}
        ops = Operators(record, project)
        for route in routes:
            routed = sorted((p for p in mine if p["route"] == route["name"]), key=lambda p: p["seq"])
            # An operator's retry reaches devices (lost, newest, waves) but is a deliberate resend: never a duplicate,
            # a stale ping or the newest's last ping (docs/replicas.md, "Retries and discards").
            reaching = [p for p in routed if p["version"] not in aside]
            real = [p for p in reaching if not retried(p)]
            undone = (routed, timeline, (record.get("initial") or {}).get(project))
            after_reset = ops.after_reset(route, real)
            lost = check_lost(project, route, published, reaching, acked, undone, ops)
            checks.append(lost)
            checks.append(check_newest(project, route, published, real, faults, undone, ops, reaching, after_reset))
            checks.append(check_duplicates(project, route, real, faults, leases))
            checks.append(check_stale(project, route, real, faults, after_reset))
            if "waves" in route:
                checks.append(check_waves(project, route, published, real, faults, leases, ops, reaching))
            for ping in filter(retried, routed):
                lost.excuse("retried", ping)  # counted where it counts: it reaches devices
            checks.append(check_known(project, route, routed, versions))
        checks.append(check_unrouted(project, routes, mine))
        checks.append(check_settled(project, published, answers))
        checks += check_operator(project, routes, operator_acts(record, project), mine)
    checks.append(check_strangers(projects, pings))
    checks.append(check_quiet(record.get("outcome")))
    checks.append(check_campaign(record, projects))
    return checks


def check_lost(project, route, published, routed, acked, undone=None, ops=None):
    """Nothing acknowledged is lost: each version acknowledged (200/202), or left for the poller on a project that
    polls, reaches every topic it must reach with a ping carrying it or a newer version, unless its change there was
    undone before that topic's devices were told (`undone`: the route's every ping, the publishes in time order and
    the initial values, for `reverted`)."""
    result = Check("lost", project, route["name"])
    for publish in published:
        version = publish["version"]
        if (project, version) not in acked and not publish.get("polling"):
            continue  # never acknowledged and no poller to find it: nobody promised anything
        for target in sorted(required_targets(route, publish["changed"])):
            if not any(p["version"] >= version and covers(route, p["audience"], target) for p in routed):
                if undone and reverted(route, publish, target, *undone):
                    result.excuse_target("reverted", publish, route, target)
                    continue
                rule = ops and ops.missing(route, publish)
                if rule:
                    result.excuse_target(rule, publish, route, target)
                    continue
                why = "acknowledged" if (project, version) in acked else "left for the poller"
                result.fail(publish["time"], f"version {version} ({why}, changed {publish['changed']}) never reached {target}")
    return result


def check_newest(project, route, published, routed, faults, undone=None, ops=None, reaching=None, after_reset=None):
    """The newest version arrives: it reaches every topic it must reach (`reaching`: an operator's retry too; unless
    its change there was undone before that topic's devices were told, `reverted`, or rule R or a discard excuses
    it), and is the last ping to each audience it reached (an older ping rule B or R excuses aside)."""
    result = Check("newest", project, route["name"])
    if not published:
        return result
    newest = published[-1]
    version = newest["version"]
    for target in sorted(required_targets(route, newest["changed"])):
        if not any(p["version"] == version and covers(route, p["audience"], target) for p in (reaching or routed)):
            if undone and reverted(route, newest, target, *undone):
                result.excuse_target("reverted", newest, route, target)
                continue
            rule = ops and ops.missing(route, newest)
            if rule:
                result.excuse_target(rule, newest, route, target)
                continue
            last = [p["version"] for p in routed if covers(route, p["audience"], target)][-1:]
            result.fail(newest["time"], f"newest version {version} never reached {target} (its last ping: {last or 'none'})")
    for audience in sorted({p["audience"] for p in routed if p["version"] == version}):
        there = [p for p in routed if p["audience"] == audience]
        fresh = [p for p in there if p["version"] == version]
        for later in (p for p in there if p["seq"] > fresh[-1]["seq"] and p["version"] < version):
            rule = stale_rule(later, [p for p in fresh if p["seq"] < later["seq"]], faults, after_reset)
            if rule:
                result.excuse(rule, later)
            else:
                result.fail(later["time"], f"the last ping to {audience} carries {later['version']} ({sent_by(later)}), "
                                           f"not the newest {version} ({sent_by(fresh[-1])})")
    return result


def check_duplicates(project, route, routed, faults, leases):
    """No duplicates beyond the documented ones: a version goes to one audience at most once, twice only under rule
    A or C, never three times."""
    result = Check("duplicates", project, route["name"])
    groups = collections.defaultdict(list)
    for ping in routed:
        groups[(ping["audience"], ping["version"])].append(ping)
    for (audience, version), same in sorted(groups.items(), key=lambda item: item[1][0]["seq"]):
        if len(same) >= 3:
            result.fail(same[2]["time"], f"version {version} sent {len(same)} times to {audience}: "
                                         + ", ".join(sent_by(p) for p in same))
        elif len(same) == 2:
            rule = second_send_rule(same[0], same[1], faults, leases)
            if rule:
                result.excuse(rule, same[1])
            else:
                result.fail(same[1]["time"], f"version {version} sent twice to {audience} ({sent_by(same[0])}, then "
                                             f"{sent_by(same[1])}) and neither rule A nor rule C excuses it")
    return result


def check_stale(project, route, routed, faults, after_reset=None):
    """Nothing stale after fresh: no ping of an older version to an audience after a ping of a newer version to an
    audience that covers it was recorded, unless rule B excuses it. An older ping to an audience that covers the newer
    one's without being covered by it is not stale (counted as covers-wider)."""
    result = Check("stale", project, route["name"])
    for index, ping in enumerate(routed):
        newer = [n for n in routed[:index] if n["version"] > ping["version"]]
        covering = [n for n in newer if covers(route, n["audience"], ping["audience"])]
        if covering:
            rule = stale_rule(ping, covering, faults, after_reset)
            if rule:
                result.excuse(rule, ping)
            else:
                seen = covering[-1]
                result.fail(ping["time"], f"version {ping['version']} sent to {ping['audience']} ({sent_by(ping)}) after "
                                          f"version {seen['version']} to {seen['audience']} ({sent_by(seen)})")
        elif any(covers(route, ping["audience"], n["audience"]) for n in newer):
            result.excuse("covers-wider", ping)
    return result


def check_waves(project, route, published, routed, faults, leases, ops=None, reaching=None):
    """Waves: every shard topic of the newest version's wave is pinged exactly once with that version (twice only
    under rule A or C; an operator's retry reaches it too, and a discard excuses it)."""
    result = Check("waves", project, route["name"])
    if not published:
        return result
    version = published[-1]["version"]
    for topic in shard_topics(route):
        same = [p for p in routed if p["audience"] == topic and p["version"] == version]
        rule = second_send_rule(same[0], same[1], faults, leases) if len(same) == 2 else None
        if not same and any(p["audience"] == topic and p["version"] == version for p in (reaching or [])):
            continue  # an operator's retry sent it
        rule = rule or (ops and not same and ops.missing(route, published[-1]))
        if not same and rule:
            result.excuse_target(rule, published[-1], route, topic)
        elif not same:
            result.fail(published[-1]["time"], f"shard {topic} never got the newest version {version}")
        elif rule:
            result.excuse(rule, same[1])
        elif len(same) > 1:
            result.fail(same[-1]["time"], f"shard {topic} got the newest version {version} {len(same)} times: "
                                          + ", ".join(sent_by(p) for p in same))
    return result


def check_known(project, route, routed, versions):
    """Every ping of the route carries a version the campaign published (or an operator sent), and a replica logged
    sending it (a ping is matched to a send)."""
    result = Check("known", project, route["name"])
    for ping in routed:
        if ping["version"] not in versions:
            result.fail(ping["time"], f"a ping to {ping['audience']} carries version {ping['version']}, which the "
                                      f"campaign never published ({sent_by(ping)})")
        if ping["send"] is None:
            result.fail(ping["time"], f"version {ping['version']} to {ping['audience']} ({ping['name']}): no replica "
                                      f"logged sending it")
        if ping.get("signed") is False:
            result.fail(ping["time"], f"version {ping['version']}'s call to {ping['audience']} ({ping['name']}) does not "
                                      f"verify with the route's secret")
    return result


def check_unrouted(project, routes, mine):
    """Every ping of the project names a configured route."""
    result = Check("known", project, "other routes")
    names = {r["name"] for r in routes}
    for ping in mine:
        if ping["route"] not in names:
            result.fail(ping["time"], f"version {ping['version']} to {ping['audience']} names route {ping['route']!r}, "
                                      f"which is not configured ({sent_by(ping)})")
    return result


def check_strangers(projects, pings):
    """Every ping belongs to one of the campaign's projects."""
    result = Check("known", "*", "other projects")
    for ping in pings:
        if ping["project"] not in projects:
            result.fail(ping["time"], f"a ping of project {ping['project']!r}, not one of the campaign's")
    return result


def check_settled(project, published, answers):
    """Every webhook the campaign sent was acknowledged (200/202) in the end, and none was refused (4xx): a sender
    that never got an answer is a relay that refused work, not a campaign that gave up."""
    result = Check("settled", project, "webhooks")
    for publish in published:
        if publish["mode"] == "poll":
            continue
        mine = [a for a in answers if a["project"] == project and a["version"] == publish["version"]]
        if not any(a.get("status") in (200, 202) for a in mine):
            last = mine[-1] if mine else {}
            result.fail(publish["time"], f"version {publish['version']}'s webhook was never acknowledged "
                                         f"(last answer {last.get('status') or last.get('error')})")
        for refused in (a for a in mine if a.get("status") and 400 <= a["status"] < 500):
            result.fail(refused["time"], f"version {publish['version']}'s webhook was refused: {refused['status']} {refused.get('body', '')[:200]}")
    return result


# What each kind of operator act must be answered (check_operator).
ANSWERED = {"send": (200,), "outlier": (200, 202), "reset": (200,), "retry": (200,), "discard": (200, 202)}


def check_operator(project, routes, acts, mine):
    """What operators and odd senders did reached FCM: an operator's send (`POST /admin/send`) was answered 200 with
    its pings accepted, and its route's topic got a ping of its version; an outlier's webhook was acknowledged
    (200/202) and every route's whole audience (a waved route's every shard) got a ping of its version, sent at once
    (docs/webhook.md, version numbers); a marks reset was answered 200; a retry 200 with its ping accepted, and a ping
    of its version reached the refused ping's audience by it; a discard 200 or 202. Returns a `settled` check (the
    answers) and a `lost` check (the pings)."""
    settled = Check("settled", project, "operators and odd senders")
    lost = Check("lost", project, "operators and odd senders")
    for act in acts:
        what = f"{act.get('act', act['kind'])}" + (f" of version {act['version']}" if act.get("version") is not None else "")
        answers = act.get("answers") or []
        wanted_status = ANSWERED.get(act["kind"], (200,))
        good = [a for a in answers if a.get("status") in wanted_status]
        if not good:
            last = answers[-1] if answers else {}
            settled.fail(act["time"], f"{what} was never answered {'/'.join(map(str, wanted_status))} "
                                      f"(last answer {last.get('status') or last.get('error') or act.get('why', 'none')} "
                                      f"{last.get('body', '')[:200]})".rstrip())
            continue
        if act["kind"] == "retry" and good[-1].get("outcome") == "superseded" and any(
                p["route"] == act["route"] and p["version"] > act["version"] and p["time"] <= good[-1]["time"] for p in mine):
            continue  # stood down behind a newer version FCM had accepted on its route (docs/replicas.md, retries)
        if act["kind"] in ("send", "retry") and any(a.get("outcome") != "accepted" for a in good[-1:]):
            settled.fail(good[-1]["time"], f"{what}: its pings ended {good[-1].get('outcome')!r}, not accepted")
            continue
        if act["kind"] in ("reset", "discard"):
            continue  # nothing of its own to send
        if act["kind"] == "retry":
            if not any(retried(p) and p["version"] == act["version"] and p["route"] == act["route"] for p in mine):
                lost.fail(act["time"], f"{what} (answered 200) sent no ping of its version on route {act['route']}")
            continue
        wanted = [r for r in routes if act["kind"] != "send" or r["name"] == act.get("route")]
        for route in wanted:
            for target in sorted(required_targets(route, ["default"])):
                if not any(p["route"] == route["name"] and p["version"] == act["version"] and covers(route, p["audience"], target)
                           for p in mine):
                    lost.fail(act["time"], f"{what} (answered {good[-1]['status']}) never reached {target} on route {route['name']}")
    return [settled, lost]


def check_quiet(outcome):
    """The end was quiet by the deadline."""
    result = Check("settled", "*", "the end was quiet")
    if outcome is not None and not outcome.get("quiet", True):
        result.fail(outcome.get("at", 0), f"not quiet by the deadline: {outcome.get('why', '?')}")
    return result


def check_campaign(record, projects):
    """The campaign did what it says: every fault of the plan carried out and none of its threads died (the
    outcome's errors), every project published to, and a seeded plan's minimum: each fault kind at least once, each
    publish mode at least MODE_MINIMUM times, each of its storage mode's operator acts once. A failure here is the
    campaign's own, reported apart."""
    result = Check("campaign", "*", "the plan was carried out")
    for error in (record.get("outcome") or {}).get("errors", []):
        result.fail(0, error)
    published = {p["project"] for p in record["publishes"]}
    for project in projects:
        if project not in published:
            result.fail(0, f"project {project} was never published to")
    if record.get("plan", "seeded") != "seeded":
        return result  # a test's script: its own sequence, no minimum
    kinds = collections.Counter(f["kind"] for f in record["faults"])
    wanted = STORAGE_KINDS[record.get("storage", "postgres")]
    missing = [kind for kind in wanted if not kinds[kind]]
    if missing:
        result.fail(0, f"no fault of kind {', '.join(missing)} was carried out (the minimum: each of "
                       f"{len(wanted)} kinds once)")
    modes = collections.Counter(p["mode"] for p in record["publishes"])
    short = [f"{mode} ({modes[mode]})" for mode in MODES if modes[mode] < MODE_MINIMUM]
    if short:
        result.fail(0, f"too few publishes of mode {', '.join(short)} (the minimum: {MODE_MINIMUM} of each mode)")
    acts = collections.Counter(a.get("act") for a in record.get("operator") or [] if isinstance(a, dict))
    wanted = STORAGE_ACTS[record.get("storage", "postgres")]
    undone = [act for act in wanted if not acts[act]]
    if undone:
        result.fail(0, f"no operator act {', '.join(undone)} was carried out (the minimum: each of {len(wanted)} acts once)")
    return result


# -- the report -----------------------------------------------------------------------------------------------------


def clock(t):
    return datetime.fromtimestamp(t).strftime("%H:%M:%S.%f")[:-3]


def sent_by(ping):
    """Who sent a ping and when: `recorded 12:00:01.123, sent by replica-1/4242 at 12:00:01.120`."""
    send = ping["send"]
    if send is None:
        return f"recorded {clock(ping['time'])}, no send logged"
    return f"recorded {clock(ping['time'])}, sent by {send['process']}/{send['pid']} at {clock(send['start'])}"


def excused_counts(checks):
    """How many pings each rule excused (a ping excused by one rule in two checks counts once)."""
    pings = collections.defaultdict(set)
    for c in checks:
        for rule, key in c.excused:
            pings[rule].add(key)
    return {rule: len(pings[rule]) for rule in RULES}


def context(t, project, scope, record, window=12.0):
    """The events within `window` seconds of `t` (the project's publishes, answers, pings, leases taken and the
    sends of the checked route; every fault), in time order, for a violation's report."""
    events = []
    for p in record["publishes"]:
        if p["project"] == project and abs(p["time"] - t) <= window:
            how = f" to v{p['rollback_of']} via {p['via']}" if p["mode"] == "rollback" else ""
            events.append((p["time"], f"publish  v{p['version']} {p['mode']}{how} changed={p['changed']}"))
    for a in operator_acts(record, project):
        if abs(a["time"] - t) <= window:
            last = (a.get("answers") or [{}])[-1]
            events.append((a["time"], f"operator v{a['version']} {a['act']} ({a['kind']}, route {a.get('route') or 'every one'}) "
                                      f"to {a.get('target', '?')}: {last.get('status') or last.get('error')} {last.get('outcome', '')}".rstrip()))
    for a in record["answers"]:
        if a["project"] == project and abs(a["time"] - t) <= window:
            events.append((a["time"], f"answer   v{a['version']} {a.get('status') or a.get('error')} from {a['target']} {a.get('outcome', '')}"))
    for p in parse_pings([m for m in record["messages"] if m["project"] == project]):
        if abs(p["time"] - t) <= window:
            events.append((p["time"], f"ping     v{p['version']} {p['route']} -> {p['audience']} {p['name']}"))
    for s in record.get("sends") or []:
        if s["project"] == project and route_name(s["route"]) == scope and abs(s["start"] - t) <= window:
            ended = f"{s['outcome']} at {clock(s['end'])} {s['fcm_message'] or ''}" if s["outcome"] else "no outcome logged"
            events.append((s["start"], f"send     v{s['version']} {s['route']} -> {s['audience']} by {s['process']}/{s['pid']} "
                                       f"attempt {s['attempt']}: {ended}".rstrip()))
    for lease in record.get("leases") or []:
        if lease["project"] == project and abs(lease["time"] - t) <= window:
            events.append((lease["time"], f"lease    taken by {lease['process']}/{lease['pid']} (epoch {lease['epoch']})"))
    for f in record["faults"]:
        end = f["end"] if f["end"] is not None else f["start"]
        if f["start"] - window <= t <= end + window:
            events.append((f["start"], f"fault    {f['kind']} {f['target']} until {clock(end)} {json.dumps(f['detail'])}"))
    return [f"    {clock(at)} {text}" for at, text in sorted(events, key=lambda e: e[0])]


def report(checks, record, out=sys.stdout):
    """Prints the table (faults, publishes, answers, pings and sends, the pings each rule excused, the violations per
    invariant), each violation with the seed and the events around it, and `N passed, N failed`."""
    seed, faults, publishes = record["seed"], record["faults"], record["publishes"]
    kinds = collections.Counter(f["kind"] for f in faults)
    statuses = collections.Counter(str(a.get("status") or "error") for a in record["answers"])
    modes = collections.Counter(p["mode"] for p in publishes)
    failed = [c for c in checks if not c.ok]
    by_invariant = collections.Counter()
    for c in failed:
        by_invariant[c.invariant] += len(c.problems)
    excused = excused_counts(checks)
    print(f"seed                 {seed}", file=out)
    print(f"faults injected      {sum(kinds.values())}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())), file=out)
    print(f"publishes            {len(publishes)}: " + ", ".join(f"{k} {n}" for k, n in sorted(modes.items())), file=out)
    print(f"answers              {len(record['answers'])}: " + ", ".join(f"{k} {n}" for k, n in sorted(statuses.items())), file=out)
    acts = collections.Counter(a.get("act", a.get("kind")) for a in record.get("operator") or [] if isinstance(a, dict))
    print(f"operator acts        {sum(acts.values())}: " + ", ".join(f"{k} {n}" for k, n in sorted(acts.items())), file=out)
    print(f"pings                {len(record['messages'])} (sends logged {len(record.get('sends') or [])}, "
          f"leases taken {len(record.get('leases') or [])})", file=out)
    print("excused              " + ", ".join(f"{rule} {excused[rule]}" for rule in RULES), file=out)
    print("violations           " + ", ".join(f"{k} {by_invariant.get(k, 0)}" for k in INVARIANTS), file=out)
    for c in failed:
        for at, text in c.problems:
            print(f"\nVIOLATION [{c.invariant}] seed {seed}, project {c.project}, {c.scope}: {text}", file=out)
            print(f"  replay: python Tests/interop/campaign.py --seed {seed} {record.get('replay', '')}".rstrip(), file=out)
            if at:
                print("  events within 12 s (a ping's time is when its request reached FCM, a send's when it started):", file=out)
                print("\n".join(context(at, c.project, c.scope, record)), file=out)
    print(f"\n{len(checks) - len(failed)} passed, {len(failed)} failed", file=out)
    return not failed


# ----------------------------------------------------------------------------------------------------------------
# Processes
# ----------------------------------------------------------------------------------------------------------------


class Child:
    """A child process whose output goes to a log file and is read line by line in the background, so a wait is
    woken by the line it waits for."""

    def __init__(self, args, log_path, env=None):
        self.lines = []
        self.changed = threading.Condition()
        self.log = open(log_path, "a", buffering=1)  # line by line: readable while the campaign runs
        self.log.write(f"---- {' '.join(map(str, args))} at {clock(time.time())}\n")
        self.proc = subprocess.Popen([str(a) for a in args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env={**os.environ, **(env or {})}, start_new_session=True)
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self):
        for line in self.proc.stdout:
            self.log.write(line)
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
            with LINES:  # a wait for polled state (conftest.until) looks again at every line
                LINES.notify_all()
        self.log.flush()
        with self.changed:
            self.changed.notify_all()

    def wait_for(self, predicate, timeout=60, after=0):
        """The first line (from the `after`-th) for which predicate holds; fails when the process ends or time is up."""
        deadline = time.time() + timeout
        with self.changed:
            while True:
                for line in self.lines[after:]:
                    if predicate(line):
                        return line
                after = len(self.lines)
                if self.proc.poll() is not None or time.time() > deadline:
                    tail = "".join(self.lines[-30:])
                    raise AssertionError(f"{self.proc.args[:2]} did not print the expected line:\n{tail}")
                self.changed.wait(timeout=0.5)

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None

    def signal(self, sig):
        if self.alive():
            os.kill(self.proc.pid, sig)

    def stop(self):
        """SIGSTOP, then the moment the whole process had stopped: a pause's start. A process runs, and logs, until the
        signal lands on every thread, so the time before sending it would put the pause before lines the process
        printed after it (seed 870426: a send logged 1 ms after it, which rule A then did not excuse). The kernel
        tells the parent once the last thread has stopped (`waitpid` with `WUNTRACED`), so this waits for that report.
        It holds Popen's own lock meanwhile: should the process exit instead, this call reaps it, records its exit
        status for Popen, and a concurrent `poll()` waits rather than finding no child."""
        if self.stopped():
            return time.time()  # stopped already: its stop was reported before, and no second report comes
        self.signal(signal.SIGSTOP)
        with self.proc._waitpid_lock:
            if self.proc.returncode is None:
                try:
                    _, status = os.waitpid(self.pid, os.WUNTRACED)
                except ChildProcessError:
                    pass  # reaped already
                else:
                    if not os.WIFSTOPPED(status):
                        self.proc.returncode = os.waitstatus_to_exitcode(status)
        return time.time()

    def stopped(self):
        """Every thread stopped (`T`), or the process gone, by /proc."""
        try:
            tasks = os.listdir(f"/proc/{self.pid}/task")
        except FileNotFoundError:
            return True
        for task in tasks:
            try:
                state = Path(f"/proc/{self.pid}/task/{task}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except (FileNotFoundError, ProcessLookupError, IndexError):
                continue  # the thread ended meanwhile
            if state not in ("T", "t", "Z", "X"):
                return False
        return True

    def kill(self):
        """SIGKILL, then the moment the process was reaped: a kill's start, for the reason `stop` gives."""
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=10)
        return time.time()

    def end(self, timeout=15):
        """SIGCONT (a paused process cannot stop), SIGTERM, then SIGKILL if it lingers."""
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.flush()


def program(name):
    path = shutil.which(name) or next((f"{d}/{name}" for d in ("/usr/sbin", "/sbin") if os.access(f"{d}/{name}", os.X_OK)), None)
    if not path:
        raise Missing(f"{name} is not installed (apt-get install {name})")
    return path


class Emulator:
    """`rc-relay emulator` for one project: FCM and Remote Config, with faults injected at /emulator/faults."""

    def __init__(self, project, directory):
        self.project = project
        self.key_file = directory / f"key-{project}.json"
        self.child = Child([BINARY, "emulator", "--port", "0", "--key-file", self.key_file, "--project", project],
                           directory / f"emulator-{project}.log")
        line = self.child.wait_for(lambda l: "fcm-emulator listening" in l, timeout=30)
        self.url = line.split("listening on ")[1].split(" ")[0]

    def inject(self, fault):
        requests.post(self.url + "/emulator/faults", json=fault, timeout=10).raise_for_status()

    def publish(self, template):
        answer = requests.post(f"{self.url}/emulator/remote-config/{self.project}/publish", data=json.dumps(template), timeout=10)
        answer.raise_for_status()
        return answer.json()

    def rollback(self, number):
        """Remote Config's rollback to version `number`: a new version (updateType ROLLBACK) whose template is its."""
        answer = requests.post(f"{self.url}/emulator/remote-config/{self.project}/rollback", params={"versionNumber": number}, timeout=10)
        answer.raise_for_status()
        return answer.json()

    def stats(self):
        return requests.get(self.url + "/emulator/stats", timeout=10).json()

    def messages(self):
        return requests.get(self.url + "/emulator/messages", timeout=30).json()

    def drain(self, sends, remote_config):
        """Uses up faults still queued: each request takes one before the emulator looks at its token, so an
        unauthenticated request consumes a fault and sends nothing (there is no call that clears only faults)."""
        def hit(method, path):
            try:
                requests.request(method, self.url + path, data="{}", timeout=60)
            except requests.RequestException:
                pass  # a dropped connection is a fault used up too
        from concurrent.futures import ThreadPoolExecutor
        calls = [("POST", f"/v1/projects/{self.project}/messages:send")] * sends
        calls += [("GET", f"/v1/projects/{self.project}/remoteConfig:listVersions")] * remote_config
        with ThreadPoolExecutor(16) as pool:  # latency faults sleep: side by side
            list(pool.map(lambda call: hit(*call), calls))


class GoogleFront:
    """With several projects: one address for FCM and Remote Config, as Google has, that nginx routes by project to
    each project's emulator (an emulator trusts the key of one project only). Plain HTTP, like the emulator."""

    def __init__(self, emulators, directory):
        directory.mkdir(exist_ok=True)
        for sub in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (directory / sub).mkdir(exist_ok=True)
        self.port = free_port()
        locations = "\n".join(
            f"        location /v1/projects/{e.project}/ {{ proxy_pass {e.url}; }}" for e in emulators)
        (directory / "nginx.conf").write_text(f"""
{"user root;" if os.geteuid() == 0 else ""}
daemon off;
worker_processes 1;
pid {directory}/nginx.pid;
error_log {directory}/error.log warn;
events {{ worker_connections 1024; }}
http {{
    access_log off;
    client_body_temp_path {directory}/body;
    proxy_temp_path {directory}/proxy;
    fastcgi_temp_path {directory}/fastcgi;
    uwsgi_temp_path {directory}/uwsgi;
    scgi_temp_path {directory}/scgi;
    server {{
        listen 127.0.0.1:{self.port};
        client_max_body_size 8m;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_read_timeout 300s;
        proxy_buffering off;
{locations}
    }}
}}
""")
        self.child = Child([program("nginx"), "-p", directory, "-c", directory / "nginx.conf", "-e", directory / "error.log"],
                           directory / "nginx.out")
        wait_for_port(self.port, self.child)
        self.url = f"http://127.0.0.1:{self.port}"


def wait_for_port(port, child, seconds=15):
    import socket

    def listening():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return True
        except OSError:
            return False

    assert until(lambda: not child.alive() or listening(), seconds), f"nothing listens on {port}"
    if not child.alive():
        raise AssertionError(f"{child.proc.args[0]} exited: {''.join(child.lines)}")


class Replica:
    """One `rc-relay serve`, on a port it keeps across restarts (so the front's upstreams stay valid)."""

    def __init__(self, index, directory, config, env, binary=BINARY):
        self.index, self.directory, self.env, self.binary = index, directory, env, binary
        self.port = free_port()
        self.config = directory / f"replica-{index}.yaml"
        self.config.write_text(json.dumps({**config, "server": {**config["server"], "port": self.port}}, indent=1))
        self.log_path = directory / f"replica-{index}.log"
        self.url = f"http://127.0.0.1:{self.port}"
        self.webhook = self.url + "/webhooks/remote-config"
        self.child = None
        self.incarnations = []  # every process this replica has been, the current one last: each one's lines
        self.paused = False

    def start(self):
        self.child = Child([self.binary, "serve", "--config", self.config], self.log_path,
                           env={"TEST_WEBHOOK_SECRET": SECRET, **self.env})
        self.incarnations.append(self.child)
        self.child.wait_for(lambda l: "rc-relay listening" in l, timeout=60)

    def logs(self):
        """(sends, leases, adoptions) of every process this replica has been (parse_log), each under its own pid."""
        sends, leases, adoptions = [], [], []
        for child in self.incarnations:
            with child.changed:
                lines = list(child.lines)
            more_sends, more_leases, more_adoptions = parse_log(self.name, child.pid, lines)
            sends += more_sends
            leases += more_leases
            adoptions += more_adoptions
        return sends, leases, adoptions

    @property
    def name(self):
        return f"replica-{self.index}"

    def alive(self):
        return self.child is not None and self.child.alive()


# ----------------------------------------------------------------------------------------------------------------
# The campaign
# ----------------------------------------------------------------------------------------------------------------


class Options:
    def __init__(self, seed, minutes=1.5, replicas=3, projects=2, nginx=False, lease=3, poll_interval=10, poll_grace=3,
                 plant=None, directory=None, quiet_deadline=240, storage="postgres"):
        self.seed, self.minutes, self.replicas, self.projects, self.nginx = seed, minutes, replicas, projects, nginx
        self.lease, self.poll_interval, self.poll_grace = lease, poll_interval, poll_grace
        # `plant`: bugs (PLANTS, comma-separated) the replicas run with, from the test-only rc-relay-planted.
        self.plant, self.directory, self.quiet_deadline = plant, directory, quiet_deadline
        # Not on PostgreSQL: one replica (the spool and memory are one process's own).
        self.storage = storage
        if storage != "postgres":
            self.replicas = 1

    def replay(self):
        return (f"--minutes {self.minutes} --replicas {self.replicas} --projects {self.projects}"
                + (" --nginx" if self.nginx else "") + (f" --plant {self.plant}" if self.plant else "")
                + (f" --storage {self.storage}" if self.storage != "postgres" else ""))


def deal(seed, cards):
    """A deck: the cards in an order the seed decides."""
    deck = list(cards)
    random.Random(seed).shuffle(deck)
    return deck


def template_of(values):
    """A template whose greeting has a default and a conditional value for each of two conditions the aware route
    maps to topics."""
    return {
        "conditions": [{"name": "ios_ja", "expression": "device.language in ['ja']"},
                       {"name": "ios_ko", "expression": "device.language in ['ko']"}],
        "parameters": {"greeting": {"defaultValue": {"value": values["default"]},
                                    "conditionalValues": {"ios_ja": {"value": values["ios_ja"]}, "ios_ko": {"value": values["ios_ko"]}}}},
    }


def changed_between(before, after):
    """What a template's values changed from `before` to `after` (dicts of VALUES): the keys whose value differs, in
    VALUES's order; none (the whole audience: the templates differ in nothing) when they are the same."""
    return [key for key in VALUES if before[key] != after[key]]


class Campaign:
    def __init__(self, options):
        self.options = options
        self.seed = options.seed
        self.directory = Path(options.directory or tempfile.mkdtemp(prefix=f"rc-relay-campaign-{options.seed}-"))
        self.directory.mkdir(parents=True, exist_ok=True)
        self.projects = [f"rc-campaign-{i}" for i in range(options.projects)]
        self.lock = threading.Lock()
        self.publishes, self.answers, self.faults = [], [], []
        self.senders = []
        self.stopping = threading.Event()  # the stream and the faults stop
        self.finished = threading.Event()  # the deadline for senders has passed
        self.published = threading.Condition()
        self.values = {p: {"default": "hello-0", "ios_ja": "ja-0", "ios_ko": "ko-0"} for p in self.projects}
        # Each version's values per project (a rollback's change is what differs between the current template and the
        # one it rolls back to), and a lock that makes each publish's values, its version and its record one step.
        self.templates = {p: {} for p in self.projects}
        self.initial = {p: dict(values) for p, values in self.values.items()}  # version 1's
        self.publishing = threading.Lock()
        self.operator = []  # what operators and odd senders did (OPERATOR_ACTS), as the record's `operator` list
        self.cluster = self.front = self.google = self.proxy = self.receiver = None
        self.emulators, self.replicas = {}, []
        self.injected = collections.Counter()  # faults queued per (project, endpoint), to drain at the end
        self.errors = []  # what went wrong in the campaign itself (a fault that could not be carried out)
        self.retried = set()  # the failed pings operator_retry retried already
        self.holds = {}  # project: until when no publish goes to it (a kill mid-wave waits for its take-over)
        # The plan's decks (docs/replicas.md, "Volume"): each fault kind once and each publish mode MODE_MINIMUM times,
        # in a seeded order, dealt before the plan draws at random; the stream goes on past --minutes until both are.
        self.fault_deck = deal(f"{self.seed}/fault-deck", STORAGE_DECKS[options.storage])
        self.mode_deck = deal(f"{self.seed}/mode-deck", MODES * MODE_MINIMUM)

    # -- set-up ----------------------------------------------------------------------------------------------------

    @property
    def shared(self):
        """Whether the replicas share PostgreSQL (else one replica keeps its own state: the spool, or memory)."""
        return self.options.storage == "postgres"

    def start(self):
        # The HTTP target's receiver, with its own seeded storm (HOOK_FAULTS).
        storm = random.Random(f"{self.seed}/receiver")

        def answer():
            draw = storm.random()
            for chance, fault in HOOK_FAULTS:
                if draw < chance:
                    return fault
                draw -= chance
            return (200, {})

        self.receiver = Receiver(answer=answer)
        if self.shared:
            self.cluster = Cluster()
        for project in self.projects:
            self.emulators[project] = Emulator(project, self.directory)
            # Version 1 exists before any replica starts: the first poll adopts it, and the campaign's versions follow.
            first = self.emulators[project].publish(template_of(self.values[project]))
            self.templates[project][int(first["versionNumber"])] = dict(self.values[project])
        if len(self.projects) > 1:
            self.google = GoogleFront(list(self.emulators.values()), self.directory / "google-front")
            google_url = self.google.url
        else:
            google_url = self.emulators[self.projects[0]].url
        config = self.relay_config(google_url)
        plant = self.options.plant
        if plant and not os.access(PLANTED_BINARY, os.X_OK):
            raise AssertionError(f"{PLANTED_BINARY} is not built: `swift build` builds it beside rc-relay")
        env, binary = ({"RC_RELAY_PLANT": plant}, PLANTED_BINARY) if plant else ({}, BINARY)
        self.replicas = [Replica(i, self.directory, config, env, binary) for i in range(self.options.replicas)]
        for replica in self.replicas:
            replica.start()
        if self.options.nginx:
            self.start_proxy()
        self.wait_until_every_project_is_held_and_polled()

    def relay_config(self, google_url):
        data = {"CONFIG_STATE": "STALE", "CONFIG_VERSION": "{{version}}"}
        routes = [{"name": r["name"], "webhook": {"url": self.receiver.url, "secrets": [HOOK_SECRET]}} if "webhook" in r
                  else {**{k: v for k, v in r.items()}, "data": {**data, "ROUTE": r["name"]}} for r in ROUTES]
        return {
            "server": {"host": "127.0.0.1", "trustedProxies": ["127.0.0.1/32"]},
            "fcm": {"credentialsFile": str(self.emulators[self.projects[0]].key_file), "baseURL": google_url},
            "remoteConfig": {"baseURL": google_url, "timeoutSeconds": 5},
            "webhook": {"secrets": [{"env": "TEST_WEBHOOK_SECRET"}]},
            "admin": {"tokens": [ADMIN]},
            "log": {"format": "json", "level": "debug"},  # debug: each request to FCM is said before it starts
            "delivery": {"answerWithinSeconds": 2, "baseDelaySeconds": 0.2, "maxDelaySeconds": 1, "quotaDelaySeconds": 1,
                         "drainSeconds": 1, "maxAttempts": 100},
            **self.storage_config(),
            "poll": {"intervalSeconds": self.options.poll_interval, "graceSeconds": self.options.poll_grace},
            "projects": [{"id": p, "credentialsFile": str(self.emulators[p].key_file), "routes": routes} for p in self.projects],
        }

    def storage_config(self):
        """The storage mode's settings: the shared store, the spool beside the campaign's files, or nothing (memory)."""
        if self.shared:
            return {"store": {"postgres": {"url": self.cluster.url, "leaseSeconds": self.options.lease}}}
        if self.options.storage == "spool":
            return {"delivery": {"answerWithinSeconds": 2, "baseDelaySeconds": 0.2, "maxDelaySeconds": 1, "quotaDelaySeconds": 1,
                                 "drainSeconds": 1, "maxAttempts": 100, "spoolDirectory": str(self.directory / "spool")}}
        return {}

    def start_proxy(self):
        from test_deploy import start_proxy
        upstream = ";\n    server ".join(f"127.0.0.1:{r.port}" for r in self.replicas)
        self.proxy = start_proxy("nginx", self.directory / "front", upstream)

    def wait_until_every_project_is_held_and_polled(self, timeout=90):
        """Publishing starts once each project has a holder that has polled it (its first poll adopts version 1; a
        version published before that first poll would be adopted unpinged, which is no fault of the relay's)."""
        def ready():
            polled = all(self.emulators[p].stats().get("remoteConfigRequests", 0) > 0 for p in self.projects)
            return len(self.holders()) == len(self.projects) and polled and all(self.adopted(p) for p in self.projects)

        if not until(ready, timeout):
            raise AssertionError(f"not every project was held and polled within {timeout} s: holders {self.holders()}")

    def adopted(self, project):
        """Whether a replica's first poll of the project took version 1 as relayed (its log line, or the shared mark of
        the newest version relayed where the binary keeps one)."""
        if any("adopted the current version" in line and project in line for r in self.replicas for line in r.child.lines):
            return True
        return bool(self.sql(f"SELECT relayed FROM rc_relay_marks WHERE project = '{project}'"))

    # -- the database ----------------------------------------------------------------------------------------------

    def sql(self, statement, timeout=3):
        """psql with a time limit (a paused PostgreSQL would hang it); None when the database does not answer (or
        there is none: the spool, memory)."""
        if not self.cluster:
            return None
        command = [str(self.cluster.bin / "psql"), "-h", "127.0.0.1", "-p", str(self.cluster.port), "-U", "postgres",
                   "-d", "rc_relay", "-At", "-c", statement]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd="/tmp", stdin=subprocess.DEVNULL,
                                  env={**os.environ, "PGCONNECT_TIMEOUT": str(timeout)})
        except subprocess.TimeoutExpired:
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    def holders(self):
        """{project: replica} from rc_relay_held (the holder is `host/pid/random`); from the replicas' logs when the
        database does not answer. With one replica of its own (the spool, memory): that replica, while it runs."""
        if not self.shared:
            return {project: self.replicas[0] for project in self.projects if self.replicas[0].alive()}
        rows = self.sql("SELECT name, holder FROM rc_relay_held")
        found = {}
        if rows is not None:
            for row in filter(None, rows.splitlines()):
                name, holder = row.split("|", 1)
                pid = int(holder.split("/")[-2])
                replica = next((r for r in self.replicas if r.alive() and r.child.pid == pid), None)
                if replica:
                    found[name.removeprefix("project/")] = replica
            return found
        for project in self.projects:
            latest = None
            for replica in self.replicas:
                if not replica.alive():
                    continue
                for line in replica.child.lines:
                    if "project lease taken" in line and project in line:
                        stamp = json.loads(line).get("ts", "")
                        if latest is None or stamp > latest[0]:
                            latest = (stamp, replica)
            if latest:
                found[project] = latest[1]
        return found

    def pending_events(self):
        """Events acknowledged and not settled: rows of rc_relay_outbox, or files of the spool; none in memory (what is
        not delivered is a 503 its sender retries)."""
        if self.options.storage == "spool":
            spool = self.directory / "spool"
            return len(list(spool.glob("*.json"))) if spool.exists() else 0
        if self.options.storage == "memory":
            return 0
        answer = self.sql("SELECT count(*) FROM rc_relay_outbox WHERE NOT settled")
        return None if answer is None else int(answer)

    def postgres_pids(self):
        postmaster = int((self.cluster.dir / "data" / "postmaster.pid").read_text().split()[0])
        children = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster:
                        children.append(int(entry.name))
                except (OSError, IndexError, ValueError):
                    continue
        return postmaster, children

    # -- publishing and sending ------------------------------------------------------------------------------------

    def publish(self, project, changed, mode, redeliver=False, rng=None, avoid=None):
        """Publishes the next template of `project` in Remote Config (a real, increasing version) and announces it by
        `mode`: `bare` (project 0 only: a bare version names no project), `binary`, `structured`, or `poll` (nothing:
        the poller must find it)."""
        with self.publishing:
            values = self.values[project]
            with self.lock:
                counter = sum(1 for p in self.publishes if p["project"] == project) + 1
            for key in changed:
                values[key] = f"{key}-{counter}"
            version = self.emulators[project].publish(template_of(values))
            record = {"project": project, "version": int(version["versionNumber"]), "time": time.time(), "mode": mode,
                      "changed": list(changed), "polling": True, "redeliver": redeliver, "avoid": avoid, "values": dict(values)}
            self.recorded(record)
        return self.announce(record, version, rng)

    def rollback(self, project, via, rng, redeliver=False, send_rng=None):
        """Rolls `project` back in Remote Config to one of its ten versions before the current one (drawn by `rng`; the
        current one itself while it has no other): a new version whose template is that one's, announced by a
        CloudEvent (`via`: binary or structured). Its change is what differs between the current template and that
        one's (none: the whole audience)."""
        with self.publishing:
            kept = sorted(self.templates[project])
            earlier = kept[:-1][-10:] or kept[-1:]
            number = rng.choice(earlier)
            before, after = self.values[project], self.templates[project][number]
            version = self.emulators[project].rollback(number)
            record = {"project": project, "version": int(version["versionNumber"]), "time": time.time(), "mode": "rollback",
                      "via": via, "rollback_of": number, "changed": changed_between(before, after), "polling": True,
                      "redeliver": redeliver, "avoid": None, "values": dict(after)}
            self.values[project] = dict(after)
            self.recorded(record)
        return self.announce(record, version, send_rng)

    def recorded(self, record):
        """A publish made: its values kept for later rollbacks, its record added, waiting faults woken."""
        self.templates[record["project"]][record["version"]] = dict(record["values"])
        with self.lock:
            self.publishes.append(record)
        with self.published:
            self.published.notify_all()

    def announce(self, record, version, rng=None):
        """Starts the publish's sender (none for a version left for the poller)."""
        if record["mode"] != "poll":
            self.start_sender(f"sender of {record['project']} v{version['versionNumber']}", self.send, record, version,
                              rng or random.Random())
        return record

    def start_sender(self, name, work, *args):
        """A sender's thread (guarded: one that dies fails the campaign), which the end's quiet waits for."""
        sender = threading.Thread(target=guarded, args=(self.errors, self.lock, name, work, *args), daemon=True)
        with self.lock:
            self.senders.append(sender)
        sender.start()

    def body(self, record, version, msg_id):
        project = record["project"]
        how = record.get("via") or record["mode"]  # a rollback's announcement: binary or structured
        if how == "bare":
            return {"Content-Type": "application/json"}, json.dumps(version).encode()
        event = CloudEvent({"type": UPDATED, "source": f"//firebaseremoteconfig.googleapis.com/projects/{project}",
                            "id": f"ce-{msg_id}", "datacontenttype": "application/json"}, version)
        message = (to_binary_event if how == "binary" else to_structured_event)(event)
        return dict(message.headers), message.body

    def target(self, rng, avoid=None):
        if self.proxy:
            return "front", self.proxy["url"] + "/webhooks/remote-config"
        choices = [r for r in self.replicas if r is not avoid] or self.replicas
        replica = rng.choice(choices)
        return replica.name, replica.webhook

    def send(self, record, version, rng):
        """A sender as Eventarc is one: retries a 5xx, a 429 or a connection error later (Retry-After, at most 3 s)
        until it gets 200 or 202, or the campaign's deadline passes; re-signs each try, keeps its webhook-id. Some
        senders deliver the same event again to another replica once answered."""
        msg_id = f"msg_{record['project']}_{record['version']}_{rng.getrandbits(32):08x}"
        first = self.deliver(record, version, msg_id, rng)
        if record["redeliver"] and first is not None:
            self.deliver(record, version, msg_id, rng, avoid=first)

    def deliver(self, record, version, msg_id, rng, avoid=None, answers=None):
        """Delivers one signed webhook until it is answered 200/202 or refused; each answer goes to `answers` (the
        campaign's, by default)."""
        answers = self.answers if answers is None else answers
        session = requests.Session()
        if self.proxy:
            session.verify = self.proxy["cert"]
            session.trust_env = False  # REQUESTS_CA_BUNDLE would otherwise win over the throwaway certificate
        avoid = avoid or record.get("avoid")
        while not self.finished.is_set():
            name, url = self.target(rng, avoid=next((r for r in self.replicas if r.name == avoid), None))
            headers, body = self.body(record, version, msg_id)
            answer = {"project": record["project"], "version": record["version"], "webhook_id": msg_id, "target": name}
            try:
                response = session.post(url, data=body, headers={**headers, **signed_headers(body, msg_id)}, timeout=30)
                answer.update(status=response.status_code, body=response.text[:500], time=time.time())
                try:
                    parsed = response.json()
                    answer["outcome"] = f"{parsed.get('status', '')}{' duplicate' if parsed.get('duplicate') else ''}"
                except ValueError:
                    pass
            except requests.RequestException as error:
                answer.update(status=None, error=type(error).__name__, time=time.time())
                response = None
            with self.lock:
                answers.append(answer)
            if response is not None and response.status_code in (200, 202):
                return name
            if response is not None and 400 <= response.status_code < 500 and response.status_code != 429:
                return None  # refused: a retry cannot help (the checker reports it)
            delay = 1.0
            if response is not None and response.headers.get("Retry-After", "").isdigit():
                delay = min(3.0, max(0.5, float(response.headers["Retry-After"])))
            self.finished.wait(delay * rng.uniform(0.8, 1.2))
        return None

    def publisher(self, until):
        """The stream of publishes: every 0.5-3 s a project's template changes (or is rolled back), announced as
        `next_publish` says; 15 % of the webhooks are redelivered to another replica. It goes on past `until` until the
        plan is dealt."""
        rng = random.Random(f"{self.seed}/publish")
        while not self.stopping.wait(rng.uniform(0.5, 3.0)) and self.streaming(until):
            project, mode = self.next_publish(rng)
            changed = rng.choice(CHANGES)
            redeliver = mode != "poll" and rng.random() < 0.15
            send_rng = random.Random(f"{self.seed}/send/{project}/{rng.random()}")
            if mode == "rollback":
                self.rollback(project, rng.choice(["binary", "structured"]), rng, redeliver=redeliver, send_rng=send_rng)
            else:
                self.publish(project, changed, mode, redeliver=redeliver, rng=send_rng)

    def next_publish(self, rng):
        """(project, mode) of the next publish. First the mode deck: a bare version to the first project (a bare
        version names no project), a rollback to a project published to already, any other mode to a project not yet
        published to while there is one. Then at random: a random project (one not yet published to first), 18 % left
        for the poller, 10 % rolled back, the rest announced by a webhook (bare, binary or structured on the first
        project, binary or structured on the others)."""
        fresh = self.unpublished()
        self.wait_for_a_free_project()
        free = [p for p in self.projects if not self.held(p)] or self.projects
        fresh = [p for p in fresh if p in free]
        if self.mode_deck:
            mode = self.mode_deck.pop(0)
            if mode == "bare":
                self.wait_for_a_free_project(self.projects[0])
                return self.projects[0], mode
            if mode == "rollback":
                return rng.choice([p for p in free if p not in fresh] or free), mode
            return rng.choice(fresh or free), mode
        project = rng.choice(fresh or free)
        draw = rng.random()
        if draw < 0.18:
            return project, "poll"
        if draw < 0.28:
            return project, "rollback"
        if project == self.projects[0]:
            return project, rng.choice(["bare", "binary", "structured"])
        return project, rng.choice(["binary", "structured"])

    def held(self, project):
        """Whether publishes to the project are held back (a kill mid-wave waits for its take-over)."""
        with self.lock:
            return time.time() < self.holds.get(project, 0)

    def wait_for_a_free_project(self, project=None):
        """Until `project` (or any project) is not held back, or the campaign stops."""
        def free():
            return self.stopping.is_set() or (not self.held(project) if project else any(not self.held(p) for p in self.projects))
        until(free, 60)

    def unpublished(self):
        with self.lock:
            published = {p["project"] for p in self.publishes}
        return [p for p in self.projects if p not in published]

    def dealt(self):
        """Whether the plan's minimum is dealt: both decks, and a publish on every project."""
        return not self.fault_deck and not self.mode_deck and not self.unpublished()

    def streaming(self, until):
        """Whether the stream of publishes and faults goes on: until `until`, and past it until the plan is dealt
        (OVERTIME at most)."""
        now = time.time()
        return now < until or (not self.dealt() and now < until + OVERTIME)

    # -- faults ----------------------------------------------------------------------------------------------------

    def log_fault(self, kind, target, start, end=None, **detail):
        entry = {"kind": kind, "target": target, "start": start, "end": end, "detail": detail}
        with self.lock:
            self.faults.append(entry)
        return entry

    def pick_replica(self, rng, project=None):
        """The holder of a project (the one whose fault matters most) two times in three, else any replica."""
        holders = self.holders()
        project = project or rng.choice(self.projects)
        if project in holders and rng.random() < 0.67:
            return holders[project], f"holder of {project}"
        return rng.choice(self.replicas), "a replica"

    # A fault that stops a replica's process names it in its detail: `process` (replica-N) and `pid`, the process it
    # stopped (a restarted replica is another process). A rolling restart logs one `term` per replica it stops.

    def kill(self, replica, role, down, why="any moment"):
        pid = replica.child.pid
        start = replica.child.kill()
        time.sleep(down)  # the fault itself: how long the replica stays down
        replica.start()
        self.log_fault("kill", f"{replica.name} ({role})", start, time.time(), process=replica.name, pid=pid,
                       down=round(down, 1), when=why)

    def pause(self, replica, role, seconds):
        pid = replica.child.pid
        start = replica.child.stop()
        replica.paused = True
        time.sleep(seconds)  # the fault itself: how long the replica stays paused
        replica.child.signal(signal.SIGCONT)
        replica.paused = False
        self.log_fault("pause", f"{replica.name} ({role})", start, time.time(), process=replica.name, pid=pid,
                       seconds=round(seconds, 1))

    def term(self, replica, role):
        """A graceful stop (SIGTERM), waited for, then a start."""
        start, pid = time.time(), replica.child.pid
        replica.child.signal(signal.SIGTERM)
        try:
            code = replica.child.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            replica.child.signal(signal.SIGKILL)
            code = "did not stop within 30 s: killed"
        replica.start()
        self.log_fault("term", f"{replica.name} ({role})", start, time.time(), process=replica.name, pid=pid, exit=code)

    def pause_postgres(self, seconds):
        stopped = self.stop_postgres()
        time.sleep(seconds)  # the fault itself: how long PostgreSQL stays stopped
        self.continue_postgres(stopped, seconds)

    def stop_postgres(self):
        """SIGSTOP of the postmaster and every backend: (when, the processes), for continue_postgres."""
        postmaster, children = self.postgres_pids()
        for pid in [postmaster, *children]:
            os.kill(pid, signal.SIGSTOP)
        return time.time(), [*children, postmaster]

    def continue_postgres(self, stopped, seconds):
        start, pids = stopped
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        self.log_fault("pg_pause", "postgres", start, time.time(), seconds=round(seconds, 1), processes=len(pids))

    def wait_for_first_shard(self, holder, publish):
        """Until the holder starts the publish's wave (its first `sending ping to FCM` of a shard): the moment its
        other shards' turns are still to come. False when it does not within 15 s (another replica delivers it)."""
        wanted = (f'"msg":"{SENDING}FCM"', '"route":"waved@', f'"project":"{publish["project"]}"', f'"version":"{publish["version"]}"')
        try:
            holder.child.wait_for(lambda line: all(part in line for part in wanted), timeout=15)
            return True
        except AssertionError:
            return False

    def aimed(self, attempt, tries=3):
        """A fault aimed at a moment (a wave under way): tried again, with the next publish, when that moment did not
        come (no webhook's wave within 15 s, or another replica delivered it), at most `tries` times, so a short
        campaign does not skip the fault a planted bug is caught by."""
        for _ in range(tries):
            if self.stopping.is_set() or attempt():
                return

    def kill_mid_wave(self, rng):
        """The holder killed 1.5-3 s after it started a webhook's wave (inside the wave's 4 s spread, and past rule A's
        second after the immediate routes' pings were accepted, so their progress must have been written)."""
        publish = self.wait_for_publish(timeout=15, announced=True)
        holder = publish and self.holders().get(publish["project"])
        if not holder or not self.wait_for_first_shard(holder, publish):
            return False
        time.sleep(rng.uniform(1.5, 3))  # the fault's moment, drawn by the seed, counted from the wave's start
        # No newer version of the project until another replica can have taken it over: the one that does would send
        # that one and stand the wave's older routes down, and the kill would miss its aim.
        down = rng.uniform(0.5, 3)
        with self.lock:
            self.holds[publish["project"]] = time.time() + down + self.options.lease + 2
        self.kill(holder, f"holder of {publish['project']}", down, why="mid-wave")
        return True

    def pause_waking_into_db_stall(self, rng):
        """The holder of a project paused mid-wave (its shards' turns due while it sleeps) for 2 to 3 leases; another
        replica takes the project over; PostgreSQL is stopped half a second before the holder wakes and for 3 s after,
        so the woken holder's fence cannot ask the database and has only its claim's own bound to go by. The fence is
        asked twice per request (before the turn, and once the token is in hand), each ask waiting up to the store's
        statement timeout (a third of the lease here): the stall outlasts both."""
        publish = self.wait_for_publish(timeout=15, announced=True)
        holder = publish and self.holders().get(publish["project"])
        if not holder or not self.wait_for_first_shard(holder, publish):
            return False
        seconds = rng.uniform(2, 3) * self.options.lease
        pid = holder.child.pid
        start = holder.child.stop()
        time.sleep(seconds - 0.5)  # the fault itself: the holder stays paused, then PostgreSQL stops half a second before it wakes
        stopped = self.stop_postgres()
        time.sleep(0.5)
        holder.child.signal(signal.SIGCONT)
        self.log_fault("pause", f"{holder.name} (holder of {publish['project']}, waking into a database stall)", start, time.time(),
                       process=holder.name, pid=pid, seconds=round(seconds, 1))
        time.sleep(3.0)  # the fault itself: PostgreSQL stays stopped 3 s after the holder woke
        self.continue_postgres(stopped, 3.5)
        return True

    def freeze_while_the_lease_moves(self):
        """A project's holder frozen mid-wave for 0.4 of a lease, right after a renewal, while its lease expires in the
        database (as a database clock that steps forward, or an operator who expires it, would do): another replica
        takes the project over. The holder wakes with its claim still counting (half a lease from its renewal) and
        its confirmation older than a third of a lease, so only the database can tell it the lease moved."""
        publish = self.wait_for_publish(timeout=15, announced=True)
        holder = publish and self.holders().get(publish["project"])
        if not holder:
            return False
        name = f"project/{publish['project']}"
        if not self.wait_for_first_shard(holder, publish):
            return False  # the next shard's turn is to fall due while the holder is frozen
        # The lease counts while its holder's heartbeat does: a renewal moves the heartbeat's expiry (the view's).
        expiry = f"SELECT expires_at FROM rc_relay_held WHERE name = '{name}'"
        before = self.sql(expiry)
        if not until(lambda: self.sql(expiry) != before, self.options.lease):
            return False  # no renewal seen: the database is away (another fault); nothing to aim at
        pid = holder.child.pid
        start = holder.child.stop()
        self.sql(f"UPDATE rc_relay_leases SET expires_at = now() WHERE name = '{name}'")
        time.sleep(0.4 * self.options.lease)  # the fault itself: how long the holder stays frozen
        holder.child.signal(signal.SIGCONT)
        self.log_fault("pause", f"{holder.name} (holder of {publish['project']}, its lease expired in the database)", start,
                       time.time(), process=holder.name, pid=pid, seconds=round(0.4 * self.options.lease, 1), lease="moved")
        return True

    def restart_postgres(self, mode):
        start = time.time()
        self.cluster.run("pg_ctl", "-D", self.cluster.data, "-w", "-t", "300", "-m", mode, "-l", str(self.cluster.dir / "log"), "restart")
        self.log_fault("pg_restart", "postgres", start, time.time(), mode=mode)

    def inject(self, kind, project, fault):
        self.emulators[project].inject(fault)
        with self.lock:
            self.injected[(project, fault.get("endpoint", "send"))] += fault.get("count", 1)
        self.log_fault(kind, project, time.time(), None, **fault)

    def wait_for_remote_config_call(self, project, timeout):
        """Until the project's emulator sees a Remote Config request (a poll, or a template fetch): the moment to
        strike mid-poll."""
        before = self.emulators[project].stats().get("remoteConfigRequests", 0)

        def called():
            return self.stopping.is_set() or self.emulators[project].stats().get("remoteConfigRequests", 0) > before

        return until(called, timeout) and not self.stopping.is_set()

    def wait_for_publish(self, timeout, announced=None):
        """The next publish (or None): the moment a wave starts. `announced`: only one announced by a webhook (True),
        or only one left for the poller (False)."""
        def wanted(publish):
            return announced is None or (publish["mode"] != "poll") == announced

        with self.published:
            count = len(self.publishes)
            self.published.wait_for(lambda: any(wanted(p) for p in self.publishes[count:]) or self.stopping.is_set(),
                                    timeout=timeout)
            return next((p for p in self.publishes[count:] if wanted(p)), None)

    # The plan's faults (and operator acts) by weight, once the deck is dealt. `kill_mid_wave` and `kill_mid_poll` are
    # flavours of `kill` (logged `kill`); `term` is a rolling restart (one `term` logged per replica).
    FAULTS = [("kill", 3), ("kill_mid_wave", 2), ("kill_mid_poll", 1), ("kill_after_unannounced", 1), ("pause", 3),
              ("pause_waking_into_db_stall", 1), ("freeze_while_the_lease_moves", 1), ("term", 1), ("pg_pause", 2),
              ("pg_restart", 1), ("fcm_503", 2), ("fcm_429", 1), ("rc_503", 1), ("rc_slow", 1), ("fcm_slow", 1),
              ("operator_send", 1), ("outlier", 1), ("operator_send_then_restart", 1), ("marks_reset", 1),
              ("operator_retry", 1), ("operator_discard", 1)]

    def scheduler(self, until):
        """The seeded fault plan: a fault every 2-7 s, first each kind of the deck once (in its seeded order), then
        drawn by weight, until `until` and past it until the plan is dealt; each process fault ends (the replica
        restarted or resumed, PostgreSQL running) before the next begins."""
        rng = random.Random(f"{self.seed}/faults")
        # The mode's faults only (memory keeps nothing across a stop; the spool has no database).
        allowed = set(STORAGE_DECKS[self.options.storage])
        names, weights = zip(*[(name, weight) for name, weight in self.FAULTS if name in allowed])
        while not self.stopping.wait(rng.uniform(2, 7)) and self.streaming(until):
            kind = self.fault_deck.pop(0) if self.fault_deck else rng.choices(names, weights)[0]
            project = rng.choice(self.projects)
            try:
                self.fault(kind, project, rng)
            except Exception as error:  # a replica that would not start again, say: reported, and the plan goes on
                self.errors.append(f"{clock(time.time())} fault {kind} failed: {error!r}"[:2000])
                for replica in self.replicas:
                    if not replica.alive():
                        try:
                            replica.start()
                        except Exception as again:
                            self.errors.append(f"{replica.name} did not start again: {again!r}"[:2000])

    def fault(self, kind, project, rng):
        """Carries out one fault of the plan (a process fault to its end)."""
        lease = self.options.lease
        if kind == "kill":
            replica, role = self.pick_replica(rng, project)
            self.kill(replica, role, rng.uniform(0.5, 4))
        elif kind == "kill_mid_wave":
            self.aimed(lambda: self.kill_mid_wave(rng))
        elif kind == "kill_after_unannounced":

            # A version left for the poller, its project's holder killed before its next poll: the replica that takes
            # the project over must poll from the newest version relayed on record, not adopt what Remote Config has.
            publish = self.wait_for_publish(timeout=20, announced=False)
            holder = publish and self.holders().get(publish["project"])
            if holder:
                self.kill(holder, f"holder of {publish['project']}", rng.uniform(0.5, 3), why="after a version left for the poller")
        elif kind == "pause_waking_into_db_stall":
            self.aimed(lambda: self.pause_waking_into_db_stall(rng))
        elif kind == "freeze_while_the_lease_moves":
            self.aimed(self.freeze_while_the_lease_moves)
        elif kind == "kill_mid_poll":
            self.inject("rc_slow", project, {"endpoint": "remoteConfig", "latencyMs": 2000, "count": 1})
            if self.wait_for_remote_config_call(project, timeout=self.options.poll_interval + 3):
                holder = self.holders().get(project)
                if holder:
                    self.kill(holder, f"holder of {project}", rng.uniform(0.5, 3), why="mid-poll")
        elif kind == "pause":
            replica, role = self.pick_replica(rng, project)
            self.pause(replica, role, rng.uniform(1.3, 3) * lease)
        elif kind == "term":  # a rolling restart
            for replica in list(self.replicas):
                self.term(replica, "rolling restart")
        elif kind == "pg_pause":
            self.pause_postgres(rng.uniform(1, 6))
        elif kind == "pg_restart":
            self.restart_postgres(rng.choice(["fast", "immediate"]))
        elif kind == "fcm_503":
            self.inject(kind, project, {"status": 503, "count": rng.randint(3, 20)})
        elif kind == "fcm_429":
            self.inject(kind, project, {"status": 429, "errorCode": "QUOTA_EXCEEDED", "retryAfter": "1", "count": rng.randint(2, 6)})
        elif kind == "rc_503":
            self.inject(kind, project, {"endpoint": "remoteConfig", "status": 503, "count": rng.randint(2, 8)})
        elif kind == "rc_slow":
            self.inject(kind, project, {"endpoint": "remoteConfig", "latencyMs": rng.randint(1000, 4000), "count": rng.randint(1, 3)})
        elif kind == "fcm_slow":
            self.inject(kind, project, {"latencyMs": rng.randint(500, 2000), "count": rng.randint(2, 8)})
        elif kind == "operator_send":
            self.operator_send(project, rng, kind, rng.choice(self.replicas))
        elif kind == "outlier":
            self.outlier(rng, kind)
        elif kind == "operator_send_then_restart":
            self.operator_send_then_restart(project, rng)
        elif kind == "marks_reset":
            self.marks_reset(project, rng)
        elif kind == "operator_retry":
            self.operator_retry(project, rng)
        elif kind == "operator_discard":
            self.operator_discard(project, rng)

    # -- operators and odd senders ---------------------------------------------------------------------------------

    def operator_send(self, project, rng, act, replica):
        """An operator's `POST /admin/send` of a far version (FAR and a seeded number below it) on route `plain` to
        `replica`; asked again (at most 5 times, a second apart) after a connection error or a 5xx. Recorded in the
        `operator` list with every answer (status, the pings' outcomes)."""
        version = FAR + rng.randrange(FAR)
        entry = {"act": act, "kind": "send", "project": project, "version": version, "route": "plain", "target": replica.name,
                 "time": time.time(), "answers": []}
        with self.lock:
            self.operator.append(entry)
        body = {"project": project, "version": {"versionNumber": str(version)}, "route": "plain"}
        for _ in range(5):
            try:
                response = requests.post(replica.url + "/admin/send", json=body, headers={"Authorization": f"Bearer {ADMIN}"},
                                         timeout=120)
                answer = {"status": response.status_code, "time": time.time()}
                try:
                    answer["outcome"] = ",".join(d.get("status", "?") for d in response.json().get("deliveries", [])) or "none"
                except (ValueError, AttributeError):
                    answer["body"] = response.text[:500]
            except requests.RequestException as error:
                answer = {"status": None, "error": type(error).__name__, "time": time.time()}
            with self.lock:
                entry["answers"].append(answer)
            if answer["status"] is not None and answer["status"] < 500:
                break
            self.finished.wait(1)  # a sender's back-off, as `deliver`'s, cut short by the campaign's end
        return entry

    def outlier(self, rng, act):
        """An odd sender's signed bare version 9223372036854775807 (the first project's: a bare version names no
        project), to a random replica as a sender delivers a webhook (retried until 200/202), in the background. The
        relay relays it and moves no mark (docs/webhook.md, version numbers)."""
        project = self.projects[0]
        entry = {"act": act, "kind": "outlier", "project": project, "version": OUTLIER, "route": None, "time": time.time(),
                 "answers": []}
        with self.lock:
            self.operator.append(entry)
        record = {"project": project, "version": OUTLIER, "mode": "bare", "avoid": None}
        msg_id = f"msg_outlier_{rng.getrandbits(32):08x}"
        self.start_sender(f"outlier sender of {project}", self.deliver, record, {"versionNumber": OUTLIER}, msg_id,
                          random.Random(f"{self.seed}/outlier/{msg_id}"), None, entry["answers"])

    def operator_send_then_restart(self, project, rng):
        """The far-version silence of issue #49: an operator's far send to the project's holder, that holder restarted
        at once (SIGTERM, waited, started again), then a real version announced by a webhook and one left for the
        poller, each of which must still reach its topics (`lost`: a ping carrying it or a newer version)."""
        holder = self.holders().get(project) or rng.choice(self.replicas)
        self.operator_send(project, rng, "operator_send_then_restart", holder)
        self.term(holder, f"holder of {project}, right after an operator's far send")
        self.publish(project, rng.choice(CHANGES), rng.choice(["binary", "structured"]),
                     rng=random.Random(f"{self.seed}/send/{project}/{rng.random()}"))
        self.publish(project, rng.choice(CHANGES), "poll")

    def admin(self, entry, replica, method, path, outcome=False):
        """An operator's admin call to `replica`, asked again (at most 5 times, a second apart) after a connection
        error or a 5xx; each answer (status, time, for a send or retry its pings' outcomes) is added to `entry`'s.
        Returns the last response, or None."""
        response = None
        for _ in range(5):
            try:
                response = requests.request(method, replica.url + path, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=120)
                answer = {"status": response.status_code, "time": time.time()}
                if outcome:
                    try:
                        answer["outcome"] = response.json().get("status", "?")
                    except (ValueError, AttributeError):
                        answer["body"] = response.text[:500]
                elif response.status_code >= 300:
                    answer["body"] = response.text[:500]
            except requests.RequestException as error:
                response, answer = None, {"status": None, "error": type(error).__name__, "time": time.time()}
            with self.lock:
                entry["answers"].append(answer)
            if answer["status"] is not None and answer["status"] < 500:
                break
            self.finished.wait(1)
        return response

    def act(self, act, kind, project, **more):
        """A new entry of the `operator` list."""
        entry = {"act": act, "kind": kind, "project": project, "version": None, "route": None, "time": time.time(),
                 "answers": [], **more}
        with self.lock:
            self.operator.append(entry)
        return entry

    def marks_reset(self, project, rng):
        """An operator's `DELETE /admin/projects/{project}/marks` to a random replica (docs/operations.md): every
        replica forgets the project's marks. What may follow is rule R's (docs/replicas.md)."""
        replica = rng.choice(self.replicas)
        entry = self.act("marks_reset", "reset", project, target=replica.name)
        self.admin(entry, replica, "DELETE", f"/admin/projects/{project}/marks")

    def admin_deliveries(self, project, status, rng, timeout, wanted=lambda delivery: True):
        """The project's pings of `status` in `GET /admin/deliveries` on a random replica that are `wanted`, newest
        first, polled every 0.3 s until there are some or `timeout` passes (the shared history is a copy written moments
        after each change; a poll at every line the replicas print would be hundreds of requests a second). The filter
        is the poll's: an earlier act's ping still listed does not end the wait for this act's."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            replica = rng.choice(self.replicas)
            try:
                answer = requests.get(replica.url + "/admin/deliveries", params={"project": project, "status": status},
                                      headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
                found = [d for d in answer.json().get("deliveries", []) if wanted(d)] if answer.status_code == 200 else []
            except (requests.RequestException, ValueError):
                found = []
            if found or self.stopping.wait(0.3):
                return found
        return []

    def operator_retry(self, project, rng):
        """A ping FCM refuses for good (one `400 INVALID_ARGUMENT` queued in the project's FCM, and a real version
        announced by a CloudEvent to use it), retried by an operator: each `failed` ping of the project found within
        60 s is retried with `POST /admin/deliveries/{id}/retry` on a random replica (docs/replicas.md, "Retries and
        discards"). Refused pings of an admin send or retry are not the operator's to retry here. None found is the
        campaign's own failure."""
        self.inject("fcm_400", project, {"status": 400, "errorCode": "INVALID_ARGUMENT", "count": 1})
        self.publish(project, rng.choice(CHANGES), rng.choice(["binary", "structured"]),
                     rng=random.Random(f"{self.seed}/send/{project}/{rng.random()}"))
        failed = self.admin_deliveries(project, "failed", rng, 60,
                                       lambda d: d.get("origin") not in ("send", "retry") and d["id"] not in self.retried)
        self.retried.update(d["id"] for d in failed)
        if not failed:  # the campaign's own failure: the 400 waits for a ping nobody will retry
            self.end_storm(project)
            with self.lock:
                self.errors.append(f"{clock(time.time())} operator_retry: no failed ping of {project} within 60 s")
            return
        for delivery in failed:
            replica = rng.choice(self.replicas)
            entry = self.act("operator_retry", "retry", project, version=int(delivery["versionNumber"]),
                             route=route_name(delivery["route"]), target=replica.name, retry_of=delivery["id"])
            self.admin(entry, replica, "POST", f"/admin/deliveries/{delivery['id']}/retry", outcome=True)

    def end_storm(self, project):
        """Uses up the answers still queued in the project's FCM (`sendFaultsQueued`): an act's storm ends with the
        act, and the next act's admin send is not answered by it."""
        emulator = self.emulators[project]
        emulator.drain(emulator.stats().get("sendFaultsQueued", 0), 0)

    def operator_discard(self, project, rng):
        """A dead ping discarded by an operator: forty `503`s with `Retry-After: 3600` queued in the project's FCM (a
        wait past the retry deadline: each ping they answer is dead at once, its event kept and tried again), a real
        version announced by a CloudEvent; the newest dead ping of an event found within 60 s is discarded with
        `POST /admin/deliveries/{id}/discard` on a random replica, the next one after a 409 (it came alive or settled
        between the list and the discard: run 10), and the list read again, up to three times, when every one found
        answered 409."""
        self.inject("fcm_dead", project, {"status": 503, "retryAfter": "3600", "count": 40})
        self.publish(project, rng.choice(CHANGES), rng.choice(["binary", "structured"]),
                     rng=random.Random(f"{self.seed}/send/{project}/{rng.random()}"))
        tried = set()
        for _ in range(3):
            dead = self.admin_deliveries(project, "dead", rng, 60,
                                         lambda d: d.get("origin") in ("webhook", "poll", "spool") and d["id"] not in tried)
            for delivery in dead[:5]:
                tried.add(delivery["id"])
                replica = rng.choice(self.replicas)
                entry = self.act("operator_discard", "discard", project, version=int(delivery["versionNumber"]),
                                 route=route_name(delivery["route"]), target=replica.name, delivery_id=delivery["id"])
                response = self.admin(entry, replica, "POST", f"/admin/deliveries/{delivery['id']}/discard")
                if response is not None and response.status_code in (200, 202):
                    self.end_storm(project)
                    return
                with self.lock:
                    self.operator.remove(entry)  # not discardable any more (a 409): the next one
            if not dead:
                break
        self.end_storm(project)
        with self.lock:
            self.errors.append(f"{clock(time.time())} operator_discard: no dead ping of {project} could be discarded ({len(tried)} tried)")

    # -- the end ---------------------------------------------------------------------------------------------------

    def closing_crash(self):
        """The plan's last act: a version left for the poller, then every replica killed at once (a zone lost) and
        started again. It stays the project's newest, so the replica that takes the project over must find it by
        polling from the newest version relayed on record: a fresh process has no mark of its own. Its project is the
        first one no operator reset the marks of: after a reset, the first adoption may name the version (rule R,
        `reset-adopted`), and when the crash came before the reset's own poll, that excused the very loss this act is
        there to catch (a planted `shared-mark` missed twice in CI's length, 2026-12-04)."""
        with self.lock:
            reset = {entry["project"] for entry in self.operator if entry["kind"] == "reset"}
        project = next((p for p in self.projects if p not in reset), self.projects[0])
        self.publish(project, ["default"], "poll")
        start = time.time()
        stopped = []
        for replica in self.replicas:
            stopped.append((replica, replica.child.pid))
            replica.child.signal(signal.SIGKILL)
        for replica, pid in stopped:
            replica.child.proc.wait(timeout=10)
            self.log_fault("kill", f"{replica.name} (every replica at once)", start, time.time(), process=replica.name, pid=pid,
                           down=0, when="after a version left for the poller, the last act")
        for replica, _ in stopped:
            replica.start()

    def resume_everything(self):
        """Every replica running and not paused, PostgreSQL running, the emulators' queued faults used up."""
        for replica in self.replicas:
            if replica.alive():
                replica.child.signal(signal.SIGCONT)
            else:
                replica.start()
        if self.cluster:
            postmaster, children = self.postgres_pids()
            for pid in [*children, postmaster]:
                os.kill(pid, signal.SIGCONT)
        for (project, endpoint), count in self.injected.items():
            self.emulators[project].drain(count if endpoint == "send" else 0, count if endpoint == "remoteConfig" else 0)

    def wait_quiet(self):
        """Quiet: every sender answered 200/202, no pending row in rc_relay_outbox, and no new FCM message for a
        window longer than a poll interval plus its grace plus the longest quiet period or wave (a version left for
        the poller has then had its poll), counted from the last publish too. Polled state, with a deadline."""
        window = self.options.poll_interval + self.options.poll_grace + 4 + 3
        deadline = time.time() + self.options.quiet_deadline
        last_publish = max([p["time"] for p in self.publishes] or [0])
        state = {"count": None, "changed_at": time.time(), "why": "?"}

        def quiet():
            senders = sum(1 for s in self.senders if s.is_alive())
            pending = self.pending_events()
            count = sum(e.stats().get("accepted", 0) for e in self.emulators.values())
            if count != state["count"]:
                state["count"], state["changed_at"] = count, time.time()
            quiet_for = time.time() - max(state["changed_at"], last_publish)
            state["why"] = f"{senders} senders unanswered, {pending} pending events, FCM quiet for {quiet_for:.0f} of {window} s"
            return senders == 0 and pending == 0 and quiet_for >= window

        if until(quiet, deadline - time.time()):
            return {"quiet": True, "at": time.time()}
        return {"quiet": False, "at": time.time(), "why": state["why"]}

    def collect(self, outcome, plan):
        """The campaign's record (campaign.json, what `check` reads): `plan` is "seeded" (the random publisher and
        scheduler, held to the minimum) or "script" (a test's fixed sequence); `sends` and `leases` are every
        replica process's log lines (parse_log), and `adoptions` its polls' adoptions; `operator` what operators and
        odd senders did (an admin send of a far version, an outlier's webhook, a marks reset, a retry, a discard: act,
        kind, project, version, route, target, time, every answer)."""
        messages, sends, leases, adoptions = [], [], [], []
        for project in self.projects:
            messages += self.emulators[project].messages()
        calls = [call_of(call) for call in (self.receiver.calls if self.receiver else [])]
        for replica in self.replicas:
            more_sends, more_leases, more_adoptions = replica.logs()
            sends += more_sends
            leases += more_leases
            adoptions += more_adoptions
        return {"seed": self.seed, "replay": self.options.replay(), "plan": plan, "storage": self.options.storage, "routes": ROUTES,
                "projects": self.projects, "publishes": self.publishes,
                "answers": sorted(self.answers, key=lambda a: a["time"]), "faults": self.faults, "messages": messages, "calls": calls,
                "sends": sorted(sends, key=lambda s: s["start"]), "leases": sorted(leases, key=lambda l: l["time"]),
                "adoptions": sorted(adoptions, key=lambda a: a["time"]), "initial": self.initial, "operator": self.operator, "outcome": outcome, "directory": str(self.directory)}

    def stop(self):
        self.stopping.set()
        self.finished.set()
        if self.proxy:
            from test_deploy import stop_proxy
            stop_proxy(self.proxy)
        for replica in self.replicas:
            if replica.child:
                replica.child.end()
        if self.google:
            self.google.child.end()
        for emulator in self.emulators.values():
            emulator.child.end()
        if self.receiver:
            self.receiver.stop()
        if self.cluster:
            self.cluster.destroy()


def call_of(call):
    """A receiver's call as the record keeps it: the project, route and version its body names, its webhook-id, when
    it came (the epoch), the status it was answered, and whether it verifies with the route's secret (standardwebhooks)."""
    try:
        data = json.loads(call["body"])["data"]
    except (ValueError, KeyError, TypeError):
        data = {}
    # Verified as a receiver would, by the reference library, at the time the call was signed: its signature is one the
    # library makes of the same id, timestamp and body (`verify` itself would refuse a call older than 5 minutes).
    headers = call["headers"]
    try:
        stamp = datetime.fromtimestamp(int(headers["webhook-timestamp"]), tz=timezone.utc)
        expected = Webhook(HOOK_SECRET).sign(headers["webhook-id"], stamp, call["body"].decode())
        signed = expected in headers["webhook-signature"].split(" ")
    except (WebhookVerificationError, ValueError, KeyError):
        signed = False
    return {"project": data.get("project", "?"), "route": data.get("route", "?"), "version": data.get("versionNumber"),
            "name": call["headers"].get("webhook-id"), "time": call["time"], "status": call["status"], "signed": signed}


def run(options, script=None, out=sys.stdout):
    """Runs a campaign; returns (checks, record). `script(campaign, until)`, when given, replaces the random
    publisher and fault scheduler (a test's fixed fault sequence)."""
    campaign = Campaign(options)
    try:
        print(f"campaign seed {options.seed}: {options.replay()}, files in {campaign.directory}", file=out, flush=True)
        campaign.start()
        until = time.time() + options.minutes * 60
        if script:
            script(campaign, until)
        else:
            workers = [threading.Thread(target=guarded, args=(campaign.errors, campaign.lock, name, work, until), daemon=True)
                       for name, work in (("publisher", campaign.publisher), ("fault scheduler", campaign.scheduler))]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        campaign.stopping.set()
        print(f"campaign seed {options.seed}: stream ended; resuming everything and waiting for quiet", file=out, flush=True)
        campaign.resume_everything()
        if not script and campaign.options.storage != "memory":  # memory keeps nothing across a crash
            campaign.closing_crash()
        outcome = {**campaign.wait_quiet(), "errors": campaign.errors}
        campaign.finished.set()
        record = campaign.collect(outcome, "script" if script else "seeded")
        (campaign.directory / "campaign.json").write_text(json.dumps(record, indent=1))
        checks = check(record)
        return checks, record
    finally:
        campaign.stop()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=None, help="the plan's seed (default: a random one, printed)")
    parser.add_argument("--minutes", type=float, default=5)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--projects", type=int, default=2)
    parser.add_argument("--nginx", action="store_true", help="send webhooks through the deploy kit's nginx")
    parser.add_argument("--plant", help=f"run rc-relay-planted with these bugs (comma-separated: {', '.join(PLANTS)}), "
                                        "to see the checker catch them")
    parser.add_argument("--storage", choices=STORAGES, default="postgres",
                        help="replicas on PostgreSQL (default), or one replica with the spool, or one in memory")
    parser.add_argument("--dir", help="where logs and campaign.json go (default: a new temporary directory)")
    parser.add_argument("--check", metavar="CAMPAIGN_JSON", help="only check a finished campaign's campaign.json again")
    args = parser.parse_args(argv)
    # A SIGTERM (timeout, a CI job cancelled) ends the campaign through its clean-up: the children run in sessions of
    # their own and would outlive it otherwise.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.check:
        record = json.loads(Path(args.check).read_text())
        checks = check(record)
        return 0 if report(checks, record) else 1
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 1_000_000)
    options = Options(seed, args.minutes, args.replicas, args.projects, args.nginx, plant=args.plant, directory=args.dir,
                      storage=args.storage)
    checks, record = run(options)
    ok = report(checks, record)
    print(f"files: {record['directory']}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
